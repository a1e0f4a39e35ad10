"""Moved to ``safepoint.adapters.langgraph.reads``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.reads import (
    get_tuple,
    list_tuples,
    tuple_from,
)

__all__ = ["get_tuple", "list_tuples", "tuple_from"]

warnings.warn(
    "safepoint.adapters.langgraph_reads moved to safepoint.adapters.langgraph.reads",
    DeprecationWarning,
    stacklevel=2,
)
