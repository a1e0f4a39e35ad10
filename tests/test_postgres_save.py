"""The one-statement PostgreSQL save (``save_next``, asked for first by ``ops.save``): same results.

``save_next`` is an optional query of ``ops.save``; both PostgreSQL drivers
declare it in their capabilities, so the whole conformance suite in
tests/test_postgres.py runs through it. The tests here record the named
queries each save asked for, so they can say which way a save went:
``save_next`` alone, or ``save_next`` declined and then the general way's
own queries — and a test fails if a save that knows its head stops being
one statement, or if the two ways stop writing the same rows.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

import safepoint
from conftest_postgres import fresh_schema
from safepoint import Checkpoint, Store, records
from safepoint.errors import Conflict, LeaseLost
from safepoint.store import calls
from safepoint.store.blob_targets import DatabaseBlobs
from safepoint.store.methods.checkpoints import save_call
from safepoint.store.postgres.async_driver import PostgresAsyncDriver, open_postgres_async_driver
from safepoint.store.postgres.driver import PostgresDriver
from safepoint.store.postgres.statements import ALONE_MAX_BYTES
from safepoint.store.settings import StoreSettings
from safepoint.store.sqlite.driver import SQLiteDriver
from save_queries import record_save_queries

POOL = {"min_size": 1, "max_size": 2}
PIPELINE = StoreSettings(blobs=DatabaseBlobs())  # what open_store gives a PostgreSQL store, minus scrubbing
T = TypeVar("T")
FAST = ["save_next"]
DECLINED = ["save_next", "run_head"]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Saves in this test are recorded: one list of the query names each save asked for."""
    return record_save_queries(monkeypatch)


@pytest.fixture
def pg_factory(postgres_dsn: str, pg_schema: str, sent: list[list[str]]) -> Iterator[Callable[..., Store]]:
    opened: list[Store] = []

    def factory(**options: Any) -> Store:
        store = safepoint.open_store(postgres_dsn, schema=pg_schema, **{**POOL, **options})
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def _step(cp: Checkpoint, text: str) -> Checkpoint:
    cp = cp.next()
    cp.messages.append({"role": "user", "content": text})
    cp.counters["turns"] = cp.step
    return cp


def test_the_next_step_is_one_statement(pg_factory: Callable[..., Store], sent: list[list[str]]) -> None:
    """A run's first save goes the usual way; each next step from the saved head is save_next alone."""
    store = pg_factory()
    cp = Checkpoint(run_id="fast", labels={"k": "v"})
    store.save(cp)
    for step in range(1, 4):
        cp = _step(cp, f"turn {step}")
        store.save(cp)
    assert sent[0][0] == "run_head"
    assert sent[1:] == [FAST] * 3
    loaded = pg_factory().load("fast")
    assert (loaded.step, list(loaded.messages), loaded.counters) == (3, list(cp.messages), {"turns": 3})
    info = store.run("fast")
    assert (info.head_step, info.labels, info.updated_at) == (3, {"k": "v"}, cp.created_at)


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What the drivers send, recorded: ("alone", SQL) per statement on the connection, ("message", text)
    per simple-protocol message."""
    sent: list[tuple[str, str]] = []
    execute, message = psycopg.Connection.execute, psycopg.ClientCursor.execute

    def alone(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(("alone", query.decode() if isinstance(query, bytes) else str(query)))
        return execute(self, query, *args, **kwargs)

    def one_message(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(("message", str(query)))
        return message(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", alone)
    monkeypatch.setattr(psycopg.ClientCursor, "execute", one_message)
    return sent


def test_the_one_statement_save_goes_alone_and_prepared(
    pg_factory: Callable[..., Store], pg_schema: str, wire: list[tuple[str, str]]
) -> None:
    """A step's save is save_next alone: no BEGIN, no search_path, the schema in its SQL; prepared.

    Planning the statement afresh each time (the simple protocol) cost the
    server more than the statement's own work (bench/sections/profile_postgres.py).
    """
    store = pg_factory(min_size=1, max_size=1)
    cp = Checkpoint(run_id="alone")
    store.save(cp)
    for step in range(8):
        wire.clear()
        cp = _step(cp, f"turn {step}")
        store.save(cp)
        assert [way for way, _sql in wire] == ["alone"]
        assert f'"{pg_schema}".safepoint_save_next(' in wire[0][1]
    with store.driver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's only one
        prepared = [text for (text,) in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert any(f'"{pg_schema}".safepoint_save_next(' in text for text in prepared)
    assert list(pg_factory().load("alone").messages) == list(cp.messages)


def test_a_large_save_travels_as_one_message(
    pg_factory: Callable[..., Store], wire: list[tuple[str, str]]
) -> None:
    """Past ALONE_MAX_BYTES: BEGIN, save_next (schema in its SQL) and COMMIT go as one simple message.

    Alone, a request larger than a socket buffer could reach the server in
    pieces, its Sync after a stop: the server would have run the UPDATE and
    hold the run row with no timeout armed while the client sleeps.
    """
    store = pg_factory()
    cp = Checkpoint(run_id="one-message")
    store.save(cp)
    wire.clear()
    store.save(_step(cp, "x" * (ALONE_MAX_BYTES + 1)))
    assert [way for way, _sql in wire] == ["message"]
    text = wire[0][1]
    assert text.startswith("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
    assert "set_config" not in text
    assert "safepoint_save_next(" in text
    assert text.endswith("COMMIT")
    assert pg_factory().load("one-message").messages[-1]["content"] == "x" * (ALONE_MAX_BYTES + 1)


@pytest.mark.parametrize(
    "default", ["default_transaction_read_only=on", "default_transaction_isolation=serializable"]
)
def test_a_server_whose_default_transaction_differs(
    postgres_dsn: str, pg_schema: str, default: str, wire: list[tuple[str, str]]
) -> None:
    """Default transactions READ ONLY or SERIALIZABLE: a statement alone fails with nothing written, and
    goes again the explicit way (READ COMMITTED READ WRITE); saves, claims and releases all land."""
    safepoint.open_store(postgres_dsn, schema=pg_schema).close()  # the schema, set up first
    url = f"{postgres_dsn}{'&' if '?' in postgres_dsn else '?'}options={quote('-c ' + default)}"
    store = safepoint.open_store(url, schema=pg_schema, min_size=1, max_size=1)
    try:
        cp = Checkpoint(run_id="defaults")
        store.save(cp)
        store.enqueue("defaults")
        lease = store.claim("w", lease=30)
        assert lease is not None
        cp = _step(store.load("defaults"), "under a lease")
        if default.endswith("serializable"):
            _touch_run_while_saving(postgres_dsn, pg_schema, store, cp, lease)
        else:
            store.save(cp, lease=lease)
        store.release(lease, status=safepoint.Status.DONE)
        assert any(way == "message" for way, _sql in wire)  # the explicit way was taken
    finally:
        store.close()
    loaded = safepoint.open_store(postgres_dsn, schema=pg_schema).load("defaults")
    assert (loaded.step, list(loaded.messages)) == (1, list(cp.messages))


def _touch_run_while_saving(
    dsn: str, schema: str, store: Store, cp: Checkpoint, lease: safepoint.Lease
) -> None:
    """Save while another transaction holds the run row and then updates it: under SERIALIZABLE the
    waiting statement fails to serialize (READ COMMITTED would re-check the row and go on)."""
    with psycopg.connect(dsn) as other:
        other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        other.execute("SELECT 1 FROM safepoint_runs WHERE run_id = 'defaults' FOR UPDATE")
        saving_thread = threading.Thread(target=store.save, args=(cp,), kwargs={"lease": lease})
        saving_thread.start()
        _wait_for_lock_waiter(other)
        other.execute("UPDATE safepoint_runs SET retention = NULL WHERE run_id = 'defaults'")
        other.commit()
    saving_thread.join(30)
    assert not saving_thread.is_alive()


def _wait_for_lock_waiter(conn: psycopg.Connection[Any]) -> None:
    for _ in range(500):
        waiting = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()
        if waiting and waiting[0]:
            return
        time.sleep(0.01)
    raise AssertionError("the save never waited for the run row")


def test_a_status_change_is_stored_on_the_run(
    pg_factory: Callable[..., Store], sent: list[list[str]]
) -> None:
    """save_next sets the run's status with its head, as set_run_status does."""
    store = pg_factory()
    cp = Checkpoint(run_id="status")
    store.save(cp)
    cp = _step(cp, "last")
    cp.status = safepoint.Status.DONE
    store.save(cp)
    assert sent[-1] == FAST
    assert store.run("status").status == safepoint.Status.DONE
    assert [r.run_id for r in store.runs(status="done")] == ["status"]


def test_a_head_moved_by_another_writer_is_a_conflict(
    pg_factory: Callable[..., Store], sent: list[list[str]]
) -> None:
    """Two writers from the same head: the second's save_next writes nothing and ops.save says Conflict."""
    first, second = pg_factory(), pg_factory()
    first.save(Checkpoint(run_id="race"))
    a, b = _step(first.load("race"), "a"), _step(second.load("race"), "b")
    first.save(a)
    with pytest.raises(Conflict):
        second.save(b)
    assert sent[-1][:2] == DECLINED
    assert list(first.load("race").messages) == list(a.messages)


def test_a_lost_lease_is_fenced_off(pg_factory: Callable[..., Store], sent: list[list[str]]) -> None:
    """Under a lease the save is one statement; once another worker holds the run: LeaseLost, no write."""
    store = pg_factory()
    cp = Checkpoint(run_id="leased")
    store.save(cp)
    store.enqueue("leased")
    lease = store.claim("w1", lease=0.2)
    assert lease is not None
    cp = _step(store.load("leased"), "under the lease")
    store.save(cp, lease=lease)
    assert sent[-1] == FAST
    time.sleep(0.3)
    taken = store.claim("w2", lease=30)
    assert taken is not None
    stale = _step(cp, "too late")
    with pytest.raises(LeaseLost):
        store.save(stale, lease=lease)
    assert sent[-1][:2] == DECLINED
    with pytest.raises(Conflict, match="leased by a worker"):
        store.save(stale)
    assert sent[-1][:2] == DECLINED
    assert store.load("leased").step == cp.step
    store.save(stale, lease=taken)
    assert sent[-1] == FAST


def test_an_expired_lease_does_not_stop_an_unleased_save(
    pg_factory: Callable[..., Store], sent: list[list[str]]
) -> None:
    """Without a lease, a run whose lease has expired saves in one statement, as ops.save allows."""
    store = pg_factory()
    cp = Checkpoint(run_id="expired")
    store.save(cp)
    store.enqueue("expired")
    assert store.claim("w1", lease=0.05) is not None
    time.sleep(0.1)
    cp = _step(store.load("expired"), "after expiry")
    store.save(cp)
    assert sent[-1] == FAST


def test_a_dropped_tail_falls_back_and_saves_exactly(
    pg_factory: Callable[..., Store], sent: list[list[str]]
) -> None:
    """After a rewrite that drops the newest messages the guessed next seq is wrong: ops.save saves it."""
    store = pg_factory()
    cp = Checkpoint(run_id="tail")
    store.save(cp)
    for step in range(1, 4):
        cp = _step(cp, f"turn {step}")
        store.save(cp)
    cp = cp.next()
    cp.messages = list(cp.messages)[:1]  # the log keeps seqs 1 and 2; this view ends at 1
    store.save(cp)
    cp = _step(cp, "after the rewrite")
    store.save(cp)
    assert sent[-1][:2] == DECLINED
    assert list(pg_factory().load("tail").messages) == list(cp.messages)
    cp = _step(cp, "and on")
    store.save(cp)
    assert sent[-1] == FAST
    assert list(pg_factory().load("tail").messages) == list(cp.messages)


def test_both_drivers_declare_the_one_statement_save() -> None:
    """PostgreSQL drivers, sync and async, run save_next (ops.save asks for it); SQLite's do not."""
    assert "save_next" in PostgresDriver.capabilities
    assert PostgresAsyncDriver.capabilities == PostgresDriver.capabilities
    assert "save_next" not in SQLiteDriver.capabilities


def test_the_one_statement_save_writes_what_the_general_way_writes(
    postgres_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch, sent: list[list[str]]
) -> None:
    """The same saves, through save_next and with it withdrawn, leave identical rows.

    A write added to the general way of ops.save and not to save_next (or
    the other way round) makes the two stores differ here.
    """
    with fresh_schema(postgres_dsn) as general_schema:
        stores = [
            safepoint.open_store(postgres_dsn, schema=schema, **POOL)
            for schema in (pg_schema, general_schema)
        ]
        stores[1].driver.capabilities = frozenset()  # type: ignore[misc]  # the general way only
        try:
            for index, store in enumerate(stores):
                clock = iter(range(1_700_000_000_000_000, 2**62, 1000))  # the same times for both
                monkeypatch.setattr(records, "now_micros", clock.__next__)
                cp = Checkpoint(run_id="same", labels={"k": "v"})
                store.save(cp)
                for step in range(1, 4):
                    cp = _step(cp, f"turn {step}")
                    cp.labels["step"] = str(step)
                    cp.status = safepoint.Status.DONE if step == 3 else cp.status
                    store.save(cp)
                assert [names[:2] for names in sent[-3:]] == [FAST if index == 0 else DECLINED] * 3
            tables = [_rows(postgres_dsn, schema) for schema in (pg_schema, general_schema)]
            assert tables[0] == tables[1]
            assert len(tables[0]["safepoint_checkpoints"]) == 4
        finally:
            for store in stores:
                store.close()


def _rows(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()  # type: ignore[call-overload]
            for table in ("safepoint_runs", "safepoint_checkpoints")
        }


def test_the_async_driver_runs_the_same_save(
    postgres_dsn: str, pg_schema: str, sent: list[list[str]]
) -> None:
    """The async driver sends save_next with its COMMIT too, and falls back the same way."""

    async def main() -> None:
        driver = await open_postgres_async_driver(postgres_dsn, schema=pg_schema, **POOL)
        try:
            cp = Checkpoint(run_id="async")
            await _call(driver, save_call(cp, None, PIPELINE))
            base = await _call(driver, calls.load("async", None, PIPELINE))
            a, b = _step(base, "a"), _step(await _call(driver, calls.load("async", None, PIPELINE)), "b")
            await _call(driver, save_call(a, None, PIPELINE))
            assert sent[-1] == FAST
            with pytest.raises(Conflict):
                await _call(driver, save_call(b, None, PIPELINE))
            assert sent[-1][:2] == DECLINED
            loaded = await _call(driver, calls.load("async", None, PIPELINE))
            assert list(loaded.messages) == list(a.messages)
        finally:
            await driver.close()

    asyncio.run(main())


async def _call(driver: PostgresAsyncDriver, call: calls.Call[Any, T]) -> T:
    return call.finish(await driver.run(call.op, write=call.write))
