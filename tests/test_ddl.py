"""safepoint's own tables: numbered DDL revisions and the fresh schema agree."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from safepoint.store.sqlite.ddl import REVISIONS, REVISIONS_TABLE, execute_script, record_revision
from safepoint.store.sqlite.driver import SQLiteDriver


def describe(path: Path) -> dict[str, Any]:
    """The structure of every safepoint table: columns, indexes, foreign keys."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'safepoint%' ORDER BY name"
            )
        ]
        shape: dict[str, Any] = {}
        for table in tables:
            indexes = {
                index[1]: (
                    index[2],
                    conn.execute("SELECT * FROM pragma_index_xinfo(?)", (index[1],)).fetchall(),
                )
                for index in conn.execute("SELECT * FROM pragma_index_list(?)", (table,))
            }
            shape[table] = {
                "columns": conn.execute("SELECT * FROM pragma_table_xinfo(?)", (table,)).fetchall(),
                "indexes": indexes,
                "foreign_keys": conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall(),
            }
        return shape
    finally:
        conn.close()


@pytest.mark.parametrize("start_at", range(1, len(REVISIONS) + 1))
def test_upgraded_schema_equals_fresh_schema(tmp_path: Path, start_at: int) -> None:
    """A database built revision by revision (from any revision) ends equal to a fresh one."""
    fresh = tmp_path / "fresh.db"
    SQLiteDriver(str(fresh)).close()

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(REVISIONS_TABLE)
    for revision in REVISIONS[:start_at]:
        execute_script(conn, revision.sql)
        record_revision(conn, revision)
    conn.execute("COMMIT")
    conn.close()
    driver = SQLiteDriver(str(old))
    driver.close()

    assert describe(old) == describe(fresh)
    assert describe(fresh)  # not vacuously equal


def test_setup_records_every_revision_once(tmp_path: Path) -> None:
    """Opening a database again applies nothing; every revision is recorded exactly once."""
    path = tmp_path / "state.db"
    first = SQLiteDriver(str(path))
    assert first.setup() == []  # already current after the constructor ran it
    recorded = first.execute_raw("SELECT revision FROM safepoint_ddl_revisions ORDER BY revision")
    assert [r[0] for r in recorded] == [r.number for r in REVISIONS]
    first.close()
    second = SQLiteDriver(str(path))
    assert second.setup() == []
    second.close()
