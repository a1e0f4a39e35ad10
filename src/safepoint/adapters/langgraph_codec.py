"""Moved to ``safepoint.adapters.langgraph.codec``: this old name re-exports it, and warns."""

from __future__ import annotations

import warnings

from safepoint.adapters.langgraph.codec import (
    JSON,
    LANGCHAIN,
    TYPED,
    RefusedValue,
    ValueCodec,
    is_plain,
    make_serde,
)

__all__ = ["JSON", "LANGCHAIN", "TYPED", "RefusedValue", "ValueCodec", "is_plain", "make_serde"]

warnings.warn(
    "safepoint.adapters.langgraph_codec moved to safepoint.adapters.langgraph.codec",
    DeprecationWarning,
    stacklevel=2,
)
