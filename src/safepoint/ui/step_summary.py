"""What each step of a run did, for the run page's list of steps: messages added, tool calls, tokens
and spend spent in it, the time since the step before, and the pending action where it changed.

All of it comes from ``store.timeline`` — each checkpoint's counters, message count and pending
action, read without a message body — as the difference between a step and the one before it. Tool
calls are the ``tool_calls`` counter an adapter's journal keeps (``journal.counters``), or the
``actions`` counter a ``Run`` keeps. A run's first checkpoint is measured from nothing when it is step
0, and not at all when it is a fork's first (its counters are its parent's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from safepoint.readable import number
from safepoint.records import TimelinePoint

from .chat import Pending, pending_of

SUMMARIES = 100  # steps a page of the run page lists, newest first
TOOL_COUNTERS = ("tool_calls", "actions")  # an adapter's journal's count, a Run's


@dataclass(frozen=True, slots=True)
class StepSummary:
    """One step's row; a delta is None where it cannot be told (a fork's first step)."""

    step: int
    created_at: datetime
    message_count: int
    stored_bytes: int
    messages_added: int | None
    tool_calls: float | None
    tokens: float | None
    spend: float | None
    seconds: float | None
    pending: Pending | None

    @property
    def took(self) -> str:
        """The time since the step before, as people say it: ``850 ms``, ``4.2 s``, ``3 min 5 s``."""
        if self.seconds is None:
            return "-"
        s = self.seconds
        if s < 1:
            return f"{s * 1000:.0f} ms"
        if s < 60:
            return f"{s:.1f} s"
        if s < 3600:
            return f"{int(s // 60)} min {int(s % 60)} s"
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"

    def shown(self, name: str) -> str:
        """A delta as a number people read (``+3``), or ``-``."""
        value = getattr(self, name)
        if value is None:
            return "-"
        return ("+" if value > 0 else "") + number(value)


def summaries(points: Sequence[TimelinePoint], page: int, *, forked: bool) -> list[StepSummary]:
    """Page ``page`` (1-based, in range) of the steps, newest first, each measured against the one
    before it (``points``: the timeline, oldest first; ``forked``: the run is a fork)."""
    newest = len(points) - 1 - (page - 1) * SUMMARIES
    shown = []
    for at in range(newest, max(-1, newest - SUMMARIES), -1):
        before = points[at - 1] if at > 0 else None
        shown.append(_summary(points[at], before, first_is_fork=forked and at == 0))
    return shown


def pages_of(count: int) -> int:
    return max(1, -(-count // SUMMARIES))


def _summary(point: TimelinePoint, before: TimelinePoint | None, *, first_is_fork: bool) -> StepSummary:
    deltas: tuple[int | None, float | None, float | None, float | None] = (None, None, None, None)
    if not first_is_fork and (before is not None or point.step == 0):
        was = before.counters if before is not None else {}
        now = point.counters
        tools = next((name for name in TOOL_COUNTERS if name in now or name in was), None)
        deltas = (
            point.message_count - (before.message_count if before is not None else 0),
            None if tools is None else _number(now, tools) - _number(was, tools),
            _tokens(now) - _tokens(was),
            _number(now, "spend") - _number(was, "spend"),
        )
    seconds = None if before is None else (point.created_at - before.created_at).total_seconds()
    changed = before is None or point.pending_action != before.pending_action
    return StepSummary(
        point.step,
        point.created_at,
        point.message_count,
        point.stored_bytes,
        deltas[0],
        deltas[1],
        deltas[2],
        deltas[3],
        seconds,
        pending_of(point.pending_action) if changed else None,
    )


def _tokens(counters: dict[str, Any]) -> float:
    return _number(counters, "tokens_in") + _number(counters, "tokens_out")


def _number(counters: dict[str, Any], name: str) -> float:
    value = counters.get(name, 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
