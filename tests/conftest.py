"""Shared fixtures: stores for every backend the suite runs against."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Store

# The journal crash tests fork their children from a forkserver that preloads ``helpers.*``. The
# forkserver does not take the parent's sys.path, so it finds ``helpers`` only on PYTHONPATH:
# without this its preload fails silently and every child imports its framework again.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_TESTS, os.environ.get("PYTHONPATH")]))


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"  # path is absolute, so this gives sqlite:////abs/...


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = safepoint.open_store(sqlite_url(tmp_path / "state.db"))
    yield store
    store.close()


@pytest.fixture
def memory_store() -> Iterator[Store]:
    store = safepoint.open_store("memory://")
    yield store
    store.close()


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens stores on one SQLite file, closing them all at the end."""
    opened: list[Store] = []

    def factory() -> Store:
        store = safepoint.open_store(sqlite_url(tmp_path / "shared.db"))
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


# -- PostgreSQL (tests that need the server; under CI=true they never skip) --


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The test server's DSN, or a skip (a failure under CI=true) when none answers."""
    return require_postgres()


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema on the test server, dropped after the test."""
    with fresh_schema(postgres_dsn) as name:
        yield name
