# Every target sets itself up: a fresh clone needs only python3 (>= 3.11).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test soak bench lint clean system-deps bench-deps lock install-checks screenshots

# The system packages the suite and the benchmarks drive for real: PgBouncer
# (Debian's package) for the tests and the scale benchmark through a pooler;
# Chromium and its driver (Debian's) for the inspector's browser tests, so that
# Selenium never downloads a browser. apt-get update runs once, and only when
# something is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@{ command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ]; } && \
		[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || { \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y pgbouncer chromium chromium-driver; }

# What only the benchmarks need, the same way: Debian's valgrind, for the instruction counts
# (callgrind), and a C compiler for the call journal section's client-request shim (the floor
# section issues its own through ctypes on x86-64). make test does not need them.
bench-deps:
	@command -v valgrind >/dev/null && command -v cc >/dev/null || { \
		$(SUDO) apt-get update && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y valgrind gcc; }

# Dependencies: pyproject.toml declares ranges (what users get); the .venv gets
# the exact versions of requirements/lock.txt, as pip constraints, so make test,
# make bench and CI install the same thing every time. requirements/lower-bounds.txt
# pins every range's lower bound: install-checks runs the CLI and SQLite tests
# against it. `make lock` re-resolves the lock (UPGRADE="pkg ..." lets those move,
# UPGRADE=all everything); the recipe is in docs/architecture.md.
LOCK   := requirements/lock.txt
EXTRAS := test,lint,bench,postgres,s3,langgraph,openai-agents,otel,encryption,ui,pydantic-ai,google-adk,agent-framework

# Says what it is doing before the one slow step of a first run, and how long it took
# after: $(shell date) is the start time, as make expands a recipe before running it.
$(STAMP): pyproject.toml $(LOCK)
	@echo "$(if $(wildcard $(STAMP)),Updating $(VENV): pyproject.toml or $(LOCK) changed,Setting up $(VENV) on first run (about 2-3 minutes: a venv, then pip installs safepoint and the extras the tests use)) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[$(EXTRAS)]'
	touch $(STAMP)
	@echo "$(VENV) ready in $$(( $$(date +%s) - $(shell date +%s) ))s"

demo: $(STAMP)
	$(VENV)/bin/safepoint demo

# Two passes: the suite in parallel, then the test that restarts the shared
# PostgreSQL server, alone (it would break the other tests' connections).
test: $(STAMP) system-deps
	$(PY) -m pytest -n 2 -m "not pg_restart" tests
	$(PY) -m pytest -m pg_restart tests

# The model-based test with fresh seeds for SOAK_MINUTES (default 30); SOAK_BACKENDS=sqlite,postgres
# and SOAK_ENCRYPTION=on choose the rows. Each disagreement becomes a regression script that
# make test replays (docs/testing.md). Then the long crash runs, with SAFEPOINT_SOAK=1: crash tests
# named test_soak_… (skipped by make test) and the call journal's crash tests at their soak sizes
# (>= 30 kills per integration: Run and the five frameworks).
soak: $(STAMP) system-deps
	PYTHONPATH=src:tests $(PY) -m model_based.soak
	SAFEPOINT_SOAK=1 PYTHONPATH=src:tests $(PY) -m pytest -q -p no:cacheprovider -m crash -k "soak or journal" tests

# make bench SECTION=fresh (or adapter, scale, otel, concurrency, encryption, ui, frameworks, house, journal, floor) runs and prints that section alone.
bench: $(STAMP) system-deps bench-deps
	$(PY) bench/run.py $(if $(SECTION),--section $(SECTION),--out docs/benchmarks.md)

# The pictures docs/ui.md shows: the inspector's browser tests, saving their screenshots there.
screenshots: $(STAMP) system-deps
	SAFEPOINT_SCREENSHOTS=$(CURDIR)/docs/images $(PY) -m pytest -q tests/test_ui_browser.py tests/test_ui_find.py tests/test_ui_fork.py tests/test_ui_cost.py tests/test_ui_conversation.py -k sqlite

# Installs safepoint's wheel into fresh venvs under $$TMPDIR, from the package
# registry: beside older rich/click/boto3/orjson, with the core dependencies
# only (no psycopg), and at every lower bound running the CLI and SQLite tests.
# .ci/run runs it after make test.
install-checks: $(STAMP)
	$(PY) tests/install/checks.py

# Not on $(STAMP): a range raised past the old lock could not install it.
lock:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) requirements/make_lock.py $(if $(filter all,$(UPGRADE)),--upgrade-all,$(foreach p,$(UPGRADE),--upgrade $(p)))

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .safepoint .pytest_cache .mypy_cache .ruff_cache
