"""What the crash-test kit checks, after every kill and at the end of every run.

After a kill (``CrashChecks.head``): the store holds a verified head that never
went back, keeps every step a child reported saved and lies where the kill
aimed; no side effect took place twice; and the user's ``check`` holds. At the
end of a run (``CrashChecks.ending`` and ``CrashChecks.compare``): every
checkpoint loads and verifies, and the final fields (``COMPARED``), the
answer and the side effects equal the uninterrupted run's.

Messages name fields, indexes and keys, never stored values, and carry the
seed that replays the failure. The runner (``runner.py``) decides where to
kill; this module only judges what a kill left behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from safepoint.crashrig.child import EntrySpec
from safepoint.crashrig.ledger import DuplicateEffect, Ledger
from safepoint.crashrig.process import CrashCheckFailed, Outcome
from safepoint.errors import NotFound
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.store import open_store

# Every value field is compared but the pending action: how a killed action was
# settled may differ from the uninterrupted run, and compare() looks at it apart.
COMPARED = (
    "step",
    "status",
    "messages",
    "counters",
    *(name for name in VALUE_FIELDS if name != "pending_action"),
    "labels",
)


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended: its final checkpoint (the compared fields), answer and side effects."""

    snapshot: dict[str, Any]
    result: Any
    effects: dict[str, Any]


@dataclass(slots=True)
class CrashReport:
    """What the kit did and checked."""

    seed: int
    kills: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("boundary", "statement", "effect", "clock"), 0)
    )
    resumes: int = 0
    heads_checked: int = 0
    checkpoints_verified: int = 0
    effects_checked: int = 0
    seconds: float = 0.0
    reference: Ending | None = None

    def __str__(self) -> str:
        return (
            f"{sum(self.kills.values())} kills {self.kills}, {self.resumes} resumes, "
            f"{self.heads_checked} heads and {self.checkpoints_verified} checkpoints verified, "
            f"{self.effects_checked} effects exactly once (seed {self.seed}, {self.seconds:.1f} s)"
        )


class CrashChecks:
    """The kit's checks for one agent: they count into ``report`` and raise ``CrashCheckFailed``."""

    def __init__(self, report: CrashReport, check: Callable[[Checkpoint], None] | None) -> None:
        self.report = report
        self.check = check  # your own invariant: sees every head after a kill, and every final checkpoint

    @property
    def seed(self) -> int:
        return self.report.seed

    def _load_head(self, spec: EntrySpec) -> Checkpoint | None:
        with open_store(spec.store_url, **spec.open_store_options()) as store:
            try:
                return store.load(spec.run_id)
            except NotFound:
                return None

    def ending(self, spec: EntrySpec, result: str | None) -> Ending:
        """The run's end as the store and the ledger hold it; every checkpoint is loaded and verified."""
        with open_store(spec.store_url, **spec.open_store_options()) as store:
            steps = [info.step for info in store.history(spec.run_id)]
            if steps != list(range(len(steps))):
                raise CrashCheckFailed(f"run {spec.run_id!r} has steps {steps[:50]}, not 0..{len(steps) - 1}")
            for step in steps:
                final = store.load(spec.run_id, step)  # CorruptCheckpoint propagates: never acceptable
                if self.check is not None:
                    self.check(final)
        self.report.checkpoints_verified += len(steps)
        with Ledger(spec.ledger) as ledger:
            self.report.effects_checked += ledger.check_exactly_once()
            effects = ledger.effects()
        data = final.to_dict()
        snapshot = {key: data[key] for key in (*COMPARED, "pending_action")}
        return Ending(snapshot, None if result is None else json.loads(result), effects)

    def compare(self, spec: EntrySpec, result: str | None, reference: Ending, what: str) -> None:
        """The finished run ``spec`` must end as ``reference`` did: fields, answer, side effects."""
        try:
            ending = self.ending(spec, result)
        except DuplicateEffect as exc:
            raise CrashCheckFailed(f"{what}: {exc} (seed {self.seed})") from None
        status, pending = ending.snapshot["status"], ending.snapshot["pending_action"]
        if status == "waiting" != reference.snapshot["status"] and pending is not None:
            raise CrashCheckFailed(
                f"{what}: the resumed run stopped waiting for a human about its interrupted action "
                f"{pending.get('tool')!r}; give that tool a reconcile hook (seed {self.seed})"
            )
        for key in COMPARED:
            if ending.snapshot[key] != reference.snapshot[key]:
                raise CrashCheckFailed(
                    f"{what}: the final {key} differs from the uninterrupted run's"
                    f"{_where(ending, reference, key)} (seed {self.seed})"
                )
        if ending.result != reference.result:
            raise CrashCheckFailed(f"{what}: the agent returned another answer than the uninterrupted run")
        if ending.effects != reference.effects:
            missing = sorted(set(reference.effects) - set(ending.effects))
            extra = sorted(set(ending.effects) - set(reference.effects))
            raise CrashCheckFailed(
                f"{what}: side effects differ from the uninterrupted run's ({len(missing)} missing, "
                f"{len(extra)} extra, {len(ending.effects)} in all) (seed {self.seed})"
            )

    def head(self, spec: EntrySpec, head: int, outcome: Outcome, what: str, *, low: int, high: int) -> int:
        """After a kill: the new head (returned) is verified, in ``low..high``, not behind ``head``
        nor behind what the child reported saved; no side effect took place twice."""
        cp = self._load_head(spec)
        new = -1 if cp is None else cp.step
        saved = max(outcome.saved, default=-1)
        if new < head:
            raise CrashCheckFailed(f"{what}: the head went back from step {head} to {new} (seed {self.seed})")
        if new < saved:
            raise CrashCheckFailed(f"{what}: step {saved} was reported saved, but the head is {new}")
        if not low <= new <= high:
            raise CrashCheckFailed(
                f"{what}: the head is step {new}, expected {low}..{high} (seed {self.seed})"
            )
        if cp is not None and self.check is not None:
            self.check(cp)
        with Ledger(spec.ledger) as ledger:
            try:
                ledger.check_exactly_once()
            except DuplicateEffect as exc:
                raise CrashCheckFailed(f"{what}: {exc} (seed {self.seed})") from None
        self.report.heads_checked += 1
        return new


def _where(ending: Ending, reference: Ending, key: str) -> str:
    """Where two compared fields first differ (an index or a key name — never a value)."""
    got, want = ending.snapshot[key], reference.snapshot[key]
    if isinstance(got, list) and isinstance(want, list):
        index = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want))
        )
        return f" from index {index} ({len(got)} vs {len(want)} items)"
    if isinstance(got, dict) and isinstance(want, dict):
        keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        return f" at keys {keys[:10]}"
    return ""
