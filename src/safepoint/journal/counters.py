"""A journaled run's counters, from its entries: the names every framework integration writes.

An integration that saves its own checkpoints (a session, a thread) stamps
each save with these counters, so ``safepoint runs``, ``show`` and the
inspector's cost views read the same names whatever wrote the run. They are
counted from the journal's ``Tally`` — one count per recorded call, made or
replayed — never from the framework's totals, which add a replayed
response's usage again. What a crash cost (model calls found in flight and
sent again, with their own reported usage as the estimate) is kept apart.
"""

from __future__ import annotations

from collections.abc import Mapping

from .replay import Tally

__all__ = ["COUNTED", "LOST", "counted", "counters", "lost", "with_lost"]

# Kept across turns and resumes: the run's cost.
COUNTED = ("tokens_in", "tokens_out", "spend", "model_calls", "tool_calls")
# What crashes cost, an estimate shown apart from the counters.
LOST = ("resent_calls", "lost_tokens_in_estimate", "lost_tokens_out_estimate", "lost_spend_estimate")


def counters(
    models: Tally,
    tools: Tally,
    start: Mapping[str, int | float],
    lost_before: Mapping[str, int | float],
) -> dict[str, int | float]:
    """The counters after a turn: ``start`` (the run's ``COUNTED`` at the turn's start) plus one
    count per call this turn recorded; ``lost_before`` (the run's ``LOST`` when the turn was
    opened) plus the calls this turn found in flight."""
    counted_now = {
        "tokens_in": models.tokens_in,
        "tokens_out": models.tokens_out,
        "spend": models.spend,
        "model_calls": models.called + models.replayed,
        "tool_calls": tools.called + tools.replayed + tools.skipped,  # a rerun is called
    }
    out: dict[str, int | float] = {}
    for name, value in counted_now.items():
        out[name] = _add(start.get(name, 0), value)
    out.update(with_lost(lost_before, models))
    return out


def lost(models: Tally) -> dict[str, int | float]:
    """The ``LOST`` counters of the model calls ``models`` found in flight and sent again."""
    return {
        "resent_calls": models.resent,
        "lost_tokens_in_estimate": models.lost_tokens_in,
        "lost_tokens_out_estimate": models.lost_tokens_out,
        "lost_spend_estimate": models.lost_spend,
    }


def with_lost(before: Mapping[str, int | float], models: Tally) -> dict[str, int | float]:
    """The ``LOST`` counters ``before`` plus those of ``models``."""
    return {name: _add(before.get(name, 0), value) for name, value in lost(models).items()}


def counted(stored: Mapping[str, object] | None) -> dict[str, int | float]:
    """The ``COUNTED`` names a checkpoint's counters hold (a turn's starting point)."""
    out: dict[str, int | float] = {}
    for name in COUNTED:
        value = (stored or {}).get(name)
        if isinstance(value, int | float):
            out[name] = value
    return out


def _add(a: int | float, b: int | float) -> int | float:
    return round(a + b, 9) if isinstance(a, float) or isinstance(b, float) else a + b
