# Every target sets itself up: a fresh clone needs only python3 (>= 3.11).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint,bench,s3,langgraph,openai-agents,otel]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/safepoint demo

# Two passes: the suite in parallel, then the test that restarts the shared
# PostgreSQL server, alone (it would break the other tests' connections).
test: $(STAMP)
	$(PY) -m pytest -n 2 -m "not pg_restart" tests
	$(PY) -m pytest -m pg_restart tests

bench: $(STAMP)
	$(PY) bench/run.py --out docs/benchmarks.md

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .safepoint .pytest_cache .mypy_cache .ruff_cache
