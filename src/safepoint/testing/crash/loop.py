"""The crash loop: kill a run of the scripted agent again and again, on any store URL.

For backends and the store itself rather than for your agent (that is
``runner.crash_test``). Three ways to kill a child (``scripted_agent`` run with
``python -m``), each a real ``SIGKILL`` that no Python code can catch:

* at a step boundary — ``kill_at_boundary``: the child blocks on stdin right
  after saving the step, so the parent kills it exactly there;
* inside a save — ``kill_in_save``: the child's store ``trace`` kills the
  child itself at a chosen SQL statement of a chosen save, before its COMMIT;
* at a wall-clock instant — ``kill_after``: the parent waits for some saves,
  sleeps, and kills, wherever the child happens to be.

``crash_loop`` combines them: it kills a run at random again and again,
resumes it in a fresh process each time until it is done, and checks after
every kill what DESIGN promises (atomic, durable, ordered, verified). Failed
checks raise ``CrashCheckFailed`` (an ``AssertionError``) saying what broke.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from safepoint.crashrig.process import CrashCheckFailed, Outcome, kill_after, kill_in_save, resume
from safepoint.crashrig.statements import STATEMENTS_PER_SAVE
from safepoint.errors import NotFound
from safepoint.model import Checkpoint
from safepoint.store import open_store


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """Which scripted-agent run a child process works on (see ``scripted_agent.run_agent``)."""

    store_url: str
    run_id: str
    total_steps: int = 60
    seed: int = 0
    documents: int = 20
    journal: Path | None = None

    def command(self, *extra: str) -> list[str]:
        cmd = [sys.executable, "-m", "safepoint.testing.crash.scripted_agent", "--store", self.store_url]
        cmd += ["--run-id", self.run_id, "--total-steps", str(self.total_steps)]
        cmd += ["--seed", str(self.seed), "--documents", str(self.documents)]
        if self.journal is not None:
            cmd += ["--journal", str(self.journal)]
        return cmd + list(extra)


def load_head(store_url: str, run_id: str) -> Checkpoint | None:
    """The run's latest checkpoint, loaded (and verified) by a fresh connection; None if absent."""
    with open_store(store_url) as store:
        try:
            return store.load(run_id)
        except NotFound:
            return None


def verify_history(store_url: str, run_id: str, check: Callable[[Checkpoint], None] | None = None) -> int:
    """Load and verify every checkpoint of the run, and its recorded calls; steps must be
    0..head, each once. A damaged checkpoint, call (``CorruptCall``) or count propagates."""
    with open_store(store_url) as store:
        steps = [info.step for info in store.history(run_id)]
        if steps != list(range(len(steps))):
            raise CrashCheckFailed(f"run {run_id!r} has steps {steps}, not 0..{len(steps) - 1}")
        for step in steps:
            cp = store.load(run_id, step)  # CorruptCheckpoint propagates: never acceptable
            if check is not None:
                check(cp)
        for damaged in store.verify_calls(run_id).damaged if steps else []:
            raise damaged  # the first: a crash never leaves a torn entry
        return len(steps)


@dataclass(frozen=True, slots=True)
class Spawn:
    """One child of a crash loop: the head when it started and when it ended (-1: none)."""

    pid: int
    head_before: int
    head_after: int


def read_journal(path: Path, run_id: str) -> list[tuple[int, int]]:
    """``(pid, step)`` for each step start the agent journaled for ``run_id``, in order."""
    entries = []
    for line in path.read_text().splitlines():
        pid, rid, step = line.split("\t")
        if rid == run_id:
            entries.append((int(pid), int(step)))
    return entries


def check_journal(entries: Sequence[tuple[int, int]], spawns: Sequence[Spawn]) -> None:
    """Each child executed exactly the steps after the head it resumed from, in order,
    and at most one step past the head it left behind (the one it was saving)."""
    for spawn in spawns:
        steps = [step for pid, step in entries if pid == spawn.pid]
        expected = list(range(spawn.head_before + 1, spawn.head_before + 1 + len(steps)))
        if steps != expected:
            raise CrashCheckFailed(
                f"pid {spawn.pid} resumed at head {spawn.head_before} but executed steps {steps}"
            )
        if steps and steps[-1] > spawn.head_after + 1:
            raise CrashCheckFailed(
                f"pid {spawn.pid} executed up to step {steps[-1]} but left head {spawn.head_after}"
            )


@dataclass(slots=True)
class LoopReport:
    """What a ``crash_loop`` did and checked."""

    kills: dict[str, int] = field(default_factory=lambda: {"statement": 0, "clock": 0})
    resumes: int = 0
    heads_checked: int = 0
    verified: int = 0
    # Where the clock kills landed (seen from the journal and the store):
    # mid_step — a step had started and was lost (it runs again on resume);
    # in_commit — the step committed but the child never reported it: SIGKILL
    #   waits for an fsync in progress, so a kill during COMMIT lands here;
    # between — after a reported save, or before the first step;
    # at_guard — on the guard's pause, a step boundary.
    clock_landed: dict[str, int] = field(
        default_factory=lambda: {"mid_step": 0, "in_commit": 0, "between": 0, "at_guard": 0}
    )
    spawns: list[Spawn] = field(default_factory=list)
    final: Checkpoint | None = None


def crash_loop(
    spec: AgentSpec,
    rng: random.Random,
    kills: int,
    *,
    check: Callable[[Checkpoint], None] | None = None,
) -> LoopReport:
    """Kill the run ``kills`` times at random (inside saves, or at wall-clock instants),
    resuming it in a fresh process after each kill, then run it to the end.

    After every kill the store alone must give a verified head that never
    went backwards, holds every step a child reported saved and, for a kill
    inside a save, is exactly the step before the one being saved. ``check``
    sees each head loaded (e.g. to compare it with an uninterrupted run) and,
    at the end, every checkpoint of the run, each loaded and verified. With a
    journal, each child must have executed only steps past the head it
    resumed from (``check_journal``).
    """
    report, head, last = LoopReport(), -1, spec.total_steps - 1
    clock_kills: dict[int, Outcome] = {}  # by pid
    for kills_left in range(kills, 0, -1):
        before = head
        # Each kill may advance the run by at most ``budget`` steps, so that
        # every planned kill still has a step left to interrupt.
        budget = (last - head - 1) // kills_left
        if budget < 1:
            raise ValueError(f"{kills} kills need more than {spec.total_steps} steps")
        expect_head: int | None = None
        if rng.random() < 0.5:
            mode, save = "statement", rng.randint(1, budget + 1)
            # Statements past the save's last one mean COMMIT, which is thus drawn twice as often.
            outcome = kill_in_save(spec, save, rng.randint(0, STATEMENTS_PER_SAVE))
            expect_head = head + save - 1
        else:
            # Mostly a few milliseconds (a step or two) after a save the child
            # reported, so the kill tends to land inside a step; sometimes
            # anywhere from spawn on (imports, opening the store, loading).
            mode, saves = "clock", 0 if rng.random() < 0.1 else rng.randint(1, max(1, budget - 1))
            delay = rng.uniform(0, 0.25) if saves == 0 else rng.uniform(0, 0.0025)
            outcome = kill_after(spec, saves, delay, guard=head + budget)
        if not outcome.killed:
            raise CrashCheckFailed(f"pid {outcome.pid} ({mode} kill) exited before it was killed")
        report.kills[mode] += 1
        if mode == "clock":
            clock_kills[outcome.pid] = outcome
        head = _check_head(spec, head, outcome, expect_head, check)
        report.heads_checked += 1
        report.spawns.append(Spawn(outcome.pid, before, head))
    final = resume(spec)
    report.resumes = kills
    report.final = load_head(spec.store_url, spec.run_id)
    if report.final is None or report.final.step != last:
        raise CrashCheckFailed(f"pid {final.pid} exited but the run did not reach step {last}")
    report.spawns.append(Spawn(final.pid, head, last))
    report.verified = verify_history(spec.store_url, spec.run_id, check)
    if spec.journal is not None:
        entries = read_journal(spec.journal, spec.run_id)
        check_journal(entries, report.spawns)
        for spawn in report.spawns:
            if spawn.pid in clock_kills:
                report.clock_landed[_landed(spawn, clock_kills[spawn.pid], entries)] += 1
    return report


def _landed(spawn: Spawn, outcome: Outcome, entries: Sequence[tuple[int, int]]) -> str:
    started = [step for pid, step in entries if pid == spawn.pid]
    if outcome.paused:
        return "at_guard"
    if started and started[-1] > spawn.head_after:
        return "mid_step"
    if spawn.head_after > spawn.head_before and spawn.head_after not in outcome.saved:
        return "in_commit"
    return "between"


def _check_head(
    spec: AgentSpec,
    head: int,
    outcome: Outcome,
    expect: int | None,
    check: Callable[[Checkpoint], None] | None,
) -> int:
    cp = load_head(spec.store_url, spec.run_id)
    new = -1 if cp is None else cp.step
    saved = max(outcome.saved, default=-1)
    if new < head:
        raise CrashCheckFailed(f"head went back from {head} to {new} after killing pid {outcome.pid}")
    if new < saved:
        raise CrashCheckFailed(f"pid {outcome.pid} reported step {saved} saved, but the head is {new}")
    if expect is not None and new != expect:
        raise CrashCheckFailed(f"killed inside the save of step {expect + 1}; head is {new}, not {expect}")
    if cp is not None and check is not None:
        check(cp)
    return new
