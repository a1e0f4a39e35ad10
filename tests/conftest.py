"""Shared fixtures: stores for every backend the suite runs against."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
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
