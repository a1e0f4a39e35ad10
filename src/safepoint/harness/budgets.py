"""Budgets: limits on tokens, spend and steps, kept in the run's counters.

The limits live in the checkpoint next to what they limit (``budget_tokens``,
``budget_spend``, ``budget_steps`` beside ``tokens_in``/``tokens_out``,
``spend``, ``steps``), so every process that resumes the run sees both the
limit and everything already used — a resumed run cannot start from zero.

* tokens (in + out) and spend: exceeded when usage goes *over* the limit; it is
  checked as usage is added, i.e. after the model call that went over;
* steps: a run may commit at most ``steps`` steps; the commit that reaches
  the limit while the run would go on running stops it instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from safepoint.errors import BudgetExceeded, InvalidArgument

USAGE_COUNTERS: dict[str, int | float] = {
    "tokens_in": 0,
    "tokens_out": 0,
    "spend": 0.0,
    "steps": 0,
    "actions": 0,
}
_LIMITS = ("tokens", "spend", "steps")
SPEND_PLACES = 9


def _limit(name: str, value: Any) -> int | float | None:
    if value is None:
        return None
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value < 0:
        raise InvalidArgument(f"budget {name} must be a non-negative number or None, not {value!r}")
    if name != "spend" and not isinstance(value, int):
        raise InvalidArgument(f"budget {name} must be an int, not {value!r}")
    return value  # type: ignore[no-any-return]  # checked to be an int or float above


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one run; ``None`` means unlimited. Stored with the run when it starts.

    ``tokens`` counts input and output tokens together; ``spend`` is in
    whatever unit the harness adds usage in (cents, dollars, credits).
    """

    tokens: int | None = None
    spend: float | None = None
    steps: int | None = None

    def __post_init__(self) -> None:
        for name in _LIMITS:
            _limit(name, getattr(self, name))

    def to_counters(self) -> dict[str, int | float]:
        """The limits as counters (``budget_<name>``), only those that are set."""
        out: dict[str, int | float] = {}
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None:
                out[f"budget_{name}"] = value
        return out

    @classmethod
    def from_counters(cls, counters: dict[str, int | float]) -> Budget:
        """The limits a run's counters carry."""
        return cls(**{name: counters.get(f"budget_{name}") for name in _LIMITS})  # type: ignore[arg-type]


def used(counters: dict[str, int | float]) -> dict[str, int | float]:
    """What the run has used of each budgeted quantity."""
    return {
        "tokens": int(counters.get("tokens_in", 0)) + int(counters.get("tokens_out", 0)),
        "spend": counters.get("spend", 0.0),
        "steps": int(counters.get("steps", 0)),
    }


def remaining(counters: dict[str, int | float]) -> Budget:
    """What is left of each limit (``None`` where there is no limit; never negative)."""
    budget, spent = Budget.from_counters(counters), used(counters)
    left: dict[str, Any] = {}
    for name in _LIMITS:
        limit = getattr(budget, name)
        left[name] = None if limit is None else max(limit - spent[name], 0)
    return Budget(**left)


def over_usage(run_id: str, counters: dict[str, int | float]) -> BudgetExceeded | None:
    """The tokens or spend limit the counters went over, if any."""
    budget, spent = Budget.from_counters(counters), used(counters)
    for name in ("tokens", "spend"):
        limit = getattr(budget, name)
        if limit is not None and spent[name] > limit:
            return BudgetExceeded(run_id, name, limit, spent[name])
    return None


def at_step_limit(run_id: str, counters: dict[str, int | float]) -> BudgetExceeded | None:
    """The steps limit, if the run has committed all the steps it may."""
    limit, steps = Budget.from_counters(counters).steps, used(counters)["steps"]
    if limit is not None and steps >= limit:
        return BudgetExceeded(run_id, "steps", limit, steps)
    return None


def starting_counters(budget: Budget | None) -> dict[str, int | float]:
    """A new run's counters: nothing used yet, and its limits."""
    counters = dict(USAGE_COUNTERS)
    if budget is not None:
        counters.update(budget.to_counters())
    return counters


def check_usage(tokens_in: Any, tokens_out: Any, spend: Any) -> None:
    """Refuse usage that no call can have: negative, fractional tokens, an infinite spend."""
    for name, value in (("tokens_in", tokens_in), ("tokens_out", tokens_out)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidArgument(f"{name} must be a non-negative int, not {value!r}")
    if not isinstance(spend, int | float) or isinstance(spend, bool) or not math.isfinite(spend) or spend < 0:
        raise InvalidArgument(f"spend must be a non-negative number, not {spend!r}")


def add_usage(counters: dict[str, int | float], tokens_in: int, tokens_out: int, spend: float) -> None:
    """Add one model call's usage to the counters (in place), refusing negative amounts."""
    check_usage(tokens_in, tokens_out, spend)
    counters["tokens_in"] = int(counters.get("tokens_in", 0)) + tokens_in
    counters["tokens_out"] = int(counters.get("tokens_out", 0)) + tokens_out
    # Rounded to 9 places: sums of prices print cleanly (no 1.8873000000000002), and
    # every process rounds alike, so a resumed run's spend equals an uninterrupted one's.
    counters["spend"] = round(float(counters.get("spend", 0.0)) + spend, SPEND_PLACES)
