# Extending PyTorch — from tensor ops to CUDA kernels
#
#   make test      create/update .venv, then run every notebook under strict nbval, plus tests/
#   make book      create/update .venv, then build the site into _build/html (warnings fail it)
#   make execute   re-run every notebook in place, top to bottom, storing fresh outputs
#   make clean     remove the site, caches and extension builds (keeps .venv)
#
# PYTHON picks the interpreter that creates .venv: make test PYTHON=python3.12

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-requirements
NOTEBOOKS ?= notebooks
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: test book execute nbval clean check-python check-compiler

test: $(STAMP) check-compiler
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NOTEBOOKS) tests

# Strict nbval over the notebooks alone (tests/ use this target to prove that nbval is strict).
nbval: $(STAMP)
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(PYTEST_EXTRA) $(NOTEBOOKS)

book: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo
	@echo "The book is in _build/html. Open _build/html/index.html in a browser."

execute: $(STAMP) check-compiler
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

clean:
	rm -rf _build .pytest_cache .hypothesis extensions/build extensions/*.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
	find extensions -name '*.so' -delete

# The virtual environment is rebuilt only when requirements.txt or the package metadata change.
$(STAMP): requirements.txt extensions/pyproject.toml | check-python
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu install the venv module: apt-get install python3-venv" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet -r requirements.txt
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
