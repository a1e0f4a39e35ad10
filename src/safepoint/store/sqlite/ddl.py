"""safepoint's tables on SQLite: the fresh schema, or each missing DDL revision, under the write lock."""

from __future__ import annotations

import sqlite3

from safepoint.errors import StoreError
from safepoint.store.sqlfiles import Revision, load_revisions

_PACKAGE = __package__ or "safepoint.store.sqlite"
REVISIONS = load_revisions(_PACKAGE)

REVISIONS_TABLE = """
CREATE TABLE IF NOT EXISTS safepoint_ddl_revisions (
    revision    INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    applied_at  INTEGER NOT NULL   -- unixepoch() when applied
)"""


def upgrade(conn: sqlite3.Connection) -> list[int]:
    """Bring safepoint's tables up to date; returns the revisions applied now.

    Each missing revision is applied in order (all of them on a fresh
    database). Both happen under the write lock
    (``BEGIN IMMEDIATE``), so processes starting together cannot apply a
    revision twice.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(REVISIONS_TABLE)
        applied = {row[0] for row in conn.execute("SELECT revision FROM safepoint_ddl_revisions")}
        # A fresh database is one with none applied: the revisions are the one
        # description of the tables, so no second file can drift from them.
        todo = [r for r in REVISIONS if r.number not in applied]
        for revision in todo:
            execute_script(conn, revision.sql)
        for revision in todo:
            record_revision(conn, revision)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return [r.number for r in todo]


def execute_script(conn: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` inside the current transaction.

    ``sqlite3.executescript`` would COMMIT first, breaking the all-or-nothing
    DDL upgrade, hence this statement-by-statement loop.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            conn.execute(buffer)
            buffer = ""
    if buffer.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in buffer.splitlines()
    ):
        raise StoreError("DDL script ends with an incomplete statement")


def record_revision(conn: sqlite3.Connection, revision: Revision) -> None:
    conn.execute(
        "INSERT INTO safepoint_ddl_revisions (revision, name, applied_at) VALUES (?, ?, unixepoch())",
        (revision.number, revision.name),
    )
