"""What a step's save puts on the wire: one request in one piece, binary, and a schema that keeps it HOT.

A save that goes alone (``statements.fits_alone``) must reach the server in
one piece: a request that left in two sends could be stopped between them
with the server holding what the first one started (see
``ALONE_MAX_BYTES``). The tests read the client socket's own counters
(Linux ``TCP_INFO``): the bytes a save sent stay within ``request_bytes``,
and a request under the limit leaves as one TCP segment (loopback's segments
hold 64 KiB; libpq sets TCP_NODELAY, so each send() is a segment of its own
— the control case, a larger request, shows two).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import safepoint
from conftest_postgres import fresh_schema
from safepoint import Checkpoint, Store
from safepoint.store.postgres import transaction
from safepoint.store.postgres.schema import REVISIONS
from safepoint.store.postgres.statements import ALONE_MAX_BYTES, Statement, compact_sql, request_bytes
from test_postgres import build_revisions  # the suite's own revision-by-revision builder


def _without_tcp_counters(reason: str) -> None:
    """Skip where the TCP counters cannot be read; under ``CI=true`` (Linux, TCP to 127.0.0.1)
    these tests must run, so there it fails instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the PostgreSQL wire tests must run, not skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _linux() -> None:
    if not sys.platform.startswith("linux"):
        _without_tcp_counters("TCP_INFO is Linux's")


def _tcp(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(tcpi_bytes_acked, tcpi_data_segs_out) of the connection's socket."""
    sock = socket.socket(fileno=conn.pgconn.socket)
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    finally:
        sock.detach()
    return struct.unpack_from("Q", info, 120)[0], struct.unpack_from("I", info, 156)[0]


@pytest.fixture
def store(postgres_dsn: str, pg_schema: str) -> Iterator[Store]:
    if "host=/" in postgres_dsn or "@/" in postgres_dsn:
        _without_tcp_counters("the server is reached over a Unix socket: no TCP counters")
    opened = safepoint.open_store(postgres_dsn, schema=pg_schema, min_size=1, max_size=1)
    yield opened
    opened.close()


@pytest.fixture
def estimates(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """Each final statement's ``request_bytes`` and whether it went alone, as the driver decided."""
    seen: list[tuple[int, bool]] = []
    decide = transaction.fits_alone

    def recorded(statement: Statement) -> bool:
        alone = decide(statement)
        seen.append((request_bytes(statement), alone))
        return alone

    monkeypatch.setattr(transaction, "fits_alone", recorded)
    return seen


def _save_step(store: Store, cp: Checkpoint, size: int) -> tuple[Checkpoint, int, int]:
    """Save the next step (two messages of ``size`` characters): the bytes and segments it sent."""
    cp = cp.next()
    cp.messages.append({"role": "user", "content": "u" * size})
    cp.messages.append({"role": "assistant", "content": "a" * size})
    cp.counters["turns"] = cp.step
    with store.driver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's only one
        pass  # given back at once: the save takes it again
    sent, segments = _tcp(conn)
    store.save(cp)
    after_sent, after_segments = _tcp(conn)
    return cp, after_sent - sent, after_segments - segments


def test_a_step_goes_alone_in_one_segment_within_its_estimate(
    store: Store, estimates: list[tuple[int, bool]]
) -> None:
    """Steps up to the limit: alone, in one TCP segment, never more bytes than ``request_bytes`` says."""
    cp = Checkpoint(run_id="wire")
    store.save(cp)
    for size in (10, 500, 1500, 3000, 3200):
        estimates.clear()
        cp, sent, segments = _save_step(store, cp, size)
        assert len(estimates) == 1
        estimate, alone = estimates[0]
        assert alone, f"{size}: estimated {estimate} bytes"
        assert sent <= estimate, f"{size}: sent {sent} bytes, estimated {estimate}"
        assert estimate - sent < 1024, f"{size}: estimate {estimate} far above the {sent} bytes sent"
        assert segments == 1, f"{size}: {sent} bytes left in {segments} segments"
    assert list(store.load("wire").messages) == list(cp.messages)


def test_a_step_past_the_limit_is_one_message(store: Store, estimates: list[tuple[int, bool]]) -> None:
    """Past ``ALONE_MAX_BYTES`` the step goes as BEGIN, the call and COMMIT in one simple-protocol message."""
    cp = Checkpoint(run_id="large")
    store.save(cp)
    estimates.clear()
    cp, _sent, _segments = _save_step(store, cp, ALONE_MAX_BYTES // 2)
    assert [alone for _estimate, alone in estimates] == [False]
    assert list(store.load("large").messages) == list(cp.messages)


def test_the_counters_see_a_request_in_two_pieces(postgres_dsn: str) -> None:
    """The control: a request past libpq's 8 KiB leaves in two sends, and the counters show it."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        before = _tcp(conn)
        conn.execute("SELECT length(%s)", (b"x" * 20_000,), binary=True)
        after = _tcp(conn)
    assert after[1] - before[1] >= 2


def test_statements_travel_without_comments() -> None:
    """``compact_sql``: comments and runs of whitespace go; quoted text stays as it is."""
    text = "SELECT 'a -- b',  \"x\"\"--y\"  -- why\n  FROM t  -- and\n WHERE c = '' -- end"
    assert compact_sql(text) == "SELECT 'a -- b', \"x\"\"--y\" FROM t WHERE c = ''"


def _functions(dsn: str, schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s ORDER BY 1",
            (schema,),
        ).fetchall()
    quoted = {f'"{schema}"', schema}
    out = []
    for name, definition in rows:
        shown = definition
        for form in quoted:
            shown = shown.replace(form, "<schema>")
        out.append((name, shown))
    return out


@pytest.mark.parametrize("start_at", [9, len(REVISIONS)])
def test_the_save_function_and_no_updated_at_index_fresh_or_upgraded(
    postgres_dsn: str, start_at: int
) -> None:
    """Revisions 10 and 12: an upgraded schema has the same functions as a fresh one, and neither indexes
    updated_at (an index on it would stop the run row's update on every save from being HOT)."""
    with fresh_schema(postgres_dsn) as fresh, fresh_schema(postgres_dsn) as old:
        safepoint.open_store(postgres_dsn, schema=fresh, min_size=1, max_size=1).close()
        build_revisions(postgres_dsn, old, start_at)
        safepoint.open_store(postgres_dsn, schema=old, min_size=1, max_size=1).close()
        functions = _functions(postgres_dsn, fresh)
        assert [name for name, _ in functions] == [  # revision 10's, and 12's (tenants)
            "safepoint_claim",
            "safepoint_claimable_tenants",
            "safepoint_heartbeat",
            "safepoint_release",
            "safepoint_save_next",
        ]
        assert _functions(postgres_dsn, old) == functions
        with psycopg.connect(postgres_dsn) as conn:
            for schema in (fresh, old):
                indexed = conn.execute(
                    "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE %s",
                    (schema, "%updated_at%"),
                ).fetchall()
                assert indexed == []


def test_run_row_updates_are_hot(postgres_dsn: str, pg_schema: str) -> None:
    """Saves of a run's steps update its row in place (HOT): no index of the run row changes."""
    with safepoint.open_store(postgres_dsn, schema=pg_schema, min_size=1, max_size=1) as store:
        cp = Checkpoint(run_id="hot")
        store.save(cp)
        for _ in range(20):
            cp, _sent, _segments = _save_step(store, cp, 100)
        with store.driver.pool.connection() as conn:  # type: ignore[attr-defined]
            conn.execute("SELECT pg_stat_force_next_flush()")  # flushed as the backend goes idle
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        query = sql.SQL(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
            " WHERE schemaname = {} AND relname = 'safepoint_runs'"
        ).format(sql.Literal(pg_schema))
        for _ in range(100):  # the other backend's stats land when it goes idle
            row = conn.execute(query).fetchone()
            if row is not None and row[0] >= 20:
                break
            conn.execute("SELECT pg_sleep(0.05)")
    assert row is not None
    assert row[0] >= 20
    assert row[1] >= row[0] - 1  # every save's update HOT (the first save may insert alone)
