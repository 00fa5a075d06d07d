# The two commands of the README: `make demo` and `make test`. Each does all set-up on a
# fresh Debian machine with Python 3.11: the virtualenv, the package, and redis-server.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check setup redis clean

demo: setup redis
	$(BIN)/caldera demo

test: setup redis check
	$(BIN)/python -m pytest

# The mechanical gates: ruff (lint, pyproject's [tool.ruff]) and its formatter, mypy --strict,
# and the layering contracts (tests/test_layering.py, tests/batch_scheduler/test_imports.py).
SOURCES := cluster binder sharding batch_scheduler agent_scheduler caldera tests
check: setup
	$(BIN)/python -m ruff check --no-cache $(SOURCES)
	$(BIN)/python -m ruff format --no-cache --check $(SOURCES)
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layering.py tests/batch_scheduler/test_imports.py

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "caldera needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# redis-server: installed with apt-get when missing and running as root; otherwise say what to install.
redis:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
			echo "redis-server not found: installing it with apt-get"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
		else \
			echo "redis-server not found: install it first (Debian/Ubuntu: sudo apt-get install redis-server), then run make again" >&2; \
			exit 1; \
		fi; \
	fi
	@redis-server --version

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
