"""Poison runs are quarantined; everything else is done; no worker process dies of one run.

Worker processes drive ``Run`` (tests/helpers/run_worker.py) over 1,000 runs
on SQLite, 3 of them poison: one corrupt (a stored row altered, its digest
fails: quarantined on its first attempt), one whose handler always raises,
one unloadable (its migration raises). Then, in-process: SchemaTooNew met on
load is held back without using an attempt, retry_at holds a run back,
``requeue`` brings a quarantined run back, and a quarantined run never comes
back active from ``Run.open``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import safepoint
import safepoint.observe
from safepoint import Checkpoint, Job, Run, Status, Worker
from safepoint.store.sqlite.driver import SQLiteDriver

HELPER = Path(__file__).parent / "helpers" / "run_worker.py"
pytestmark = pytest.mark.crash
RUNS, STEPS, WORKERS, MAX_ATTEMPTS = 1000, 3, 4, 3


def corrupt(store: safepoint.Store, run_id: str) -> None:
    """Alter the stored header of the run's step 0, as a bad disk would."""
    driver = store.driver
    assert isinstance(driver, SQLiteDriver)
    ((ref,),) = driver.execute_raw("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))
    driver.execute_raw(
        "UPDATE safepoint_checkpoints"
        " SET header = CAST(replace(CAST(header AS TEXT), 'seed', 'weed') AS BLOB) WHERE id = ?",
        (ref * 2**32,),
    )


def test_three_poison_runs_among_a_thousand_are_quarantined_with_their_reasons(tmp_path: Path) -> None:
    """997 runs done once each; corrupt, raising and unloadable runs quarantined with reasons; 0 exits."""
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    poison = {"run-0100": "corrupt", "run-0500": "raises", "run-0900": "unloadable"}
    with safepoint.open_store(url) as store:
        for i in range(RUNS):
            run_id = f"run-{i:04d}"
            state: dict[str, object] = {"seed": i}
            if poison.get(run_id) == "raises":
                state["poison"] = True
            if poison.get(run_id) == "unloadable":
                state["unmigratable"] = True
            store.save(Checkpoint(run_id=run_id, state=state))
            store.enqueue(run_id)
        corrupt(store, "run-0100")
    ledger = tmp_path / "ledger.tsv"
    env = {**os.environ, "SAFEPOINT_TEST_MIGRATE": "1"}
    workers = [
        subprocess.Popen(
            [sys.executable, str(HELPER), url, str(ledger), f"w{n}", str(STEPS), "5", str(MAX_ATTEMPTS)],
            stderr=subprocess.DEVNULL,
            env=env,
        )
        for n in range(WORKERS)
    ]
    codes = [w.wait(timeout=240) for w in workers]
    lines = ledger.read_text(encoding="utf-8").splitlines()
    done = Counter(line.split("\t")[1] for line in lines if line.startswith("done\t"))
    with safepoint.open_store(url) as store:
        infos = {info.run_id: info for info in store.runs(limit=RUNS)}
    statuses = Counter(info.status for info in infos.values())
    print(f"statuses {dict(statuses)}, done {len(done)}, exits {codes}")
    assert codes == [0] * WORKERS  # every worker ran to idle and exited on its own
    assert statuses == {Status.DONE: RUNS - 3, Status.FAILED: 3}
    assert len(done) == RUNS - 3
    assert max(done.values()) == 1
    reasons = {"corrupt": "CorruptCheckpoint", "raises": "RuntimeError", "unloadable": "MigrationError"}
    for run_id, kind in poison.items():
        info = infos[run_id]
        assert info.status is Status.FAILED
        # A damaged row reads the same on every attempt: quarantined on its first.
        assert info.attempts == (1 if kind == "corrupt" else MAX_ATTEMPTS)
        assert info.last_error is not None
        assert info.last_error.startswith(reasons[kind])
        assert "seed" not in info.last_error  # the error's own words, never a stored value


def handled(store: safepoint.Store, handler: object, **options: object) -> Worker:
    worker = Worker(store, handler, lease=5, poll=0.01, backoff=0.05, **options)  # type: ignore[arg-type]
    worker.run(stop_when_idle=True)
    return worker


def test_schema_too_new_met_on_load_is_held_back_without_using_an_attempt(tmp_path: Path) -> None:
    """A head whose header is newer than its column says: claimed once, held back uncounted, no spin."""
    counted: list[str] = []

    class Counting(safepoint.observe.NoObserver):
        def add(self, metric: str, value: float, attributes: object) -> None:
            counted.append(metric)

    url = f"sqlite:///{tmp_path / 'q.db'}"
    with safepoint.open_store(url, schema_version=7) as newer:
        newer.save(Checkpoint(run_id="newer", schema_version=7))
        newer.enqueue("newer")
        # The claim reads the row's schema_version column; the load, the header the
        # digest covers. A column edited down is the one way they can disagree.
        driver = newer.driver
        assert isinstance(driver, SQLiteDriver)
        driver.execute_raw("UPDATE safepoint_checkpoints SET schema_version = 1")
    with safepoint.open_store(url, migrations=safepoint.MigrationChain(current=1)) as store:
        store.observer = Counting()
        worker = Worker(store, lambda job: Status.DONE, lease=5, poll=0.01)
        assert worker.run(stop_when_idle=True) == 1  # held back past one lease: the drain stops
        info = store.run("newer")
        assert info.status is Status.RUNNING
        assert info.attempts == 0
        assert info.head_step == 0
        assert str(info.last_error).startswith("SchemaTooNew: ")
        assert counted.count("safepoint.runs.too_new") == 1
        assert store.queue_state("newer").queued
        assert store.claim("someone", lease=5) is None  # held back: not claimable yet


def test_retry_at_holds_a_failed_run_back_then_requeue_brings_a_quarantined_one_back(tmp_path: Path) -> None:
    """A failing run waits out its backoff, is quarantined at max_attempts, and requeue runs it again."""
    calls: list[float] = []

    def flaky(job: Job) -> Status | None:
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise RuntimeError(f"attempt {len(calls)} failed")
        return Status.DONE

    with safepoint.open_store(f"sqlite:///{tmp_path / 'q.db'}") as store:
        store.save(Checkpoint(run_id="flaky"))
        store.enqueue("flaky")
        handled(store, flaky, max_attempts=2)
        info = store.run("flaky")
        assert info.status is Status.FAILED
        assert info.attempts == 2
        assert info.last_error == "RuntimeError: attempt 2 failed"
        assert calls[1] - calls[0] >= 0.05  # the claim skipped the run until its retry_at
        assert store.claim("anyone", lease=5) is None  # quarantined: not in the queue
        inactive = Run.open(store, "flaky")  # the head says running; the run row's failed wins
        assert not inactive.active
        assert inactive.status is Status.FAILED
        store.requeue("flaky")
        assert store.run("flaky").attempts == 0
        handled(store, flaky, max_attempts=2)
        assert store.run("flaky").status is Status.DONE
        assert store.run("flaky").last_error is None
