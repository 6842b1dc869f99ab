# The two commands of the README: `make run` and `make test`. Each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch (it lies on this kind of machine's disk). A GPU user installs a CUDA
# torch into .venv first; then this step sees torch present and leaves it alone.
TORCH ?= torch==2.13.0

# The pool tests start a throwaway PostgreSQL server (tests/pool_backends.py) from Debian's package.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test docs bench clean postgres-server browser pool-server pool-server-stop

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
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# That build takes minutes, so its wheel (py3-none-<platform>: it loads llama.cpp through ctypes)
# is kept once per machine, in a folder named by the version and a hash of the flags: a changed
# version or flag builds anew. A folder there is whole: the wheel is built into a temporary folder
# beside it that is then renamed. To build again: rm -rf ~/.cache/ms/wheels
WHEEL_CACHE ?= $(HOME)/.cache/ms/wheels
LLAMA_WHEELS := $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_VERSION)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

$(VENV)/.llama: $(VENV)/.torch
	@set -e; dir="$(LLAMA_WHEELS)"; \
	if [ ! -d "$$dir" ]; then \
		echo "Building llama-cpp-python $(LLAMA_VERSION) for AVX2 into $$dir (minutes; once per machine)"; \
		mkdir -p "$(WHEEL_CACHE)"; \
		tmp=$$(mktemp -d "$$dir.partial.XXXXXX"); \
		trap 'rm -rf "$$tmp"' EXIT; trap 'exit 1' INT TERM; \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --no-deps --no-cache-dir -w "$$tmp" \
			"llama-cpp-python==$(LLAMA_VERSION)"; \
		mv -T "$$tmp" "$$dir" 2>/dev/null || true; \
	fi; \
	echo "Installing llama-cpp-python from $$dir"; \
	$(BIN)/pip install --no-deps --force-reinstall "$$dir"/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.llama
	$(BIN)/pip install -e ".[test]"
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(BIN)/ms-run experiment=quick $(ARGS)

postgres-server:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y postgresql; }

# The site tests (tests/test_site.py) open ms-report --html's pages in Debian's Chromium, driven by its
# chromedriver through selenium (about 85 MB to download). CI=true makes a missing browser a failure.
browser:
	@[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium chromium-driver; }

# A lasting PostgreSQL server for pool/backend=postgres (experiment=sharing_postgres), run as an
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

test: $(VENV)/.installed-test postgres-server browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

# The documentation site at http://127.0.0.1:8000 (mkdocs.yml), rebuilt as pages change; `make test` builds it
# with --strict (tests/test_docs_site.py). NO_MKDOCS_2_WARNING silences the Material theme's end-of-life banner.
$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -e ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 HF_HUB_OFFLINE=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/generation_throughput.py

clean:
	rm -rf $(VENV) outputs multirun .cache
