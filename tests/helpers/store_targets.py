"""Fresh stores of the four configurations a damage test runs on, and raw SQL on their tables.

SQLite and PostgreSQL, plain and encrypted: ``made(config, tmp_path)`` gives
a ``Target`` (its URL, whether it is encrypted, and a function running one
statement on its tables, unqualified names), a PostgreSQL schema dropped
afterwards; ``sp`` runs the real executable on it, the keyring in its
environment only when the store is encrypted. Shared by the integrity tests
of the run row (test_seams_integrity.py) and of the call journal
(test_journal_house.py).
"""

from __future__ import annotations

import base64
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import safepoint
import safepoint_exe
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import Keyring, Store

INDEX = base64.b64encode(bytes(range(32))).decode()
K1 = base64.b64encode(b"\x11" * 32).decode()
KEYS = f"index:{INDEX} k1:{K1}"
CONFIGS = ["sqlite", "sqlite-encrypted", "postgres", "postgres-encrypted"]


@dataclass
class Target:
    """A fresh store of one configuration, and raw SQL on its tables (unqualified names)."""

    url: str
    encrypted: bool
    execute: Callable[[str], list[Any]]

    def open(self, **options: Any) -> Store:
        if self.encrypted:
            options["encryption"] = Keyring.from_text(KEYS)
        return safepoint.open_store(self.url, **options)


@contextmanager
def made(config: str, tmp_path: Path) -> Iterator[Target]:
    """A fresh store of ``config`` (a SQLite file, or a PostgreSQL schema dropped afterwards)."""
    encrypted = config.endswith("encrypted")
    if config.startswith("sqlite"):
        path = tmp_path / "state.db"

        def execute(statement: str) -> list[Any]:
            with closing(sqlite3.connect(path)) as conn, conn:
                return conn.execute(statement).fetchall()

        yield Target(f"sqlite:///{path}", encrypted, execute)
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield Target(f"{dsn}?schema={schema}", encrypted, lambda statement: raw(dsn, schema, statement))


def sp(target: Target, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable on the target's store, given the keyring (env) only when it is encrypted."""
    with pytest.MonkeyPatch.context() as env:
        if target.encrypted:
            env.setenv("SAFEPOINT_KEYS", KEYS)
        else:
            env.delenv("SAFEPOINT_KEYS", raising=False)
        result = safepoint_exe.sp(cwd, *args, "--store", target.url, columns=300)
    assert "Traceback" not in result.stderr, result.stderr
    return result
