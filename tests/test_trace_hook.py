"""The public trace hook: an observer with ``query`` sees every named query a store runs, and no value."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint.observe import NO_OBSERVER, Attributes, query_hook

# Planted in every field a checkpoint carries: none may reach an attribute.
MARKER = "tr4ce-m4rker"
CONTROL = {"BEGIN", "BEGIN IMMEDIATE", "COMMIT"}  # SQLite's transaction statements, reported by text
ATTRIBUTES = {"safepoint.dialect", "safepoint.rows", "safepoint.batch"}


class Recorder:
    """A QueryObserver that keeps what it is told; spans and metrics do nothing."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, float, dict[str, Any]]] = []
        self.thread_ids: set[int] = set()

    def span(self, name: str, attributes: Attributes) -> AbstractContextManager[Any]:
        return nullcontext()

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def query(self, name: str, seconds: float, attributes: Attributes) -> None:
        self.queries.append((name, seconds, dict(attributes)))
        self.thread_ids.add(threading.get_ident())

    def names(self) -> list[str]:
        return [name for name, _seconds, _attributes in self.queries]

    def take(self) -> list[tuple[str, float, dict[str, Any]]]:
        taken, self.queries = self.queries, []
        return taken


def named_queries(dialect: str) -> set[str]:
    """Every ``-- name:`` of the dialect's SQL files."""
    folder = resources.files(f"safepoint.store.{dialect}")
    names: set[str] = set()
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            names |= set(
                re.findall(r"^--\s*name:\s*(\w+)\s*$", entry.read_text(encoding="utf-8"), re.MULTILINE)
            )
    return names


def checkpoint(step: int = 0) -> safepoint.Checkpoint:
    cp = safepoint.Checkpoint(run_id="traced-run", step=step)
    cp.messages.append({"role": "user", "content": f"hello {MARKER}"})
    cp.state["note"] = MARKER
    cp.labels["tag"] = MARKER
    return cp


def assert_no_value(reports: list[tuple[str, float, dict[str, Any]]]) -> None:
    for name, seconds, attributes in reports:
        assert MARKER not in name
        assert seconds >= 0
        assert set(attributes) <= ATTRIBUTES, attributes
        for value in attributes.values():
            assert isinstance(value, str | int), (name, attributes)
            assert MARKER not in str(value)
            assert "traced-run" not in str(value)


def save_and_load(
    store: safepoint.Store, recorder: Recorder, traced: list[str] | None = None
) -> tuple[list[Any], list[Any]]:
    """A run's second save (the usual kind, after its first) and a load: what the hook saw of each."""
    cp = checkpoint()
    store.save(cp)
    recorder.take()
    if traced is not None:
        traced.clear()
    cp.step += 1
    cp.messages.append({"role": "assistant", "content": f"reply {MARKER}"})
    store.save(cp)
    saved = recorder.take()
    loaded = store.load("traced-run")
    assert loaded.state["note"] == MARKER
    assert len(loaded.messages) == 2
    return saved, recorder.take()


def test_the_default_observer_has_no_query_hook() -> None:
    """NO_OBSERVER (and any observer without ``query``) gives the drivers nothing to call."""
    assert query_hook(NO_OBSERVER) is None
    store = safepoint.open_store("memory://")
    try:
        assert store.driver.on_query is None
    finally:
        store.close()


def test_sqlite_reports_every_statement_of_a_save_and_a_load(tmp_path: Path) -> None:
    """On SQLite the hook sees each statement SQLite runs (the public ``trace=`` counts them), by name."""
    traced: list[str] = []
    recorder = Recorder()
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", observer=recorder, trace=traced.append)
    try:
        saved, loaded = save_and_load(store, recorder, traced)
    finally:
        store.close()
    known = named_queries("sqlite") | CONTROL
    for reports in (saved, loaded):
        names = [name for name, _s, _a in reports]
        assert set(names) <= known, set(names) - known
        assert names[0] in {"BEGIN", "BEGIN IMMEDIATE"}
        assert names[-1] == "COMMIT"
        assert len(set(names) - CONTROL) >= 1
        assert {a["safepoint.dialect"] for _n, _s, a in reports} == {"sqlite"}
        assert_no_value(reports)
    assert saved[0][0] == "BEGIN IMMEDIATE"
    # trace= saw each execution; a batch runs its statement once per parameter set.
    executions = sum(a.get("safepoint.batch", 1) for _n, _s, a in saved + loaded)
    statements = [s for s in traced if not s.startswith("ROLLBACK")]
    assert executions == len(statements)


def test_the_async_store_reports_on_sqlite(tmp_path: Path) -> None:
    """``open_async_store(observer=…)`` traces the same way (the sync driver runs in a worker thread)."""
    import asyncio  # noqa: PLC0415

    recorder = Recorder()

    async def go() -> None:
        store = await safepoint.open_async_store(f"sqlite:///{tmp_path / 'a.db'}", observer=recorder)
        try:
            await store.save(checkpoint())
            await store.load("traced-run")
        finally:
            await store.close()

    asyncio.run(go())
    assert {"BEGIN IMMEDIATE", "COMMIT"} <= set(recorder.names())
    assert_no_value(recorder.queries)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


def test_postgres_reports_every_named_query_of_a_save_and_a_load(postgres_url: str) -> None:
    """On PostgreSQL the hook sees each named statement, the per-transaction search_path included.

    A save of the next step is save_next alone (no search_path: its SQL names
    the schema); a load's transaction opens with search_path.
    """
    recorder = Recorder()
    store = safepoint.open_store(postgres_url, observer=recorder)
    try:
        saved, loaded = save_and_load(store, recorder)
    finally:
        store.close()
    known = named_queries("postgres")
    assert [name for name, _s, _a in saved] == ["save_next"]
    assert loaded[0][0] == "set_search_path"
    assert len(loaded) >= 2
    for reports in (saved, loaded):
        names = [name for name, _s, _a in reports]
        assert set(names) <= known, set(names) - known
        assert {a["safepoint.dialect"] for _n, _s, a in reports} == {"postgresql"}
        assert_no_value(reports)


def test_postgres_load_runs_the_same_named_queries_as_sqlite(postgres_url: str, tmp_path: Path) -> None:
    """A load is the same operation on both dialects: the hook names the same queries, in order."""
    names: dict[str, list[str]] = {}
    for dialect, url in (("sqlite", f"sqlite:///{tmp_path / 'state.db'}"), ("postgresql", postgres_url)):
        recorder = Recorder()
        store = safepoint.open_store(url, observer=recorder)
        try:
            _saved, loaded = save_and_load(store, recorder)
        finally:
            store.close()
        names[dialect] = [n for n, _s, _a in loaded if n not in CONTROL | {"set_search_path"}]
    assert names["sqlite"] == names["postgresql"]


def test_async_postgres_reports(postgres_url: str) -> None:
    """The native async PostgreSQL driver reports its statements too."""
    import asyncio  # noqa: PLC0415

    recorder = Recorder()

    async def go() -> None:
        store = await safepoint.open_async_store(postgres_url, observer=recorder)
        try:
            await store.save(checkpoint())
            await store.load("traced-run")
        finally:
            await store.close()

    asyncio.run(go())
    assert set(recorder.names()) <= named_queries("postgres")
    assert recorder.names().count("set_search_path") >= 2
    assert_no_value(recorder.queries)


def test_a_failing_query_hook_never_breaks_the_store(tmp_path: Path) -> None:
    """An observer's ``query`` that raises is ignored, as its spans and metrics would be."""

    class Failing(Recorder):
        def query(self, name: str, seconds: float, attributes: Attributes) -> None:
            raise RuntimeError("observer bug")

    store = safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}", observer=Failing())
    try:
        store.save(checkpoint())
        assert store.load("traced-run").state["note"] == MARKER
    finally:
        store.close()
