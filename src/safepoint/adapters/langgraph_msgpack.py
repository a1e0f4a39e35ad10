"""Moved to ``safepoint.adapters.langgraph.msgpack``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.msgpack import (
    from_tree,
    to_tree,
)

__all__ = ["from_tree", "to_tree"]

warnings.warn(
    "safepoint.adapters.langgraph_msgpack moved to safepoint.adapters.langgraph.msgpack",
    DeprecationWarning,
    stacklevel=2,
)
