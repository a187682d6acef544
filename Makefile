# Extending PyTorch — from tensor ops to CUDA kernels
#
#   make test      create/update .venv, build the C++ extensions, then run every notebook under
#                  strict nbval, plus tests/
#   make book      create/update .venv, then build the site into _build/html (warnings fail it);
#                  needs no compiler: the site shows the notebooks' stored outputs
#   make build     compile the C++ extensions ahead of time (pip install --no-build-isolation -e)
#   make bench     benchmark the triplet loss implementations; prints a table, writes .bench/cpu.json
#   make execute   re-run every notebook in place, top to bottom, storing fresh outputs
#   make clean     remove the site, caches and extension builds (keeps .venv)
#   make repoint REPO=owner/name [BRANCH=main]   point badges, Colab cells and site at a fork
#   make check-site  build the site, then check every page in headless Chromium (screenshots in
#                  _build/screenshots/)
#   make check-cuda  build, link and load the CUDA extension without a GPU, in .venv-cuda (the CUDA
#                  build of torch): Colab's CPU runtime simulated, chapters 4 and 5 run there, kernels
#                  registered, SASS/PTX per architecture listed, the JIT build too (needs nvcc)
#
# PYTHON picks the interpreter that creates .venv: make test PYTHON=python3.12

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-requirements
NATIVE_STAMP := $(VENV)/.built-extensions
NATIVE_SOURCES := extensions/setup.py extensions/extending_pytorch/build_flags.py \
	$(wildcard extensions/csrc/*.cpp extensions/csrc/*.h extensions/csrc/cuda/*)
NOTEBOOKS ?= notebooks
# Notebooks starting with "_" (the chapter template) are not chapters: nbval skips them.
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --ignore-glob=notebooks/_*

# The CUDA build check's environment: the same requirements, but torch from the package index,
# which on Linux is the CUDA build. pip's --isolated ignores this machine's pip configuration
# (which may prefer a local CPU wheel of torch); cuobjdump lists the code in the library.
CUDA_VENV := .venv-cuda
CUDA_STAMP := $(CUDA_VENV)/.installed-requirements
CUDA_EXTRA := nvidia-cuda-cuobjdump==13.2.51

.PHONY: test book build bench execute clean repoint check-site check-cuda check-python check-compiler

test: $(NATIVE_STAMP)
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS) tests

build: $(NATIVE_STAMP)

bench: $(NATIVE_STAMP)
	$(BIN)/python -m extending_pytorch.bench --output .bench/cpu.json

book: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo
	@echo "The book is in _build/html. Open _build/html/index.html in a browser."

execute: $(NATIVE_STAMP)
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

check-site: book
	$(BIN)/python tools/check_site.py

check-cuda: $(CUDA_STAMP) | check-compiler
	$(CUDA_VENV)/bin/python tools/check_cuda.py

$(CUDA_STAMP): requirements.txt | check-python
	@test -x $(CUDA_VENV)/bin/python || $(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_VENV)/bin/python -m pip install --isolated --quiet --disable-pip-version-check \
	  -r requirements.txt $(CUDA_EXTRA)
	@$(CUDA_VENV)/bin/python -c 'import torch, sys; sys.exit(torch.version.cuda is None)' || { \
	  echo "error: $(CUDA_VENV) got a CPU-only torch; the CUDA build check needs the CUDA build." >&2; exit 1; }
	@touch $@

repoint: $(STAMP)
	@test -n "$(REPO)" || { echo "usage: make repoint REPO=owner/name [BRANCH=main]" >&2; exit 1; }
	$(BIN)/python tools/repoint.py $(REPO) --branch $(or $(BRANCH),main)

clean:
	rm -rf _build .pytest_cache .hypothesis .bench extensions/build extensions/*.egg-info
	find . \( -path ./$(VENV) -o -path ./$(CUDA_VENV) \) -prune -o -name __pycache__ -type d -exec rm -rf {} +
	find extensions \( -name "*.so" -o -name _build_info.json \) -delete
	rm -f $(NATIVE_STAMP)

# The virtual environment is rebuilt only when requirements.txt or the package metadata change.
$(STAMP): requirements.txt extensions/pyproject.toml | check-python
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu install the venv module: apt-get install python3-venv" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet -r requirements.txt
	EXTENDING_PYTORCH_SKIP_NATIVE=1 $(BIN)/python -m pip install --quiet --no-build-isolation -e extensions
	@touch $@

# The C++ extensions, compiled against the torch in .venv; rebuilt when their sources change.
$(NATIVE_STAMP): $(STAMP) $(NATIVE_SOURCES) | check-compiler
	$(BIN)/python -m pip install --quiet --no-build-isolation -e extensions
	@touch $@

check-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: '$(PYTHON)' was not found. Install Python 3.11 or newer, or run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "error: Python 3.11 or newer is needed (numpy 2.4 and scipy 1.17 require it), but '$(PYTHON)' is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())')." >&2; \
	  echo "       Run: make $(MAKECMDGOALS) PYTHON=python3.11 (or any newer python3.x)" >&2; exit 1; }

# The C++ chapters compile extensions with the compiler torch.utils.cpp_extension uses: $CXX, else c++.
check-compiler:
	@command -v $${CXX:-c++} >/dev/null 2>&1 || { \
	  echo "error: no C++ compiler found ('$${CXX:-c++}'). The C++ and CUDA chapters compile extensions." >&2; \
	  echo "       Install one (Debian/Ubuntu: apt-get install g++; macOS: xcode-select --install) or set CXX." >&2; exit 1; }
