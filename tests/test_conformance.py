"""The shipped conformance suite, run against every backend safepoint has."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
from safepoint import Store
from safepoint.store.sqlite.driver import SQLiteDriver
from safepoint.testing.conformance import StoreConformance


def sqlite_tamper(store: Store, run_id: str, step: int, what: str) -> None:
    """Damage a stored checkpoint with raw SQL, as a bad disk or a hand edit would."""
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    (run_ref,) = driver.execute_raw("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))[0]
    (ranges,) = driver.execute_raw(
        "SELECT ranges FROM safepoint_checkpoints WHERE run_ref = ? AND step = ?", (run_ref, step)
    )[0]
    last_seq = safepoint.codec.decode(ranges)[-1][1] - 1
    statements = {
        "header": (
            "UPDATE safepoint_checkpoints SET header = CAST(replace(CAST(header AS TEXT), 'batch', 'botch')"
            " AS BLOB) WHERE run_ref = ? AND step = ?",
            (run_ref, step),
        ),
        "message": (
            "UPDATE safepoint_messages SET body = CAST(replace(CAST(body AS TEXT), 'user', 'root')"
            " AS BLOB) WHERE run_ref = ? AND seq = ?",
            (run_ref, last_seq - 1),
        ),
        "drop_message": (
            "DELETE FROM safepoint_messages WHERE run_ref = ? AND seq = ?",
            (run_ref, last_seq),
        ),
    }
    sql, params = statements[what]
    driver.execute_raw(sql, params)


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self) -> Iterator[Store]:
        store = safepoint.open_store("memory://")
        yield store
        store.close()

    @pytest.fixture
    def reopen(self, store: Store) -> Callable[[], Store]:
        # An in-memory database lives in one connection: "reopening" it can
        # only hand back the same store.
        return lambda: store

    @pytest.fixture
    def tamper(self) -> Callable[[Store, str, int, str], None]:
        return sqlite_tamper


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def store(self, store_factory: Callable[[], Store]) -> Store:
        return store_factory()

    @pytest.fixture
    def reopen(self, store_factory: Callable[[], Store]) -> Callable[[], Store]:
        return store_factory

    @pytest.fixture
    def tamper(self) -> Callable[[Store, str, int, str], None]:
        return sqlite_tamper


def test_sqlite_store_uses_wal_and_full_sync(tmp_path: Path) -> None:
    """The SQLite file is in WAL mode and commits with synchronous=FULL."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'x.db'}")
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    assert driver.execute_raw("PRAGMA journal_mode") == [("wal",)]
    assert driver.execute_raw("PRAGMA synchronous") == [(2,)]  # 2 = FULL
    store.close()
