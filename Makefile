# The two commands of the README: `make run` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch (it lies on this kind of machine's disk). A GPU user installs a CUDA
# torch into .venv first; then this step sees torch present and leaves it alone.
TORCH ?= torch==2.13.0

.PHONY: run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install "$(TORCH)"
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install -e ".[test]"
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(BIN)/ms-run experiment=quick $(ARGS)

test: $(VENV)/.installed-test
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/generation_throughput.py

clean:
	rm -rf $(VENV) outputs multirun .cache
