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

    from safepoint.testing.crash import crash_test

    def test_my_agent_survives_crashes(tmp_path):
        crash_test("mypackage.agent:run_agent", tmp_path, random_kills=20)

A failed check raises ``CrashCheckFailed`` (an ``AssertionError``) naming the kill that broke it
and the seed that replays it. See docs/crash-testing.md. This module decides where
to kill; ``checks.py`` judges what each kill left behind.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from random import Random
from typing import Any

from safepoint.crashrig.child import EntrySpec
from safepoint.crashrig.process import (
    CrashCheckFailed,
    kill_after,
    kill_after_effect,
    kill_at_boundary,
    kill_in_save,
    resume,
)
from safepoint.crashrig.statements import STATEMENTS_PER_SAVE
from safepoint.model import Checkpoint

from .checks import CrashChecks, CrashReport, Ending


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
        self.store_options, self.run_id = store_options, run_id
        self.kwargs = json.dumps(kwargs or {}, sort_keys=True)
        self.seed = time.time_ns() % 1_000_000_007 if seed is None else seed
        self.report = CrashReport(self.seed)
        self.checks = CrashChecks(self.report, check)
        self._scenarios = 0

    @property
    def check(self) -> Callable[[Checkpoint], None] | None:
        """Your own invariant: sees every head after a kill, and every final checkpoint."""
        return self.checks.check

    @check.setter
    def check(self, check: Callable[[Checkpoint], None] | None) -> None:
        self.checks.check = check

    def spec(self, name: str) -> EntrySpec:
        """A fresh store and ledger for one scenario."""
        self._scenarios += 1
        where = self.workdir / f"{self._scenarios:03d}-{name}"
        where.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{where / 'state.db'}"
        return EntrySpec(self.entry, url, where / "ledger.db", self.run_id, self.store_options, self.kwargs)

    def ending(self, spec: EntrySpec, result: str | None) -> Ending:
        """The run's end as the store and the ledger hold it; every checkpoint is loaded and verified."""
        return self.checks.ending(spec, result)

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
        self.checks.compare(spec, outcome.result, reference, what)

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
            head = self.checks.head(spec, head, outcome, what, low=step, high=step)
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
        return self.checks.head(spec, head, outcome, what, low=low, high=high)


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
