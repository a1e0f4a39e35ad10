"""The recorded calls a step shows: for ``safepoint show`` and ``history``, and the inspector's step page.

A step's own calls are the journal entries its checkpoint covers
(``Recorded.step``). The run's latest step also shows the open step's calls:
recorded since it was saved, not yet covered by a checkpoint — what a run
resumed from it replays. A fork has no entries from before it was forked
and never replays its parent's (entries belong to one run); at its fork step
it shows the parent's entries up to that step, marked as the parent's — and,
for a fork of a fork, the grandparent's up to the earlier fork step.

Reading only, through the public store API. An entry that fails its digest
makes the run's journal unreadable here (``CorruptCall``, like a damaged
checkpoint); the caller shows that, and ``safepoint verify`` names the entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from safepoint.errors import NotFound
from safepoint.model import ParentRef
from safepoint.records import Recorded
from safepoint.store import Store

OWN, OPEN, PARENT = "own", "open", "parent"
_ANCESTORS = 16  # forks of forks followed at most this far (a copied parent column cannot loop us)


@dataclass(frozen=True, slots=True)
class ShownCall:
    """One entry as a step shows it: ``whose`` is ``own`` (its checkpoint covers it), ``open``
    (recorded after the latest checkpoint) or ``parent`` (a fork's parent's, ``entry.run_id``)."""

    entry: Recorded
    whose: str

    @property
    def usage_text(self) -> str:
        usage = self.entry.usage
        if usage is None:
            return "-"
        return f"{usage.tokens_in} in, {usage.tokens_out} out, spend {usage.spend:g}"

    @property
    def recorded_text(self) -> str:
        """When the entry reached its state (its result, else its intent), to the second, UTC."""
        moment = self.entry.done_at or self.entry.created_at
        return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")

    @property
    def whose_text(self) -> str:
        return {OWN: "this step", OPEN: "after it (open step)"}.get(self.whose, "parent run")

    def as_json(self, *, with_result: bool) -> dict[str, Any]:
        """The entry as JSON data; its result only where the command prints values."""
        entry, usage = self.entry, self.entry.usage
        data: dict[str, Any] = {
            "run_id": entry.run_id,
            "step": entry.step,
            "key": entry.key,
            "state": entry.state,
            "whose": self.whose,
            "created_at": None if entry.created_at is None else entry.created_at.isoformat(),
            "done_at": None if entry.done_at is None else entry.done_at.isoformat(),
            "usage": None
            if usage is None
            else {"tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out, "spend": usage.spend},
            "redacted": entry.redacted,
        }
        if with_result:
            data["result"] = entry.result
        return data


def step_calls(
    store: Store, run_id: str, step: int, *, head_step: int, parent: ParentRef | None
) -> list[ShownCall]:
    """The calls step ``step`` of the run shows (``head_step``, ``parent``: the run's, from ``store.run``)."""
    calls = [ShownCall(entry, OWN) for entry in store.recorded_calls(run_id, step=step)]
    if step == head_step:
        calls += [ShownCall(entry, OPEN) for entry in store.recorded_calls(run_id, step=step + 1)]
    if parent is not None and step == parent.step:
        calls = inherited(store, parent) + calls
    return calls


def history_calls(
    store: Store, run_id: str, steps: Sequence[int], *, head_step: int, parent: ParentRef | None
) -> dict[int, list[ShownCall]]:
    """The calls each of ``steps`` (the run's history, oldest first) shows, from one read of its journal."""
    shown: dict[int, list[ShownCall]] = {step: [] for step in steps}
    if not steps:
        return shown
    for entry in store.recorded_calls(run_id):
        if entry.step in shown:
            shown[entry.step].append(ShownCall(entry, OWN))
        elif entry.step == head_step + 1 and head_step in shown:
            shown[head_step].append(ShownCall(entry, OPEN))
    if parent is not None:  # at the fork step (or the first kept, if retention pruned it)
        first = parent.step if parent.step in shown else steps[0]
        shown[first] = inherited(store, parent) + shown[first]
    return shown


def inherited(store: Store, parent: ParentRef) -> list[ShownCall]:
    """A fork's parent's entries up to the fork step (ancestors' before them), oldest first."""
    found: list[ShownCall] = []
    ref: ParentRef | None = parent
    seen: set[str] = set()
    for _ in range(_ANCESTORS):
        if ref is None or ref.run_id in seen:
            break
        seen.add(ref.run_id)
        try:
            entries = store.recorded_calls(ref.run_id)
            above = store.run(ref.run_id).parent
        except NotFound:  # the parent was deleted: nothing of it to show
            break
        found = [ShownCall(entry, PARENT) for entry in entries if entry.step <= ref.step] + found
        ref = None if above is None else ParentRef(above.run_id, min(above.step, ref.step))
    return found
