"""Checkpoint stores: the ``Store`` facade, ``open_store`` and the backends.

``open_store`` / ``open_async_store`` (``opening.py``) read the URL and the
options; ``Store`` (``facade.py``) and ``AsyncStore`` (``asyncstore.py``) are
built from one call table (``methods/``); each method's work around its
transaction is a ``Call`` (``calls.py``) over an operation — a generator of
named queries (``ops/``, by subject: saving, loading, runs, leases, listing,
retention, collect, rewrite) — that a thin driver (``sqlite/``,
``postgres/``) runs in one transaction. ``store.admin`` holds the operators'
tools over a whole store.
"""

from __future__ import annotations

from .asyncstore import AsyncStore
from .facade import Store
from .opening import DEFAULT_URL, open_async_store, open_store
from .ops.leases import Attempts, QueueState
from .redacting import Redacted
from .redaction import Redaction, RedactionRecord
from .sqlite.connect import SnapshotWarning

__all__ = [
    "DEFAULT_URL",
    "AsyncStore",
    "Attempts",
    "QueueState",
    "Redacted",
    "Redaction",
    "RedactionRecord",
    "SnapshotWarning",
    "Store",
    "open_async_store",
    "open_store",
]
