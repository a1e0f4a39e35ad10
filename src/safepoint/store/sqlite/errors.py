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
(exit 4) rather than unavailable. So does a text value that is not UTF-8 (a
blob's storage class edited into text): Python's sqlite3 reports it quoting
the value, so only its column is named. The rest stay ``StoreError``.
"""

from __future__ import annotations

import os
import re
import sqlite3

from safepoint.errors import StoreCorrupt, StoreError, StoreUnavailable
from safepoint.visible import visible

# Primary result codes (the low byte of an extended code), from sqlite3.h.
_BUSY, _LOCKED, _IOERR, _FULL = 5, 6, 10, 13
_CORRUPT, _NOTADB = 11, 26
_TRANSIENT = frozenset({_BUSY, _LOCKED, _IOERR, _FULL})
# sqlite3's own error for a TEXT value it cannot decode; the rest of its text is the value.
_NOT_UTF8 = re.compile(r"Could not decode to UTF-8 column '([A-Za-z_][A-Za-z0-9_]*)'")


def translate(exc: sqlite3.Error, doing: str, path: str | None = None) -> StoreError:
    """The safepoint error for ``exc``, raised while ``doing`` (the caller chains it ``from exc``).

    A failed COMMIT is not ambiguous on SQLite: SQLite rolls the transaction
    back before it reports the error, so ``committing`` is never set.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    where = "an in-memory database" if path is None else visible(os.path.abspath(path))
    if isinstance(code, int) and code & 0xFF in (_CORRUPT, _NOTADB):
        return StoreCorrupt(where, f"SQLite reports {exc} while {doing}")
    not_text = _NOT_UTF8.match(str(exc))
    if not_text is not None:
        return StoreCorrupt(where, f"a value of column {not_text[1]} is not UTF-8 text, read while {doing}")
    if isinstance(code, int) and code & 0xFF in _TRANSIENT:
        return StoreUnavailable(f"SQLite unavailable while {doing}: {exc}")
    return StoreError(f"SQLite failed while {doing}: {exc}")
