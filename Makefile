# Every target sets itself up: a fresh clone needs only python3 (>= 3.11).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean system-deps

# The system packages the suite and the benchmarks drive for real: PgBouncer
# (Debian's package) for the tests and the scale benchmark through a pooler.
# apt-get update runs once, and only when something is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || { \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y pgbouncer; }

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint,bench,s3,langgraph,openai-agents,otel]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/safepoint demo

# Two passes: the suite in parallel, then the test that restarts the shared
# PostgreSQL server, alone (it would break the other tests' connections).
test: $(STAMP) system-deps
	$(PY) -m pytest -n 2 -m "not pg_restart" tests
	$(PY) -m pytest -m pg_restart tests

bench: $(STAMP) system-deps
	$(PY) bench/run.py --out docs/benchmarks.md

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .safepoint .pytest_cache .mypy_cache .ruff_cache
