"""The harness's errors live in ``safepoint.errors`` with the rest; re-exported here."""

from __future__ import annotations

from safepoint.errors import ActionMismatch, RunStatusError

__all__ = ["ActionMismatch", "RunStatusError"]
