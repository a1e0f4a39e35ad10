"""``Reconcile``: what to do about a call a crash interrupted — the one vocabulary of ``Run``'s
pending actions and of every integration's call journal (``safepoint.journal``).

A module of its own, below both: the harness (``safepoint.harness.actions``)
settles an interrupted action with it, and the journal's flows settle a
non-idempotent tool found in flight with it, so neither package imports the other's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from safepoint.errors import InvalidArgument

Decision = Literal["rerun", "skip", "wait"]
_DECISIONS = ("rerun", "skip", "wait")


@dataclass(frozen=True, slots=True)
class Reconcile:
    """A reconcile hook's decision about an action left pending by a crash."""

    decision: Decision
    result: Any = None  # for ``skip``: what the action returned
    question: str | None = None  # for ``wait``: what to ask the human

    def __post_init__(self) -> None:
        if self.decision not in _DECISIONS:
            raise InvalidArgument(f"decision must be one of {_DECISIONS}, not {self.decision!r}")

    @classmethod
    def rerun(cls) -> Reconcile:
        """Call the tool again, with the same idempotency key."""
        return cls("rerun")

    @classmethod
    def skip(cls, result: Any = None) -> Reconcile:
        """The effect happened: don't call the tool; the action returns ``result``."""
        return cls("skip", result)

    @classmethod
    def wait(cls, question: str | None = None) -> Reconcile:
        """Stop the run as ``waiting``; a human answers with ``resume_with``."""
        return cls("wait", question=question)

    def to_json(self) -> dict[str, Any]:
        if self.decision == "skip":
            return {"decision": "skip", "result": self.result}
        return {"decision": self.decision}

    @classmethod
    def from_json(cls, data: Any) -> Reconcile:
        if not isinstance(data, dict) or data.get("decision") not in _DECISIONS:
            raise InvalidArgument("resolution: not a decision the harness saves")
        return cls(data["decision"], data.get("result"))
