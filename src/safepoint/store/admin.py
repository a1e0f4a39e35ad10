"""Operators' tools over a whole store: what the CLI (and the inspector) use beyond ``Store``.

These walk or rewrite every run (``all_runs``, ``migrate_store``, ``prune_store``)
or read a store URL the way ``open_store`` does (``scheme_of``, ``split_schema``).
They are built on the public ``Store`` API; the CLI imports them from here and
nothing else under ``safepoint.store`` except the package itself.
"""

from __future__ import annotations

from .eager import MigrateReport, all_runs, migrate_store
from .housekeeping import PruneReport, prune_store
from .maintenance import FileSpace
from .urls import scheme_of, split_schema

__all__ = [
    "FileSpace",
    "MigrateReport",
    "PruneReport",
    "all_runs",
    "migrate_store",
    "prune_store",
    "scheme_of",
    "split_schema",
]
