# musicgen: `make demo` generates music (MIDI, piano rolls, WAV) from the shipped models,
# `make test` runs the fast suite. Both set up .venv first.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FAST_TRANSFORMERS := pytorch-fast-transformers==0.4.0

.PHONY: install install-fast demo studio test test-slow lint format wheel-check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Optional reference backend (the fast-transformers package's attention kernels).
# With a CUDA build of torch and the CUDA toolkit
# (found as torch finds it: $CUDA_HOME, nvcc on PATH, /usr/local/cuda) it builds the CUDA kernels
# too (set TORCH_CUDA_ARCH_LIST, e.g. "9.0", when building on a machine without the GPU);
# elsewhere a CPU-only build (~4 min), with nvcc kept off PATH so that a toolkit beside a CPU
# torch cannot break it.
install-fast: $(STAMP)
	@if $(BIN)/pip show pytorch-fast-transformers >/dev/null 2>&1; then \
	  echo "pytorch-fast-transformers is already installed"; exit 0; fi; \
	cuda=$$($(BIN)/python -c "import torch; print(torch.version.cuda or '')"); \
	home=$$($(BIN)/python -c "from torch.utils.cpp_extension import CUDA_HOME; print(CUDA_HOME or '')"); \
	if [ -n "$$cuda" ] && [ -x "$$home/bin/nvcc" ]; then \
	  echo "building $(FAST_TRANSFORMERS) with CUDA kernels (torch CUDA $$cuda, toolkit $$home)"; \
	  env CUDA_HOME="$$home" PATH="$$home/bin:$$PATH" \
	    $(BIN)/pip install -q --no-build-isolation $(FAST_TRANSFORMERS); \
	else \
	  echo "building $(FAST_TRANSFORMERS) CPU-only (torch CUDA: '$$cuda', toolkit: '$$home')"; \
	  env PATH="$(CURDIR)/$(BIN):/usr/bin:/bin" CUDA_HOME= \
	    $(BIN)/pip install -q --no-build-isolation $(FAST_TRANSFORMERS); \
	fi

demo: $(STAMP)
	$(BIN)/musicgen demo

# The web app on http://127.0.0.1:7860/ (docs/studio.md); e.g. make studio ARGS="--port 8000"
studio: $(STAMP)
	$(BIN)/musicgen studio $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff format --check musicgen tests scripts
	$(BIN)/ruff check musicgen tests scripts

format: $(STAMP)
	$(BIN)/ruff format musicgen tests scripts

# Build the wheel, install it into a fresh venv and run presets, the API and the demo from it.
wheel-check: $(STAMP)
	OMP_NUM_THREADS=1 bash scripts/check_wheel.sh $(VENV)

clean:
	rm -rf $(VENV) out .pytest_cache build dist
