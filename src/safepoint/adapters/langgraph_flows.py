"""Moved: the saver's writes to ``safepoint.adapters.langgraph.writes``, its reads to
``…langgraph.reads``, the step context to ``…langgraph.steps``. This old name re-exports them, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.reads import (
    get_tuple,
    list_tuples,
)
from safepoint.adapters.langgraph.steps import (
    Context,
    encode_snapshot,
)
from safepoint.adapters.langgraph.writes import (
    copy_thread,
    delete_thread,
    encode_writes,
    find_step,
    keeps_newer_log,
    newer_than_stored,
    put,
    put_writes,
)

__all__ = [
    "Context",
    "copy_thread",
    "delete_thread",
    "encode_snapshot",
    "encode_writes",
    "find_step",
    "get_tuple",
    "keeps_newer_log",
    "list_tuples",
    "newer_than_stored",
    "put",
    "put_writes",
]

warnings.warn(
    "safepoint.adapters.langgraph_flows moved to safepoint.adapters.langgraph.writes (and .reads, .steps)",
    DeprecationWarning,
    stacklevel=2,
)
