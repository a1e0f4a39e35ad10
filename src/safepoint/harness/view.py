"""What ``Run`` and ``AsyncRun`` share without any I/O: the run's fields and in-memory edits."""

from __future__ import annotations

from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.journal import Tally
from safepoint.model import Checkpoint, JSONDict, Status

from . import budgets
from .actions import ACTION, INPUT, PendingAction, pending_kind
from .core import RunCore
from .errors import RunStatusError


class RunView:
    """The run as this process holds it: read its fields, and edit the step in progress.

    The step in progress is the *working* checkpoint — the next one to be
    saved. ``messages``, ``counters``, ``cursors`` and ``state`` are its live
    objects: edit them in place, and ``commit`` saves the lot atomically.
    """

    def __init__(self, core: RunCore) -> None:
        self._core = core

    # -- what the run is --------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._core.run_id

    @property
    def step(self) -> int:
        """The step of the last checkpoint saved (or loaded) — the store's step number."""
        return self._core.head

    @property
    def steps(self) -> int:
        """Harness steps committed so far (``counters["steps"]``); an action's own save is not one."""
        return int(self._core.cp.counters.get("steps", 0))

    @property
    def status(self) -> Status:
        return self._core.cp.status

    @property
    def active(self) -> bool:
        """True while the run is ``running``: keep stepping. False once done, waiting, failed …"""
        return self._core.cp.status is Status.RUNNING

    @property
    def checkpoint(self) -> Checkpoint:
        """The working checkpoint (the next step to be saved), for what the accessors don't cover."""
        return self._core.cp

    @property
    def messages(self) -> list[JSONDict]:
        """The conversation, in the harness's own message format; append with ``append``."""
        return self._core.cp.messages

    @property
    def counters(self) -> dict[str, int | float]:
        """Usage so far (``tokens_in``, ``tokens_out``, ``spend``, ``steps``, ``actions``) and limits."""
        return self._core.cp.counters

    @property
    def cursors(self) -> JSONDict:
        """Progress through multi-part work; see ``advance``."""
        return self._core.cp.cursors

    @property
    def state(self) -> JSONDict:
        """Any other JSON-compatible application data."""
        return self._core.cp.state

    @property
    def labels(self) -> dict[str, str]:
        return self._core.cp.labels

    @property
    def budget(self) -> budgets.Budget:
        """The limits stored with the run when it started."""
        return budgets.Budget.from_counters(self._core.cp.counters)

    @property
    def remaining(self) -> budgets.Budget:
        """What is left of each limit (``None`` where there is none)."""
        return budgets.remaining(self._core.cp.counters)

    @property
    def pending(self) -> PendingAction | None:
        """The action a crash interrupted, while it waits to be replayed or decided by a human."""
        pending = self._core.cp.pending_action
        if pending_kind(pending) != ACTION:
            return None
        assert pending is not None
        return PendingAction.from_json(pending, run_id=self.run_id, status=self.status.value)

    @property
    def journal(self) -> Tally:
        """What the call journal did for this ``Run`` in this process: calls made, replayed,
        re-sent (``resent``, with their ``lost_*`` usage), divergences, results not recorded,
        interrupted actions its reconcile hooks settled. The run's counters keep what lasts."""
        return self._core.journal

    @property
    def question(self) -> str | None:
        """While ``waiting``: what the run asks (for input, or about an interrupted action)."""
        pending = self._core.cp.pending_action
        if self._core.cp.status is not Status.WAITING or pending is None:
            return None
        question = pending.get("question")
        return None if question is None else str(question)

    @property
    def has_input(self) -> bool:
        """True when ``resume_with`` delivered an answer that ``take_input`` has not taken yet."""
        pending = self._core.cp.pending_action
        return pending_kind(pending) == INPUT and pending is not None and "answer" in pending

    # -- editing the step in progress -------------------------------------------

    def take_input(self) -> Any:
        """The human's answer given with ``resume_with``; taken once, and recorded as taken
        by the next save (so use it in this step: e.g. append it as a message)."""
        if not self.has_input:
            raise RunStatusError(self.run_id, self.status.value, "has no human input to take")
        pending = self._core.cp.pending_action
        assert pending is not None
        self._core.cp.pending_action = None
        return pending["answer"]

    def append(self, *messages: JSONDict) -> None:
        """Append messages to the conversation (any JSON-compatible dicts)."""
        self._core.require_active("append messages")
        self._core.cp.messages.extend(messages)

    def advance(self, cursor: str, by: int = 1) -> int:
        """Move a cursor forward and return its position.

        A cursor is an int, or a dict with ``"done"`` (and usually ``"total"``):
        ``{"done": 8, "total": 10}``. A cursor that does not exist starts at 0.
        """
        if not isinstance(by, int) or isinstance(by, bool):
            raise InvalidArgument(f"by must be an int, not {by!r}")
        cursors = self._core.cp.cursors
        value = cursors.get(cursor, 0)
        if isinstance(value, dict) and isinstance(value.get("done"), int):
            value["done"] += by
            return int(value["done"])
        if isinstance(value, int) and not isinstance(value, bool):
            cursors[cursor] = value + by
            return value + by
        raise InvalidArgument(f"cursor {cursor!r} is neither an int nor a dict with an int 'done'")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.run_id!r} step {self.step} {self.status.value}>"
