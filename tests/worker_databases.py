"""PostgreSQL for the worker fault tests: a database of its own (so a fault loop can target
exactly its backends), and the local cluster the restart tests knock down."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def require_cluster() -> None:
    """A local cluster this test may restart (pg_ctlcluster, as root); under CI=true it must be there."""
    if not Path("/etc/postgresql").is_dir() or os.geteuid() != 0:
        message = "needs a local PostgreSQL cluster managed by pg_ctlcluster and root"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def restart_postgres() -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )


def wait_for_server(dsn: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def fresh_database(dsn: str) -> Iterator[tuple[str, str]]:
    """A database of its own (so the chaos loop can kill exactly its backends): (dsn, name)."""
    name = f"sp_chaos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, dbname=name), name
    finally:
        wait_for_server(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def as_url(conninfo: str) -> str:
    parts = conninfo_to_dict(conninfo)
    return f"postgresql://{parts.get('user', 'postgres')}@{parts['host']}:{parts['port']}/{parts['dbname']}"
