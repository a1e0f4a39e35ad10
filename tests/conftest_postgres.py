"""PostgreSQL for the tests: the server's DSN, a fresh schema per test, raw SQL.

Imported by the PostgreSQL test modules (it is not a pytest conftest: the
fixtures themselves live in the test module, a few lines each).

The DSN comes from ``SAFEPOINT_TEST_POSTGRES`` (default: the development
server). When the server is unreachable the tests skip with the reason, except
under ``CI=true``, where they fail: CI must never pass by skipping them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from safepoint import Store
from safepoint.store.postgres.config import redact

DSN = os.environ.get("SAFEPOINT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def require_postgres() -> str:
    """The test DSN once the server answers; skips (or fails under CI=true) otherwise."""
    try:
        with psycopg.connect(DSN, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL unreachable at {redact(DSN)}: {str(exc).strip().splitlines()[0]}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the PostgreSQL tests must run, not skip)", pytrace=False)
        pytest.skip(f"{reason} (set SAFEPOINT_TEST_POSTGRES to a reachable server)")
    return DSN


@contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    """A schema name no one uses (``sp_test_<hex>``), dropped with everything in it afterwards."""
    name = f"sp_test_{uuid.uuid4().hex}"
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def raw(dsn: str, schema: str, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
    """Run one statement in ``schema`` on a connection of its own, committed."""
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        cursor = conn.execute(statement, params)  # type: ignore[arg-type]  # test SQL, not user input
        return cursor.fetchall() if cursor.description is not None else []


def postgres_tamper(dsn: str, schema: str) -> Any:
    """A conformance ``tamper`` that damages rows with raw SQL, as a bad disk or a hand edit would."""

    def tamper(store: Store, run_id: str, step: int, what: str) -> None:
        del store  # the damage goes through a connection of its own
        key = {"run_id": run_id, "step": step}
        ((run_ref,),) = raw(dsn, schema, "SELECT id FROM safepoint_runs WHERE run_id = %(run_id)s", key)
        where = {"run_ref": run_ref, "step": step}
        if what == "header":
            raw(
                dsn,
                schema,
                "UPDATE safepoint_checkpoints"
                " SET header = convert_to(replace(convert_from(header, 'UTF8'), 'batch', 'botch'), 'UTF8')"
                " WHERE run_ref = %(run_ref)s AND step = %(step)s",
                where,
            )
            return
        # The checkpoint's row carries the last message it added, in its packed messages.
        ((packed,),) = raw(
            dsn,
            schema,
            "SELECT messages FROM safepoint_checkpoints WHERE run_ref = %(run_ref)s AND step = %(step)s",
            where,
        )
        bodies = bytes(packed).split(b"\n")
        if what == "message":
            bodies[-1] = bodies[-1].replace(b"user", b"root").replace(b"assistant", b"root")
        else:  # drop_message: a torn row that lost its last message
            bodies.pop()
        raw(
            dsn,
            schema,
            "UPDATE safepoint_checkpoints SET messages = %(messages)s"
            " WHERE run_ref = %(run_ref)s AND step = %(step)s",
            {**where, "messages": b"\n".join(bodies)},
        )

    return tamper
