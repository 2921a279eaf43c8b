# musicgen: `make demo` generates music from the bundled checkpoint, `make test` runs the fast suite.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install install-fast demo test test-slow lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Optional reference backend (design notes §5): builds in ~4 min; nvcc must stay off PATH on a CPU machine.
install-fast: $(STAMP)
	$(BIN)/pip show pytorch-fast-transformers >/dev/null 2>&1 || \
	  env PATH="$(CURDIR)/$(BIN):/usr/bin:/bin" CUDA_HOME= $(BIN)/pip install -q --no-build-isolation pytorch-fast-transformers==0.4.0

demo: $(STAMP)
	$(BIN)/musicgen demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check musicgen tests scripts

clean:
	rm -rf $(VENV) out .pytest_cache
