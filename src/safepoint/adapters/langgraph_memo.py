"""Moved to ``safepoint.adapters.langgraph.memo``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.memo import (
    KEEP_STEPS,
    Log,
    Memo,
    Step,
    is_head,
    same_prefix,
)

__all__ = ["KEEP_STEPS", "Log", "Memo", "Step", "is_head", "same_prefix"]

warnings.warn(
    "safepoint.adapters.langgraph_memo moved to safepoint.adapters.langgraph.memo",
    DeprecationWarning,
    stacklevel=2,
)
