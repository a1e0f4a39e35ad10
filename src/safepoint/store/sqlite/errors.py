"""sqlite3 errors -> safepoint errors, at the driver boundary.

SQLite's error texts name tables, columns and constraints, never a bound
value, so they are kept. What matters is the class: a full disk
(``SQLITE_FULL``, also what a ``max_page_count`` limit reports), a lock held
past ``busy_timeout`` (``SQLITE_BUSY``, ``SQLITE_LOCKED``) and an I/O error
(``SQLITE_IOERR``: a write or fsync the file system refused, e.g. out of
space on a tmpfs) are transient — the same call succeeds once space or the
lock comes back — so they become ``StoreUnavailable``. A damaged file
(``SQLITE_CORRUPT``: ``database disk image is malformed``; ``SQLITE_NOTADB``:
``file is not a database``) is not transient and not the caller's doing: it
becomes ``StoreCorrupt`` naming the file, which the CLI reports as corrupt
(exit 4) rather than unavailable. The rest stay ``StoreError``.
"""

from __future__ import annotations

import os
import sqlite3

from safepoint.errors import StoreCorrupt, StoreError, StoreUnavailable
from safepoint.visible import visible

# Primary result codes (the low byte of an extended code), from sqlite3.h.
_BUSY, _LOCKED, _IOERR, _FULL = 5, 6, 10, 13
_CORRUPT, _NOTADB = 11, 26
_TRANSIENT = frozenset({_BUSY, _LOCKED, _IOERR, _FULL})


def translate(exc: sqlite3.Error, doing: str, path: str | None = None) -> StoreError:
    """The safepoint error for ``exc``, raised while ``doing`` (the caller chains it ``from exc``).

    A failed COMMIT is not ambiguous on SQLite: SQLite rolls the transaction
    back before it reports the error, so ``committing`` is never set.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (_CORRUPT, _NOTADB):
        where = "an in-memory database" if path is None else visible(os.path.abspath(path))
        return StoreCorrupt(where, f"SQLite reports {exc} while {doing}")
    if isinstance(code, int) and code & 0xFF in _TRANSIENT:
        return StoreUnavailable(f"SQLite unavailable while {doing}: {exc}")
    return StoreError(f"SQLite failed while {doing}: {exc}")
