"""Moved to ``safepoint.adapters.langgraph.layout``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.layout import (
    ADAPTER,
    ADAPTER_LABEL,
    INDEX_ROLE,
    NS_LABEL,
    RECENT,
    ROLE_LABEL,
    SNAPSHOT_FIELDS,
    THREAD_LABEL,
    THREAD_ROLE,
    IndexEntry,
    ThreadKey,
    bookkeeping,
    decode_tuple,
    empty_snapshot,
    index_entries,
    log_length,
    log_of,
    merge_writes,
    snapshot_of,
    step_status,
)

__all__ = [
    "ADAPTER",
    "ADAPTER_LABEL",
    "INDEX_ROLE",
    "NS_LABEL",
    "RECENT",
    "ROLE_LABEL",
    "SNAPSHOT_FIELDS",
    "THREAD_LABEL",
    "THREAD_ROLE",
    "IndexEntry",
    "ThreadKey",
    "bookkeeping",
    "decode_tuple",
    "empty_snapshot",
    "index_entries",
    "log_length",
    "log_of",
    "merge_writes",
    "snapshot_of",
    "step_status",
]

warnings.warn(
    "safepoint.adapters.langgraph_layout moved to safepoint.adapters.langgraph.layout",
    DeprecationWarning,
    stacklevel=2,
)
