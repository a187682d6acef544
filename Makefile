# Extending PyTorch — from tensor ops to CUDA kernels
#
#   make test      create/update .venv, build the C++ extensions, then run every notebook under
#                  strict nbval, plus tests/, on TEST_WORKERS processes (default 2; 0: in this one)
#   make book      create/update .venv, then build the site into _build/html (warnings fail it);
#                  needs no compiler: the site shows the notebooks' stored outputs
#   make build     compile the C++ extensions ahead of time (pip install --no-build-isolation -e)
#   make bench     benchmark the triplet loss implementations; prints a table, writes .bench/cpu.json
#   make execute   re-run every notebook in place, top to bottom, storing fresh outputs
#   make clean     remove the site, caches and extension builds (keeps .venv)
#   make repoint REPO=owner/name [BRANCH=main]   point badges, Colab cells and site at a fork
#   make student-copy DEST=dir   the chapters without their solutions, for a course repository: each
#                  solution cell a stub that raises NotImplementedError, every output cleared, the checks
#                  as they are: each runs in a namespace of its own that the answer cannot change
#                  (run_check), and one that compares with the official solution reads its outputs,
#                  recorded in extensions/extending_pytorch/exercise_records/; needs no torch
#   make check-site  build the site, then check every page in headless Chromium (screenshots in
#                  _build/screenshots/)
#   make check-cuda  build, link and load the CUDA extension without a GPU (the CUDA build of torch
#                  in .venv, needs nvcc): Colab's CPU runtime simulated, chapter 5 runs there,
#                  kernels registered, SASS/PTX per architecture listed, the JIT build too
#   make emulate   run the CUDA kernels' own sources on the CPU in the SIMT emulator, in every build mode
#                  (fast; memory: AddressSanitizer + UBSan; races: ThreadSanitizer); fails on any report;
#                  EMULATE_FLAGS=--modes=memory,races for some modes only
#   make gpu-report  on a machine with an NVIDIA GPU: the GPU tests, compute-sanitizer, Nsight Compute's
#                  bytes and the benchmark sweep, recorded in notebooks/data/gpu/ (JSON and Markdown); with
#                  the Python in GPU_PYTHON (default: .venv's if there is one, else python3), no .venv
#                  needed, the operators built by load_jit. Without a GPU it writes a record saying so
#                  to _build/gpu-report/. GPU_REPORT_FLAGS (default --parallel: the checks that neither time
#                  kernels nor read DRAM counters run side by side) takes "--budget 300 --quick" and so on.
#   make test-oldest  reader profile (a), a Linux laptop with a CPU torch and no CUDA toolkit: every
#                  notebook under strict nbval, and the tests whose subject depends on torch's version
#                  (not those marked same_on_every_torch), on the oldest supported torch ($(OLDEST_TORCH),
#                  CPU build) in .venv-oldest, from a copy of the working tree in .oldest/ (its extensions
#                  built against that torch), with the CUDA toolkit hidden from these processes only
#                  (tools/without_cuda_toolkit.sh; make test beside it keeps the toolkit)
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
# pytest-xdist: the notebooks and test modules shared out over TEST_WORKERS processes. --dist
# loadscope keeps each notebook (its cells run in order, in one kernel) and each test module
# on one process. TEST_WORKERS=0 runs everything in pytest's own process.
TEST_WORKERS ?= 2
XDIST_FLAGS = -n $(TEST_WORKERS) --dist loadscope
# The slowest tests and notebook cells, printed at the end of each run: where CI's minutes go.
DURATION_FLAGS = --durations=25 --durations-min=20

# The CUDA build check installs the book's package into a simulated Colab runtime, so it runs
# in an environment of its own: .venv-cuda sees every package of .venv (one line in a .pth
# file; the CUDA build of torch is not downloaded twice) and holds only what the check adds
# (cuobjdump, which lists the code in the library, and the package it builds).
CUDA_VENV := .venv-cuda
CUDA_STAMP := $(CUDA_VENV)/.installed-requirements
CUDA_EXTRA := nvidia-cuda-cuobjdump==13.2.51

# The oldest torch the book supports, and the triton that torch's CUDA build requires. Its
# environment takes every other pin from requirements.txt. It is reader profile (a)'s torch, the
# CPU build (+cpu, from PyTorch's CPU index; this book's CI has the wheel on local disk), so pip
# does not download the CUDA build and its CUDA libraries a second time.
OLDEST_TORCH := 2.13.0
OLDEST_TRITON := 3.7.1
OLDEST_VENV := .venv-oldest
# Where the CPU build of the oldest torch comes from (the package index has its CUDA build).
OLDEST_INDEX := https://download.pytorch.org/whl/cpu
OLDEST_STAMP := $(OLDEST_VENV)/.installed-requirements
OLDEST_TREE := .oldest
# Profile (a) has no CUDA toolkit. On a machine that has one, make test-oldest hides it from its own
# processes in a private mount namespace (see the script), so that the stored outputs are checked
# against what a laptop without nvcc prints; run from $(OLDEST_TREE), hence the path.
WITHOUT_CUDA := ../tools/without_cuda_toolkit.sh

.PHONY: gpu-report test test-oldest .venv-oldest book build bench execute emulate clean repoint student-copy check-site check-cuda check-python check-compiler

# With the CUDA build of torch and a CUDA toolkit but no GPU (this book's CI), importing
# torch.utils.cpp_extension logs "No CUDA runtime is found, using CUDA_HOME=..." with a time
# stamp: a fact about the machine that runs the notebooks, not about the book. The runs whose
# outputs are stored (make execute) and compared (make test) silence that one logger.
export TORCH_LOGS := -torch.utils.cpp_extension

# The emulator's sanitizer modes are `make emulate`'s; `make test` runs its fast mode.
test: $(NATIVE_STAMP)
	EXTENDING_PYTORCH_EMULATOR_MODES=fast $(BIN)/python -m pytest $(XDIST_FLAGS) $(DURATION_FLAGS) $(NBVAL_FLAGS) $(NOTEBOOKS) tests

# Not tied to .venv: a GPU machine may have its own torch and no network to build .venv with.
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
GPU_REPORT_FLAGS ?= --parallel
gpu-report:
	PYTHONPATH=extensions$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -m extending_pytorch.gpu_report $(GPU_REPORT_FLAGS)

emulate: $(NATIVE_STAMP)
	$(BIN)/python tools/emulate.py $(EMULATE_FLAGS)

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

$(CUDA_STAMP): $(STAMP)
	@$(BIN)/python -c 'import torch, sys; sys.exit(torch.version.cuda is None)' || { \
	  echo "error: $(VENV) has a CPU-only torch; the CUDA build check needs the CUDA build (the one pip installs on Linux)." >&2; exit 1; }
	rm -rf $(CUDA_VENV)
	$$($(BIN)/python -c 'import sys; print(sys._base_executable)') -m venv $(CUDA_VENV)
	$(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
	  "$$($(CUDA_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_book_venv.pth"
	$(CUDA_VENV)/bin/python -m pip install --quiet --disable-pip-version-check $(CUDA_EXTRA)
	touch $(CUDA_VENV)/.check-cuda-environment
	@touch $@

test-oldest: $(OLDEST_STAMP) | check-compiler
	rm -rf $(OLDEST_TREE) && mkdir $(OLDEST_TREE)
	git ls-files -z --cached --others --exclude-standard | \
	  tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(OLDEST_TREE)
	# A repository of its own, as a clone would be: some tests ask git which files there are.
	cd $(OLDEST_TREE) && git init --quiet --initial-branch=main && git add --all && \
	  git -c user.name=ci -c user.email=ci@localhost commit --quiet -m "working tree"
	cd $(OLDEST_TREE) && $(WITHOUT_CUDA) ../$(OLDEST_VENV)/bin/python -m pip install --quiet --no-build-isolation -e extensions
	cd $(OLDEST_TREE) && EXTENDING_PYTORCH_EMULATOR_MODES=fast $(WITHOUT_CUDA) ../$(OLDEST_VENV)/bin/python -m pytest $(XDIST_FLAGS) \
	  $(DURATION_FLAGS) $(NBVAL_FLAGS) -p no:cacheprovider -m "not same_on_every_torch" $(NOTEBOOKS) tests

.venv-oldest: $(OLDEST_STAMP)

# PyTorch's CPU index is added where it can be reached: without a network to it (this book's CI,
# whose pip finds the CPU wheel on local disk), pip would retry it for every package, for minutes.
$(OLDEST_STAMP): requirements.txt extensions/pyproject.toml | check-python
	@test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	sed -e 's/^torch==.*/torch==$(OLDEST_TORCH)+cpu/' -e 's/^triton==[^;]*/triton==$(OLDEST_TRITON)/' \
	  requirements.txt > $(OLDEST_VENV)/requirements.txt
	index=$$($(OLDEST_VENV)/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
	  $(OLDEST_INDEX)/ 2>/dev/null && echo "--extra-index-url $(OLDEST_INDEX)"); \
	  test -n "$$index" || echo "note: $(OLDEST_INDEX) cannot be reached; torch $(OLDEST_TORCH)+cpu must come from pip's other sources"; \
	  $(OLDEST_VENV)/bin/python -m pip install --quiet $$index -r $(OLDEST_VENV)/requirements.txt
	@$(OLDEST_VENV)/bin/python -c 'import torch, sys; sys.exit(torch.__version__ != "$(OLDEST_TORCH)+cpu" or torch.version.cuda is not None)' || { \
	  echo "error: $(OLDEST_VENV) did not get torch $(OLDEST_TORCH)'s CPU build." >&2; exit 1; }
	@touch $@

# Text only: the standard library's Python, no .venv (no torch to download).
repoint: | check-python
	@test -n "$(REPO)" || { echo "usage: make repoint REPO=owner/name [BRANCH=main]" >&2; exit 1; }
	$(PYTHON) tools/repoint.py $(REPO) --branch $(or $(BRANCH),main)

# The standard library's Python too: the checks of the copy need no solution, the copy needs no torch.
student-copy: | check-python
	@test -n "$(DEST)" || { echo "usage: make student-copy DEST=dir" >&2; exit 1; }
	$(PYTHON) tools/student_copy.py $(DEST)

clean:
	rm -rf _build .pytest_cache .hypothesis .bench extensions/build extensions/*.egg-info $(OLDEST_TREE)
	find . \( -path ./$(VENV) -o -path ./$(CUDA_VENV) -o -path ./$(OLDEST_VENV) \) -prune -o -name __pycache__ -type d -exec rm -rf {} +
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
