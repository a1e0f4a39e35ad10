"""A consistent copy of a live SQLite store's file, taken while its writers run.

``VACUUM INTO`` on a read-only connection: the copy is written inside one
read transaction, so it is the database exactly as one commit left it (the
WAL's committed frames included), and under WAL that read blocks no writer.
Chosen over the backup API (``sqlite3.Connection.backup``), which would be
as consistent when run in one step: ``VACUUM INTO`` writes a compact file
without the source's free pages, which can still hold the bytes of deleted
rows (a pruned checkpoint, a redacted value, plaintext from before
``safepoint encrypt``) that a backup should not carry away. The copy keeps
the page size and auto-vacuum mode; the store switches it to WAL when it is
first opened for writing.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .connect import Settings, connect
from .errors import translate

# Bound to a parameter: the destination is a file name, never SQL text.
_VACUUM_INTO = "VACUUM INTO ?"


def copy_database(source: str, dest: Path) -> int:
    """Write a consistent copy of the database at ``source`` to ``dest`` (which must not
    exist), durable when this returns; its size in bytes."""
    conn, _snapshot = connect(Settings(source, read_only=True))
    try:
        conn.execute(_VACUUM_INTO, (str(dest),))
    except sqlite3.Error as exc:
        raise translate(exc, "copying the database for a backup", source) from exc
    finally:
        conn.close()
    fd = os.open(dest, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)  # VACUUM INTO leaves the copy in the OS cache
        return os.fstat(fd).st_size
    finally:
        os.close(fd)
