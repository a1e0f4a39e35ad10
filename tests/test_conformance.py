"""The shipped conformance suite, run against every backend safepoint has."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
from helpers.blocking import BlockingDriver, blocking_store
from safepoint import Checkpoint, Store
from safepoint.store.asyncstore import SQLiteAsyncDriver
from safepoint.store.sqlite.driver import SQLiteDriver
from safepoint.testing.conformance import StoreConformance


def sqlite_tamper(store: Store, run_id: str, step: int, what: str) -> None:
    """Damage a stored checkpoint with raw SQL, as a bad disk or a hand edit would."""
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    (run_ref,) = driver.execute_raw("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))[0]
    key = run_ref * 2**32 + step
    if what == "header":
        driver.execute_raw(
            "UPDATE safepoint_checkpoints SET header = CAST(replace(CAST(header AS TEXT), 'batch', 'botch')"
            " AS BLOB) WHERE id = ?",
            (key,),
        )
        return
    # The row that added the checkpoint's last message carries it in its packed messages.
    (packed,) = driver.execute_raw("SELECT messages FROM safepoint_checkpoints WHERE id = ?", (key,))[0]
    bodies = bytes(packed).split(b"\n")
    if what == "message":
        bodies[-1] = bodies[-1].replace(b"user", b"root").replace(b"assistant", b"root")
    else:  # drop_message: a torn row that lost its last message
        bodies.pop()
    driver.execute_raw(
        "UPDATE safepoint_checkpoints SET messages = ? WHERE id = ?", (b"\n".join(bodies), key)
    )


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


class TestAsyncSQLiteStore(StoreConformance):
    """The same suite through the async SQLite driver."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        opened: list[Store] = []
        self._opened = opened
        store = self._open(tmp_path)
        yield store
        for each in opened:
            each.close()

    def _open(self, tmp_path: Path) -> Store:
        async_store = asyncio.run(safepoint.open_async_store(f"sqlite:///{tmp_path / 'async.db'}"))
        store = blocking_store(async_store)
        self._opened.append(store)
        return store

    @pytest.fixture
    def reopen(self, store: Store, tmp_path: Path) -> Callable[[], Store]:
        return lambda: self._open(tmp_path)

    @pytest.fixture
    def tamper(self) -> Callable[[Store, str, int, str], None]:
        def through_sync_driver(store: Store, run_id: str, step: int, what: str) -> None:
            blocking = store.driver
            assert isinstance(blocking, BlockingDriver)
            assert isinstance(blocking.inner, SQLiteAsyncDriver)
            sqlite_tamper(Store(blocking.inner.sync_driver, url=store.url), run_id, step, what)

        return through_sync_driver


def test_async_store_methods_mirror_the_sync_store(tmp_path: Path) -> None:
    """Every public Store method exists on AsyncStore, awaited, and works end to end."""
    public = {name for name in dir(Store) if not name.startswith("_")} - {"driver", "url"}
    assert public <= {name for name in dir(safepoint.AsyncStore) if not name.startswith("_")}

    async def scenario() -> None:
        async with await safepoint.open_async_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
            cp = Checkpoint(run_id="a", labels={"k": "v"})
            cp.messages.append({"role": "user", "content": "hi"})
            await store.save(cp)
            cp = cp.next()
            cp.messages.append({"role": "assistant", "content": "hello"})
            await store.save(cp)
            assert (await store.load("a")).messages == cp.messages
            assert (await store.load("a", 0)).step == 0
            assert [i.step for i in await store.history("a")] == [0, 1]
            assert (await store.run("a")).head_step == 1
            assert [r.run_id for r in await store.runs(labels={"k": "v"})] == ["a"]
            fork = await store.fork("a", 0, new_run_id="b")
            assert fork.parent is not None
            await store.delete_run("b")
            with pytest.raises(safepoint.NotFound):
                await store.load("b")

    asyncio.run(scenario())


def test_sqlite_store_uses_wal_and_full_sync(tmp_path: Path) -> None:
    """The SQLite file is in WAL mode and commits with synchronous=FULL."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'x.db'}")
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    assert driver.execute_raw("PRAGMA journal_mode") == [("wal",)]
    assert driver.execute_raw("PRAGMA synchronous") == [(2,)]  # 2 = FULL
    store.close()
