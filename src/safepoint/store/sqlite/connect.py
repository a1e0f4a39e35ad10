"""Connecting to a SQLite database: the pragmas of a writable one, read-only and immutable opens.

A writable file gets WAL with ``synchronous=FULL`` (DESIGN invariant 1), a
busy timeout and incremental auto-vacuum; ``memory://`` is a private
in-memory database with the same settings that apply to it.

``read_only=True`` opens an existing file to look at it (DESIGN invariant
10): ``mode=ro``, no folder made, no DDL, no ``journal_mode`` change. A
WAL-mode file read that way still needs its ``-shm`` index: SQLite creates
``-shm`` and ``-wal`` beside the file when the folder allows it. When it
does not (``SQLITE_READONLY_DIRECTORY``, or an index it cannot use), the
file is opened ``immutable=1`` instead: a snapshot of the main file, without
what the ``-wal`` holds, said by a ``SnapshotWarning``.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from safepoint.errors import StoreError, StoreNotFound
from safepoint.visible import visible

from .ddl import REVISIONS
from .errors import translate

# Primary result codes after which a read-only open falls back to immutable=1.
_READONLY, _CANTOPEN = 8, 14


class SnapshotWarning(UserWarning):
    """A read-only SQLite store is read as an immutable snapshot (no write access to its folder)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How every connection of one store is opened (at open, and again in a forked child)."""

    path: str | None  # None: memory://
    busy_timeout: float = 30.0
    wal_autocheckpoint: int = 256
    trace: Callable[[str], None] | None = None
    read_only: bool = False


def connect(settings: Settings, *, snapshot: bool = False) -> tuple[sqlite3.Connection, bool]:
    """A connection with the store's settings, and whether it reads an immutable snapshot."""
    if settings.read_only and settings.path is not None:
        conn, snapshot = _open_read_only(settings, settings.path, snapshot)
    else:
        conn = _open_writable(settings)
    if settings.trace is not None:
        conn.set_trace_callback(settings.trace)
    return conn, snapshot


def _open_writable(settings: Settings) -> sqlite3.Connection:
    path, busy_timeout = settings.path, settings.busy_timeout
    try:
        conn = sqlite3.connect(
            ":memory:" if path is None else path,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # guarded by the driver's lock instead
            timeout=busy_timeout,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if path is not None:
            # A new file becomes an incremental auto-vacuum one, so that gc can
            # give freed pages back (maintenance.collect_garbage); it must be set
            # before journal_mode = WAL writes the file's first page. On an
            # existing file it changes nothing until a full VACUUM (Store.vacuum).
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            _switch_to_wal(conn, busy_timeout)
            # Checkpoint the WAL back into the database every 256 pages
            # (1 MiB) instead of SQLite's 1,000: a commit that must grow the
            # WAL file also commits file-size metadata and is markedly
            # slower than one that overwrites WAL space already there.
            # A small WAL is reused sooner and stays small on disk;
            # measured: saves/s against raw commits 0.80x vs 0.65x.
            conn.execute(f"PRAGMA wal_autocheckpoint = {int(settings.wal_autocheckpoint)}")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as exc:
        raise translate(exc, f"opening the SQLite database {path!r}", path) from exc
    return conn


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out other connections up to ``busy_timeout``.

    The switch needs the file to itself, and SQLite answers "database is locked"
    at once, without its busy handler, while another connection has a fresh file
    open in its first (rollback-journal) moments: what several processes starting
    together on a new store do. So it is retried, with a growing pause, until the
    busy timeout has passed; then the error is the caller's (``StoreUnavailable``).
    """
    deadline, pause = time.monotonic() + busy_timeout, 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _open_read_only(settings: Settings, path: str, snapshot: bool) -> tuple[sqlite3.Connection, bool]:
    """``mode=ro``, or ``immutable=1`` when the folder does not let SQLite keep its WAL index."""
    uri = Path(path).absolute().as_uri()
    while True:
        query = "?mode=ro&immutable=1" if snapshot else "?mode=ro"
        try:
            conn = sqlite3.connect(
                uri + query,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=settings.busy_timeout,
            )
        except sqlite3.Error as exc:
            raise translate(exc, f"opening the SQLite database {path!r} read-only", path) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout * 1000)}")
            # The first read opens the WAL index (-shm): the point where a folder without
            # write access shows.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            conn.close()
            code = getattr(exc, "sqlite_errorcode", 0)
            if snapshot or not isinstance(code, int) or code & 0xFF not in (_READONLY, _CANTOPEN):
                raise translate(exc, f"opening the SQLite database {path!r} read-only", path) from exc
            snapshot = True
            continue
        return conn, snapshot


def check_file(path: str) -> None:
    """``StoreNotFound`` unless ``path`` is a file (``StoreError`` when a folder on the way is closed)."""
    where = visible(os.path.abspath(path))
    try:
        mode: int | None = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as exc:  # EACCES on a folder of the path, ELOOP, …
        raise StoreError(f"cannot reach {where}: {exc.strerror}") from None
    if mode is None:
        raise StoreNotFound(url_of(path), f"{where} does not exist")
    if not stat.S_ISREG(mode):
        raise StoreNotFound(url_of(path), f"{where} is not a file")


def check_store(conn: sqlite3.Connection, path: str, *, snapshot: bool) -> None:
    """Refuse a file that holds no safepoint store, or one at an older DDL revision."""
    where = visible(os.path.abspath(path))
    if snapshot:
        warnings.warn(
            SnapshotWarning(
                f"no write access to the folder of {where}: reading it as an immutable snapshot"
                " (changes still in its -wal file are not shown)"
            ),
            stacklevel=6,  # open_store's caller (through the driver's two frames and _open_sqlite)
        )
    try:
        tables = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'safepoint_ddl_revisions'"
        ).fetchall()
        if not tables:
            raise StoreNotFound(url_of(path), f"{where} is a SQLite file without safepoint's tables")
        applied = {row[0] for row in conn.execute("SELECT revision FROM safepoint_ddl_revisions")}
    except sqlite3.Error as exc:
        raise translate(exc, f"reading the SQLite database {path!r}", path) from exc
    missing = [r.number for r in REVISIONS if r.number not in applied]
    if missing:
        raise StoreError(
            f"the safepoint store in {where} predates this version of safepoint (it lacks DDL revision"
            f" {missing[0]}): open it once for writing (open_store without read_only) to upgrade it"
        )


def url_of(path: str) -> str:
    """The URL that names ``path``, for messages (escaped: a path may hold any character)."""
    return visible(f"sqlite:///{path}", max_len=500)
