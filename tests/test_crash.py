"""Crash tests: real child processes, real SIGKILL, a real SQLite file, fresh resumes.

Every run is compared with an uninterrupted run of the same scripted agent on
a ``memory://`` store: after any number of kills and resumes it must end with
exactly the same checkpoints, step for step. Randomness comes from one seed,
printed by each test; ``SAFEPOINT_CRASH_SEED=<seed>`` replays it.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint
from safepoint.testing.crash import (
    STATEMENTS_PER_SAVE,
    AgentSpec,
    Spawn,
    check_journal,
    crash_loop,
    kill_at_boundary,
    kill_in_save,
    load_head,
    read_journal,
    resume,
    verify_history,
)
from safepoint.testing.crash.scripted_agent import run_agent

pytestmark = pytest.mark.crash

TOTAL_STEPS = 60
RANDOM_RUNS = 20
KILLS_PER_RUN = 10
BASE_SEED = int(os.environ.get("SAFEPOINT_CRASH_SEED") or time.time_ns() % 1_000_000_007)
COMPARED = ("step", "status", "messages", "counters", "cursors", "state", "labels")


def snapshot(cp: Checkpoint) -> dict[str, Any]:
    """What must be identical to the uninterrupted run (not timestamps or digests)."""
    data = cp.to_dict()
    return {key: data[key] for key in COMPARED}


@functools.cache
def reference(seed: int) -> tuple[dict[str, Any], ...]:
    """Every checkpoint of an uninterrupted run with ``seed``, by step."""
    steps: list[dict[str, Any]] = []
    with safepoint.open_store("memory://") as store:
        run_agent(
            store, "run", total_steps=TOTAL_STEPS, seed=seed, on_step=lambda cp: steps.append(snapshot(cp))
        )
    return tuple(steps)


def matches_reference(seed: int) -> Any:
    def check(cp: Checkpoint) -> None:
        assert snapshot(cp) == reference(seed)[cp.step], f"step {cp.step} differs from the uninterrupted run"

    return check


def make_spec(tmp_path: Path, seed: int) -> AgentSpec:
    return AgentSpec(
        store_url=f"sqlite:///{tmp_path / 'state.db'}",
        run_id="run",
        total_steps=TOTAL_STEPS,
        seed=seed,
        journal=tmp_path / "journal.tsv",
    )


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    yield counts
    print(f"\ncrash suite totals (seed {BASE_SEED}): {dict(counts)}")


def finish_and_verify(spec: AgentSpec, spawns: list[Spawn], tally: Counter[str]) -> int:
    """Resume in a fresh process until done; check the end state, history and journal."""
    head = spawns[-1].head_after
    final = resume(spec)
    assert final.returncode == 0
    assert final.answer == reference(spec.seed)[-1]["state"]["answer"]
    cp = load_head(spec.store_url, spec.run_id)
    assert cp is not None
    assert cp.status is safepoint.Status.DONE
    assert snapshot(cp) == reference(spec.seed)[-1]
    verified = verify_history(spec.store_url, spec.run_id, matches_reference(spec.seed))
    assert verified == TOTAL_STEPS
    spawns.append(Spawn(final.pid, head, cp.step))
    check_journal(read_journal(spec.journal or Path(), spec.run_id), spawns)
    tally.update(resumes=1, verified=verified)
    return verified


@pytest.mark.parametrize("step", [0, 1, 5, 20, 40, 59])
def test_kill_at_step_boundary(tmp_path: Path, step: int, tally: Counter[str]) -> None:
    """A child SIGKILLed right after saving step N resumes from N and ends as if never killed."""
    spec = make_spec(tmp_path, seed=step)
    killed = kill_at_boundary(spec, step)
    assert killed.killed
    assert killed.saved == list(range(step + 1))
    head = load_head(spec.store_url, spec.run_id)
    assert head is not None
    assert head.step == step
    matches_reference(spec.seed)(head)
    tally.update(kills=1, boundary_kills=1)
    verified = finish_and_verify(spec, [Spawn(killed.pid, -1, step)], tally)
    print(f"boundary kill at step {step}: 1 kill, 1 resume, {verified} checkpoints verified")


@pytest.mark.parametrize("statement", [*range(STATEMENTS_PER_SAVE), 99])
@pytest.mark.parametrize("save", [1, 4])
def test_kill_inside_save_at_every_statement(
    tmp_path: Path, save: int, statement: int, tally: Counter[str]
) -> None:
    """A kill at any statement of a save, COMMIT included, leaves exactly the previous step."""
    spec = make_spec(tmp_path, seed=100 + save)
    killed = kill_in_save(spec, save, statement)
    assert killed.killed
    assert killed.kill_point is not None
    if statement == 99:  # past the save's last statement: the kill lands on its COMMIT
        assert killed.kill_point.startswith(f"{save}:")
        assert killed.kill_point.endswith(" COMMIT")
    else:
        assert killed.kill_point.startswith(f"{save}:{statement} ")
    head = load_head(spec.store_url, spec.run_id)
    if save == 1:
        assert head is None  # the run's first save never committed: it does not exist
    else:
        assert head is not None
        assert head.step == save - 2
        matches_reference(spec.seed)(head)
        with safepoint.open_store(spec.store_url) as store, pytest.raises(safepoint.NotFound):
            store.load(spec.run_id, save - 1)
    tally.update(kills=1, statement_kills=1)
    verified = finish_and_verify(spec, [Spawn(killed.pid, -1, save - 2)], tally)
    print(f"kill at {killed.kill_point}: 1 kill, 1 resume, {verified} checkpoints verified")


@pytest.mark.parametrize("run", range(RANDOM_RUNS))
def test_random_kills_then_resume(tmp_path: Path, run: int, tally: Counter[str]) -> None:
    """Ten random SIGKILLs (inside saves or at wall-clock instants) lose and repeat no work."""
    print(f"\nSAFEPOINT_CRASH_SEED={BASE_SEED} run {run}")
    rng = random.Random(f"{BASE_SEED}:{run}")
    spec = make_spec(tmp_path, seed=run)
    report = crash_loop(spec, rng, KILLS_PER_RUN, check=matches_reference(spec.seed))
    assert report.final is not None
    assert report.final.status is safepoint.Status.DONE
    assert snapshot(report.final) == reference(spec.seed)[-1]
    assert report.verified == TOTAL_STEPS
    kills = sum(report.kills.values())
    assert kills == KILLS_PER_RUN
    tally.update(
        kills=kills,
        statement_kills=report.kills["statement"],
        clock_kills=report.kills["clock"],
        **{f"clock_{where}": n for where, n in report.clock_landed.items()},
        resumes=report.resumes,
        heads_checked=report.heads_checked,
        verified=report.verified,
    )
    print(
        f"{kills} kills ({report.kills}, clock kills landed {report.clock_landed}), "
        f"{report.resumes} resumes, "
        f"{report.heads_checked} heads checked, {report.verified} checkpoints verified, "
        f"heads after kills {[s.head_after for s in report.spawns]}"
    )
