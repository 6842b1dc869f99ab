# The two commands of the README: `make run` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch (it lies on this kind of machine's disk). A GPU user installs a CUDA
# torch into .venv first; then this step sees torch present and leaves it alone.
TORCH ?= torch==2.13.0

# The pool tests start a throwaway PostgreSQL server (tests/pool_backends.py) from Debian's package.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test bench clean postgres-server pool-server pool-server-stop

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.torch: | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install "$(TORCH)"
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(BIN)/pip install -e .
	touch $@

# llama.cpp is built for AVX2, not for the build machine's own CPU (-march=native): on a CPU with AMX
# units, the native build crashed in its first forward pass here (SIGSEGV in ggml_backend_amx_mul_mat,
# llama-cpp-python 0.3.36, 2026-11-25). --no-cache-dir keeps pip from reusing a wheel built natively.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON

$(VENV)/.llama: $(VENV)/.torch
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --no-cache-dir --force-reinstall --no-deps "llama-cpp-python>=0.3"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.llama
	$(BIN)/pip install -e ".[test]"
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(BIN)/ms-run experiment=quick $(ARGS)

postgres-server:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y postgresql; }

# A lasting PostgreSQL server for pool.backend=postgres (experiment=sharing_postgres), run as an
# unprivileged user (ms/pool/local_server.py). Its last line of stdout is the export line, so
#   eval "$$(make -s pool-server | tail -1)"   sets MS_POOL_DSN;   make pool-server-stop   stops it.
POOL_SERVER ?= /tmp/ms-pool-server
POOL_DATABASE ?= ms

$(VENV)/.postgres: $(VENV)/.installed
	$(BIN)/python -c "import psycopg, psycopg_pool" 2>/dev/null || $(BIN)/pip install -e ".[postgres]"
	touch $@

pool-server: $(VENV)/.postgres postgres-server
	@$(BIN)/python -m ms.pool.local_server start $(POOL_SERVER) --database $(POOL_DATABASE)

pool-server-stop:
	@$(BIN)/python -m ms.pool.local_server stop $(POOL_SERVER)

test: $(VENV)/.installed-test postgres-server
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/generation_throughput.py

clean:
	rm -rf $(VENV) outputs multirun .cache
