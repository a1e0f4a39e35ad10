"""What the harness refuses while it runs an agent: a budget spent, a call the
run's status forbids, a resumed run that did not replay its pending action.

See ``safepoint.errors`` for the whole tree.
"""

from __future__ import annotations

from .base import SafepointError


class BudgetExceeded(SafepointError):
    """A run reached one of its budgets (tokens, spend or steps); the run is stopped."""

    def __init__(self, run_id: str, budget: str, limit: float, used: float) -> None:
        self.run_id = run_id
        self.budget = budget
        self.limit = limit
        self.used = used
        super().__init__(f"run {run_id!r} exceeded its {budget} budget: {used:g} used of {limit:g}")


class RunStatusError(SafepointError):
    """The run is not in a status that allows the call; nothing was saved."""

    def __init__(self, run_id: str, status: str, detail: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(f"run {run_id!r} is {status}: {detail}")


class ActionMismatch(SafepointError):
    """A resumed run's next action is not the one its crash interrupted.

    A run resumed with an action pending must take that action again, as its
    next ``action`` call (the harness then returns the result the journal
    recorded, or reruns or skips it as its reconcile hook decided), before any
    other action, ``run.call`` or commit. Anything else means the agent does
    not continue from its checkpoint, and the interrupted action would be
    lost or taken under another key.
    """

    def __init__(
        self, run_id: str, expected: str, step: int, call: int, got: str | None, *, doing: str = "took action"
    ) -> None:
        self.run_id = run_id
        self.expected = expected
        self.got = got
        doing = "committed" if got is None else f"{doing} {got!r}"
        super().__init__(
            f"run {run_id!r} resumed with action {expected!r} (step {step}, call {call}) pending, "
            f"but {doing} instead of taking it again"
        )
