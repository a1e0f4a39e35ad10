"""LangGraph's own checkpointer conformance suite, run against SafepointSaver.

The suite (``langgraph-checkpoint-conformance``) drives the async methods;
with a sync ``Store`` they run the same flows in a worker thread, with an
``AsyncStore`` natively. Each combination runs on SQLite (a temporary file)
and on PostgreSQL (a schema of its own, dropped afterwards). The report is
printed straight to the terminal so CI logs show it — through the warnings
summary when the suite runs in xdist workers, whose output is not shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import CapabilityReport, ProgressCallbacks

import safepoint
from safepoint.adapters.langgraph import SafepointSaver

Opener = Callable[[int], Any]  # n -> a Store, or an awaitable AsyncStore


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Callable[[int], str]:
    return lambda n: f"sqlite:///{tmp_path / f'conformance-{n}.db'}"


def run_suite(name: str, open_store: Opener, capsys: pytest.CaptureFixture[str]) -> CapabilityReport:
    """Run the whole suite, a fresh store (and saver) per capability, and print the report."""
    opened = 0

    async def factory() -> AsyncIterator[SafepointSaver]:
        nonlocal opened
        opened += 1
        store = open_store(opened)
        if asyncio.iscoroutine(store):
            store = await store
        try:
            yield SafepointSaver(store)
        finally:
            closing = store.close()
            if asyncio.iscoroutine(closing):
                await closing

    registered = checkpointer_test(name=name)(factory)
    report = asyncio.run(validate(registered, progress=ProgressCallbacks.quiet()))
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        report.print_report()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # A worker's output never reaches the terminal; warnings do (in the summary).
        warnings.warn(ConformanceReport(text.getvalue()), stacklevel=1)
    else:
        with capsys.disabled():
            print(text.getvalue())
    return report


class ConformanceReport(UserWarning):
    """Carries the conformance report to the terminal when tests run in xdist workers."""


def assert_conformant(report: CapabilityReport) -> None:
    failures = [f for r in report.results.values() for f in r.failures]
    assert report.passed_all_base(), failures
    # Every capability the suite knows, the extended ones included (prune and
    # delete_for_runs rebuild a thread and let retention drop the rest: pruning.py).
    assert {c.value for c in Capability} == {n for n, r in report.results.items() if r.passed}, failures


def test_conformance_sqlite_store(
    sqlite_url: Callable[[int], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every capability passes on SQLite through a sync Store."""
    report = run_suite(
        "SafepointSaver (SQLite, Store)", lambda n: safepoint.open_store(sqlite_url(n)), capsys
    )
    assert_conformant(report)


def test_conformance_sqlite_async_store(
    sqlite_url: Callable[[int], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every capability passes on SQLite through an AsyncStore."""
    report = run_suite(
        "SafepointSaver (SQLite, AsyncStore)", lambda n: safepoint.open_async_store(sqlite_url(n)), capsys
    )
    assert_conformant(report)


def test_conformance_postgres_store(
    postgres_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every capability passes on PostgreSQL through a sync Store."""
    report = run_suite(
        "SafepointSaver (PostgreSQL, Store)",
        lambda n: safepoint.open_store(postgres_dsn, schema=pg_schema, max_size=2),
        capsys,
    )
    assert_conformant(report)


def test_conformance_postgres_async_store(
    postgres_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every capability passes on PostgreSQL through a native AsyncStore."""
    report = run_suite(
        "SafepointSaver (PostgreSQL, AsyncStore)",
        lambda n: safepoint.open_async_store(postgres_dsn, schema=pg_schema, max_size=2),
        capsys,
    )
    assert_conformant(report)


def test_conformance_encrypted_sqlite_store(
    sqlite_url: Callable[[int], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The same on an encrypted SQLite store: the saver cannot tell the difference."""
    keyring = safepoint.Keyring.from_text("index:" + "C" * 43 + "= k1:" + "D" * 43 + "=")
    report = run_suite(
        "SafepointSaver (encrypted SQLite, Store)",
        lambda n: safepoint.open_store(sqlite_url(n), encryption=keyring),
        capsys,
    )
    assert_conformant(report)
