"""The crash-test kit: SIGKILL your agent at every step boundary and at random instants, resume it
in fresh processes, and check it ends exactly like a run that was never interrupted.

Give it an importable entry point — a function ``(store, run_id, ledger, **kwargs)`` that runs
(or resumes) an agent to its end with ``safepoint.Run`` and returns its answer (JSON) — and it:

1. runs the agent once, uninterrupted, in a child process: the reference;
2. in a fresh store, kills a child after each step boundary in turn (``boundaries``), each time
   resuming in a new process; and kills children at random instants (``random_kills``): inside a
   save (at a random SQL statement, before its COMMIT), right after a side effect, or at a
   wall-clock instant;
3. after every kill checks that the store holds a verified head that never went back and keeps
   every step a child reported saved; at the end, that the run finished with the reference's
   answer, messages, counters, cursors and state, that every checkpoint verifies, and that every
   side effect took place exactly once (``Ledger``), with the reference's effects.

    from safepoint.testing.kit import crash_test

    def test_my_agent_survives_crashes(tmp_path):
        crash_test("mypackage.agent:run_agent", tmp_path, random_kills=20)

A failed check raises ``CrashCheckFailed`` (an ``AssertionError``) naming the kill that broke it
and the seed that replays it. See docs/crash-testing.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from safepoint.errors import NotFound
from safepoint.model import Checkpoint
from safepoint.store import open_store

from .crashkit import (
    STATEMENTS_PER_SAVE,
    CrashCheckFailed,
    Outcome,
    kill_after,
    kill_at_boundary,
    kill_in_save,
    resume,
)
from .kitchild import EntrySpec, kill_after_effect
from .ledger import DuplicateEffect, Ledger

__all__ = [
    "COMPARED",
    "CrashCheckFailed",
    "CrashKit",
    "CrashReport",
    "Ending",
    "EntrySpec",
    "Ledger",
    "crash_test",
    "kill_after_effect",
]

COMPARED = ("step", "status", "messages", "counters", "cursors", "state", "labels")


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


class CrashKit:
    """Crash tests for one agent entry point; each scenario has its own store and ledger in ``workdir``."""

    def __init__(
        self,
        entry: str,
        workdir: str | Path,
        *,
        store_options: str | None = None,
        kwargs: dict[str, Any] | None = None,
        run_id: str = "crash-test",
        seed: int | None = None,
        check: Callable[[Checkpoint], None] | None = None,
    ) -> None:
        self.entry, self.workdir = entry, Path(workdir)
        self.check = check  # your own invariant: sees every head after a kill, and every final checkpoint
        self.store_options, self.run_id = store_options, run_id
        self.kwargs = json.dumps(kwargs or {}, sort_keys=True)
        self.seed = time.time_ns() % 1_000_000_007 if seed is None else seed
        self.report = CrashReport(self.seed)
        self._scenarios = 0

    def spec(self, name: str) -> EntrySpec:
        """A fresh store and ledger for one scenario."""
        self._scenarios += 1
        where = self.workdir / f"{self._scenarios:03d}-{name}"
        where.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{where / 'state.db'}"
        return EntrySpec(self.entry, url, where / "ledger.db", self.run_id, self.store_options, self.kwargs)

    # -- what the store and ledger say --------------------------------------------

    def _head(self, spec: EntrySpec) -> Checkpoint | None:
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

    def reference(self) -> Ending:
        """The uninterrupted run (run once, in a child process, then remembered)."""
        if self.report.reference is None:
            spec = self.spec("reference")
            self.report.reference = self.ending(spec, resume(spec).result)
        return self.report.reference

    def _finish(self, spec: EntrySpec, what: str) -> None:
        """Resume in a fresh process until the agent returns; compare with the reference."""
        reference = self.reference()
        outcome = resume(spec)
        self.report.resumes += 1
        try:
            ending = self.ending(spec, outcome.result)
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

    def _check_head(
        self, spec: EntrySpec, head: int, outcome: Outcome, what: str, *, low: int, high: int
    ) -> int:
        cp = self._head(spec)
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

    # -- scenarios ---------------------------------------------------------------------

    def boundaries(self, steps: Iterable[int] | None = None) -> CrashReport:
        """One run, killed right after saving each of ``steps`` in turn (default: every step of
        the reference run, the last one included) and resumed in a fresh process each time."""
        started = time.monotonic()
        last = int(self.reference().snapshot["step"])
        spec, head = self.spec("boundaries"), -1
        for step in sorted(set(range(last + 1) if steps is None else steps)):
            if step <= head or step > last:
                continue
            outcome = kill_at_boundary(spec, step)
            what = f"killed after saving step {step} (pid {outcome.pid})"
            if not outcome.killed:
                raise CrashCheckFailed(
                    f"{what}: the child exited ({outcome.returncode}) instead of pausing there"
                )
            head = self._check_head(spec, head, outcome, what, low=step, high=step)
            self.report.kills["boundary"] += 1
        self._finish(spec, "after the boundary kills")
        self.report.seconds += time.monotonic() - started
        return self.report

    def at_random(self, kills: int, *, per_run: int = 10) -> CrashReport:
        """``kills`` kills at random instants, ``per_run`` per run (each run then finishes
        and is compared with the reference)."""
        started = time.monotonic()
        last = int(self.reference().snapshot["step"])
        rng = Random(self.seed)
        for number in range(0, kills, per_run):
            spec, head = self.spec(f"random-{number // per_run}"), -1
            planned = min(per_run, kills - number)
            for left in range(planned, 0, -1):
                if head >= last:
                    break
                head = self._random_kill(spec, rng, head, last, left)
            self._finish(spec, f"after random kills in {spec.store_url}")
        self.report.seconds += time.monotonic() - started
        return self.report

    def _random_kill(self, spec: EntrySpec, rng: Random, head: int, last: int, left: int) -> int:
        # The save to interrupt: spread over what is left of the run, so later steps get kills too.
        target = head + rng.randint(1, max(1, (last - head) // left))
        mode = rng.choice(("statement", "statement", "effect", "clock"))
        if mode == "statement":
            statement = rng.randint(0, STATEMENTS_PER_SAVE)  # past the end: the COMMIT
            outcome = kill_in_save(spec, target - head, statement)
            low = high = target - 1
        elif mode == "effect":
            outcome = kill_after_effect(spec, rng.randint(1, 2), guard=target)
            low, high = head, target
        else:  # mostly a few ms after a reported save; sometimes anywhere from spawn on
            saves, delay = (
                (0, rng.uniform(0, 0.3)) if rng.random() < 0.1 else (target - head - 1, rng.uniform(0, 0.003))
            )
            outcome = kill_after(spec, saves, delay, guard=target)
            low, high = head, target
        what = f"{mode} kill of pid {outcome.pid} aiming at step {target}"
        if outcome.kill_point:
            what += f" (at {outcome.kill_point})"
        if not outcome.killed:
            raise CrashCheckFailed(f"{what}: the child exited ({outcome.returncode}) before it was killed")
        self.report.kills[mode] += 1
        return self._check_head(spec, head, outcome, what, low=low, high=high)


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


def crash_test(
    entry: str,
    workdir: str | Path,
    *,
    boundaries: bool = True,
    random_kills: int = 20,
    per_run: int = 10,
    store_options: str | None = None,
    kwargs: dict[str, Any] | None = None,
    seed: int | None = None,
    check: Callable[[Checkpoint], None] | None = None,
) -> CrashReport:
    """Crash-test ``entry`` (see the module docstring); returns the report, raises
    ``CrashCheckFailed`` on the first broken promise. ``check`` is your own invariant,
    called with every head after a kill and every checkpoint of each finished run."""
    kit = CrashKit(entry, workdir, store_options=store_options, kwargs=kwargs, seed=seed, check=check)
    if boundaries:
        kit.boundaries()
    if random_kills:
        kit.at_random(random_kills, per_run=per_run)
    return kit.report


try:  # a fixture for pytest users; the kit itself does not need pytest
    import pytest
except ImportError:  # pragma: no cover
    pass
else:

    @pytest.fixture
    def crash_kit(tmp_path: Path) -> Callable[..., CrashReport]:
        """``crash_kit("pkg.mod:run_agent", **options)``: ``crash_test`` in this test's tmp_path.
        Enable with ``pytest_plugins = ["safepoint.testing.kit"]`` in a conftest.py."""

        def run(entry: str, **options: Any) -> CrashReport:
            return crash_test(entry, tmp_path / "crash-kit", **options)

        return run
