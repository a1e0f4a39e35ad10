"""How the PostgreSQL drivers open and end transactions: BEGIN and COMMIT inside the one pipeline.

The drivers send BEGIN, the operation's statements and COMMIT in one
pipeline on an autocommit connection, so a failed operation can leave its
connection inside a transaction or in an aborted one. These tests prove that
such a failure commits nothing and hands the connection back clean, on the
sync and the async driver, whether the error came from the operation (Python)
or from the server in a statement nobody waited for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from safepoint.errors import StoreError
from safepoint.store.postgres.async_driver import PostgresAsyncDriver, open_postgres_async_driver
from safepoint.store.postgres.config import PostgresConfig
from safepoint.store.postgres.driver import PostgresDriver
from safepoint.store.postgres.statements import raw_statements
from safepoint.store.query import Op, Query
from safepoint.twins import blocking

ONE_CONNECTION = {"min_size": 1, "max_size": 1}


class Boom(Exception):
    """An operation's own error, raised after it sent writes."""


@pytest.fixture
def schema(pg_schema: str) -> str:
    """A fresh schema (tests/conftest.py's pg_schema), under the name these tests use."""
    return pg_schema


def _open(dsn: str, schema: str) -> PostgresDriver:
    return PostgresDriver.open(PostgresConfig.from_options(dsn, {"schema": schema, **ONE_CONNECTION}))


def _new_run(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": "running",
        "step": 0,
        "schema_version": 1,
        "labels": "{}",
        "counters": "{}",
        "parent_run_id": None,
        "parent_step": None,
        "digest": b"",
        "now": 0,
        "next_seq": 0,
    }


def _insert_then(run_id: str, failure: str) -> Op[None]:
    """Create a run (waited for), send an update nobody waits for, then fail as told."""
    rows = yield Query("insert_run", _new_run(run_id))
    params = _new_run(run_id) | {"run_ref": rows[0][0], "step": 1}
    if failure == "server":
        params["labels"] = "not json"  # fails on the server, seen only at the commit's sync
    yield Query("advance_run", params)
    if failure == "python":
        raise Boom


def _list_all() -> Op[list[str]]:
    params = {
        "statuses": None,
        "labels": None,
        "updated_since": None,
        "updated_until": None,
        "before_id": None,
        "prefix": None,
    }
    params["limit"] = 100
    rows = yield Query("list_runs", params)
    return [row[1] for row in rows]


@pytest.mark.parametrize("failure", ["python", "server"])
def test_a_failed_operation_commits_nothing_and_frees_its_connection(
    postgres_dsn: str, schema: str, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Sync driver: the writes are rolled back before the pool gets the connection back; it works on."""
    driver = _open(postgres_dsn, schema)
    try:
        expected = Boom if failure == "python" else StoreError
        with caplog.at_level(logging.WARNING, logger="psycopg.pool"), pytest.raises(expected):
            driver.run(_insert_then("failed", failure), write=True)
        assert not [r for r in caplog.records if r.name.startswith("psycopg.pool")]
        with driver.pool.connection() as conn:
            assert conn.info.transaction_status.name == "IDLE"
        assert driver.run(_list_all(), write=False) == []
        driver.run(_insert_then("kept", "none"), write=True)
        assert driver.run(_list_all(), write=False) == ["kept"]
    finally:
        driver.close()


@pytest.mark.parametrize("failure", ["python", "server"])
def test_a_failed_async_operation_commits_nothing_and_frees_its_connection(
    postgres_dsn: str, schema: str, failure: str
) -> None:
    """Async driver: the same as the sync one."""

    async def main() -> None:
        driver: PostgresAsyncDriver = await open_postgres_async_driver(
            postgres_dsn, schema=schema, **ONE_CONNECTION
        )
        try:
            with pytest.raises(Boom if failure == "python" else StoreError):
                await driver.run(_insert_then("failed", failure), write=True)
            async with driver.pool.connection() as conn:
                assert conn.info.transaction_status.name == "IDLE"
            assert await driver.run(_list_all(), write=False) == []
            await driver.run(_insert_then("kept", "none"), write=True)
            assert await driver.run(_list_all(), write=False) == ["kept"]
        finally:
            await driver.close()

    asyncio.run(main())


def test_reads_run_in_one_read_only_snapshot(postgres_dsn: str, schema: str) -> None:
    """A read operation's transaction is REPEATABLE READ and READ ONLY; a write's READ COMMITTED."""
    driver = _open(postgres_dsn, schema)
    show = "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"
    try:
        for write, expected in ((False, ("repeatable read", "on")), (True, ("read committed", "off"))):
            steps = raw_statements(show, None, driver.settings)
            assert blocking(driver._running(steps, write=write)) == [expected]
    finally:
        driver.close()


def _stall_after_run_head(run_id: str, stalled: threading.Event, resume: threading.Event) -> Op[None]:
    """Lock the run row (run_head), then stall as a stopped client would, then try to write."""
    rows = yield Query("run_head", {"run_id": run_id})
    stalled.set()
    resume.wait(30)
    yield Query("set_run_status", {"run_ref": rows[0][1], "status": "failed"})


def test_a_client_stalled_mid_transaction_does_not_keep_its_lock(postgres_dsn: str, schema: str) -> None:
    """The server ends a transaction whose client stalls after run_head (5 s idle), so the run frees up."""
    driver = _open(postgres_dsn, schema)
    other = _open(postgres_dsn, schema)
    try:
        driver.run(_insert_then("stalled", "none"), write=True)
        stalled, resume = threading.Event(), threading.Event()
        outcome: list[BaseException | None] = []

        def stalling() -> None:
            try:
                driver.run(_stall_after_run_head("stalled", stalled, resume), write=True)
                outcome.append(None)
            except BaseException as exc:  # reported by the assertion below
                outcome.append(exc)

        thread = threading.Thread(target=stalling)
        thread.start()
        assert stalled.wait(10)
        deadline = time.monotonic() + 30
        while True:  # the row is locked until the server ends the stalled transaction
            try:
                other.execute_raw(_LOCK_NOW, {"run_id": "stalled"})
                break
            except StoreError:
                assert time.monotonic() < deadline, "the stalled transaction kept the run row locked"
                time.sleep(0.2)
        resume.set()
        thread.join(30)
        assert isinstance(outcome[0], StoreError)  # its connection was closed under it
        assert other.run(_list_all(), write=False) == ["stalled"]
    finally:
        driver.close()
        other.close()


# The run row's lock, taken at once or not at all.
_LOCK_NOW = "SELECT id FROM safepoint_runs WHERE run_id = %(run_id)s FOR UPDATE NOWAIT"
