"""Shared fixtures: stores for every backend the suite runs against."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Store


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
