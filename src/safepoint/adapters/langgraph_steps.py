"""Moved to ``safepoint.adapters.langgraph.steps``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.steps import (
    FLUSH_AT,
    MAX_ORPHANS,
    Builder,
    Built,
    Context,
    append_step,
    encode_snapshot,
    finish_step,
    flush_index,
    known_covers,
    read_index,
    set_messages,
    start_step,
    step_at,
)

__all__ = [
    "FLUSH_AT",
    "MAX_ORPHANS",
    "Builder",
    "Built",
    "Context",
    "append_step",
    "encode_snapshot",
    "finish_step",
    "flush_index",
    "known_covers",
    "read_index",
    "set_messages",
    "start_step",
    "step_at",
]

warnings.warn(
    "safepoint.adapters.langgraph_steps moved to safepoint.adapters.langgraph.steps",
    DeprecationWarning,
    stacklevel=2,
)
