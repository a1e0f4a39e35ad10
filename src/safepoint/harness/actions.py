"""Pending actions: what a run was doing when it stopped, and how a resume settles it.

Before a side effect, ``Run.action`` saves the action in the checkpoint's
``pending_action`` — tool name, arguments and an idempotency key — and only
then calls the tool. A run that crashed between that save and the next one
is resumed with the action still pending, and nobody knows whether the
effect happened. A per-tool *reconcile hook* decides (``Reconcile``):

* ``rerun`` — call the tool again with the same key (it is idempotent, or
  the service dedupes by key);
* ``skip`` — the hook found out the effect happened, and gives its result;
* ``wait`` — stop the run as ``waiting`` until a human decides.

A tool without a hook waits: an action that may not be repeated is never
repeated silently.

Stored shapes (plain JSON in ``Checkpoint.pending_action``)::

    {"kind": "action", "tool": ..., "args": {...}, "key": "<64 hex>", "step": 3, "call": 0,
     "question": ...,                                 # while waiting on a human
     "resolution": {"decision": "skip", "result": ...}}  # once a human decided
    {"kind": "input", "question": ..., "step": 3, "answer": ...}  # human input; answer once given
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from safepoint.errors import InvalidArgument, RunStatusError
from safepoint.reconcile import Reconcile  # below the harness: the journal decides with it too

ACTION, INPUT = "action", "input"
# What a pending action the harness saved always holds, and as which type.
_ACTION_FIELDS = (("tool", str), ("key", str), ("step", int), ("call", int))


def idempotency_key(run_id: str, step: int, call: int) -> str:
    """The key of the ``call``-th action of harness step ``step`` of a run (64 hex digits).

    A function of its arguments only, so the action that a resumed run takes
    again gets the key the crashed run used, in any process.
    """
    return hashlib.sha256(f"safepoint-action\x1f{run_id}\x1f{step}\x1f{call}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingAction:
    """An action saved before its side effect: what a reconcile hook is shown.

    ``step`` is the harness step (the number of commits before it) and ``call``
    the action's index within that step; ``key`` derives from both.
    """

    tool: str
    args: Any
    key: str
    step: int
    call: int
    question: str | None = None
    resolution: Reconcile | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": ACTION, "tool": self.tool, "args": self.args, "key": self.key}
        data.update(step=self.step, call=self.call)
        if self.question is not None:
            data["question"] = self.question
        if self.resolution is not None:
            data["resolution"] = self.resolution.to_json()
        return data

    @classmethod
    def from_json(
        cls, data: dict[str, Any], *, run_id: str | None = None, status: str = "waiting"
    ) -> PendingAction:
        """The action ``data`` (a checkpoint's ``pending_action``) holds.

        A pending action saved by hand without the harness's fields (``tool``,
        ``key``, ``step``, ``call``) raises ``RunStatusError`` naming the run
        and the field (``InvalidArgument`` without ``run_id``), never a
        ``KeyError``: the harness cannot settle an action it does not know.
        """
        try:
            return cls._parse(data)
        except InvalidArgument as wrong:
            detail = f"its pending action is not one the harness saves ({wrong}); see docs/harness.md"
            if run_id is None:
                raise InvalidArgument(detail) from None
            raise RunStatusError(run_id, status, detail) from None

    @classmethod
    def _parse(cls, data: Any) -> PendingAction:
        if not isinstance(data, dict):
            raise InvalidArgument("not a dict")
        for name, kind in _ACTION_FIELDS:
            value = data.get(name)
            # bool is an int, but no step or call the harness saves is one
            if not isinstance(value, kind) or isinstance(value, bool):
                raise InvalidArgument(f"{name!r} is missing or not {kind.__name__}")
        resolution = data.get("resolution")
        question = data.get("question")
        if question is not None and not isinstance(question, str):
            raise InvalidArgument("'question' is not text")
        return cls(
            tool=data["tool"],
            args=data.get("args"),
            key=data["key"],
            step=data["step"],
            call=data["call"],
            question=question,
            resolution=None if resolution is None else Reconcile.from_json(resolution),
        )

    def waiting(self, question: str) -> PendingAction:
        return replace(self, question=question, resolution=None)

    def resolved(self, decision: Reconcile) -> PendingAction:
        return replace(self, question=None, resolution=decision)


ReconcileHook: TypeAlias = Reconcile | Callable[[PendingAction], Reconcile | Awaitable[Reconcile]]


def default_question(action: PendingAction) -> str:
    """What a run asks when an action it cannot safely repeat was interrupted."""
    return (
        f"the run stopped while taking action {action.tool!r} (idempotency key {action.key}) and "
        "cannot tell whether it happened; answer with Reconcile.skip(result) if it did, "
        "or Reconcile.rerun() to take it again"
    )


def pending_kind(pending: dict[str, Any] | None) -> str | None:
    """``"action"``, ``"input"`` or None (nothing pending)."""
    if pending is None:
        return None
    return str(pending.get("kind", ACTION))


def check_decision(tool: str, decision: Any) -> Reconcile:
    if not isinstance(decision, Reconcile):
        raise InvalidArgument(
            f"the reconcile hook of tool {tool!r} returned {type(decision).__name__}, not a Reconcile"
        )
    return decision
