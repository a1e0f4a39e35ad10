"""The operators' commands — answer, cancel, requeue, delete, budget — run as the real ``safepoint``
executable, from an empty folder, against a SQLite file and a PostgreSQL schema.

Each test seeds the store through the library (as an agent and a worker
would), runs the command, then checks through the library what it did, the
lease holder's side included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Budget, BudgetExceeded, Checkpoint, LeaseLost, Run, Status
from safepoint_exe import sp


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ops.db'}"
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        yield f"{dsn}?schema={schema}"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    empty = tmp_path / "cwd"
    empty.mkdir()
    return empty


def _claimed(store: safepoint.Store, run_id: str) -> safepoint.Lease:
    store.enqueue(run_id)
    lease = store.claim("worker-1", lease=120)
    assert lease is not None
    assert lease.run_id == run_id
    return lease


def test_answer_resumes_a_waiting_run_and_refuses_one_that_is_not(url: str, folder: Path) -> None:
    """answer VALUE saves the answer as the next step (take_input gets it); a running run is a conflict.

    A waiting run a worker released goes back in the workers' queue; one that was never claimed does not.
    """
    with safepoint.open_store(url) as store:
        Run.start(store, "ticket").wait_for_input("Refund order 42?")
        Run.start(store, "served")
        lease = _claimed(store, "served")
        Run.open(store, "served", lease=lease).wait_for_input("Which plan?")
        store.release(lease, status=Status.WAITING)  # what a Worker does when its handler returns WAITING
    served = sp(folder, "answer", "served", "pro", "--store", url, "--json")
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["queued"] is True  # workers serve it: back in their queue
    result = sp(folder, "answer", "ticket", "yes, refund it", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "run_id": "ticket",
        "step": 2,
        "status": "running",
        "queued": False,
        "fenced": False,
    }
    again = sp(folder, "answer", "ticket", "no", "--store", url)
    assert again.returncode == 6, again.stderr
    assert "only a waiting run takes an answer" in again.stderr
    with safepoint.open_store(url) as store:
        run = Run.resume(store, "ticket")
        assert run.take_input() == "yes, refund it"
        again = store.claim("worker-2")
        assert again is not None
        assert again.run_id == "served"
        assert Run.resume(store, "served", lease=again).take_input() == "pro"
    assert list(folder.iterdir()) == []


def test_answer_refuses_a_leased_run_unless_forced_and_requeues_it(url: str, folder: Path) -> None:
    """A live lease: answer exits 6; --force fences the holder, answers, and puts the run back in line."""
    with safepoint.open_store(url) as store:
        Run.start(store, "served")
        lease = _claimed(store, "served")
        held = Run.open(store, "served", lease=lease)
        held.wait_for_input("Which account?")
    refused = sp(folder, "answer", "served", "--json-value", '{"account": 7}', "--store", url, "--json")
    assert refused.returncode == 6
    error = json.loads(refused.stderr)
    assert error["type"] == "Conflict"
    assert error["run_id"] == "served"
    assert "--force" in error["error"]
    forced = sp(
        folder, "answer", "served", "--json-value", '{"account": 7}', "--force", "--store", url, "--json"
    )
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["fenced"] is True
    assert json.loads(forced.stdout)["queued"] is True
    with safepoint.open_store(url) as store:
        with pytest.raises(LeaseLost):
            store.save(store.load("served").next(), lease=lease)
        again = store.claim("worker-2", lease=60)
        assert again is not None
        assert again.run_id == "served"
        assert Run.resume(store, "served", lease=again).take_input() == {"account": 7}


def test_cancel_fences_the_worker_and_requeue_brings_a_quarantined_run_back(url: str, folder: Path) -> None:
    """cancel: the lease holder's next save is LeaseLost; requeue: a quarantined run is claimable again."""
    with safepoint.open_store(url) as store:
        Run.start(store, "runaway").commit()
        lease = _claimed(store, "runaway")
        Run.start(store, "poison")
        poisoned = _claimed(store, "poison")
        store.release(poisoned, status=Status.FAILED)  # what a Worker does after max_attempts
    cancelled = sp(folder, "cancel", "runaway", "--store", url, "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout) == {"run_id": "runaway", "step": 2, "fenced": True}
    requeued = sp(folder, "requeue", "poison", "--store", url)
    assert requeued.returncode == 0, requeued.stderr
    assert "running" in requeued.stdout
    with safepoint.open_store(url) as store:
        with pytest.raises(LeaseLost):
            store.save(store.load("runaway", 1).next(), lease=lease)
        assert store.history("runaway")[-1].status is Status.CANCELLED
        taken = store.claim("worker-2")
        assert taken is not None
        assert taken.run_id == "poison"


def test_delete_asks_first_and_then_removes_the_run(url: str, folder: Path) -> None:
    """delete without --yes on a non-terminal stdin refuses (2); with --yes the run is gone (then 3)."""
    with safepoint.open_store(url) as store:
        cp = Checkpoint(run_id="old")
        store.save(cp)
        store.save(cp.next())
    refused = sp(folder, "delete", "old", "--store", url)
    assert refused.returncode == 2
    assert "--yes" in refused.stderr
    deleted = sp(folder, "delete", "old", "--yes", "--store", url, "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"run_id": "old", "checkpoints": 2, "fenced": False}
    gone = sp(folder, "delete", "old", "--yes", "--store", url, "--json")
    assert gone.returncode == 3
    assert json.loads(gone.stderr)["type"] == "NotFound"
    nowhere = sp(folder, "cancel", "old")  # the default store, in an empty folder: none is created
    assert nowhere.returncode == 3
    assert "no safepoint store at" in nowhere.stderr
    assert list(folder.iterdir()) == []


def test_budget_makes_a_run_its_budget_failed_runnable_again(url: str, folder: Path) -> None:
    """budget --tokens N sets the limit to N as one new checkpoint; a worker's run goes back in the queue."""
    with safepoint.open_store(url) as store:
        Run.start(store, "spender", budget=Budget(tokens=100))
        lease = _claimed(store, "spender")
        run = Run.open(store, "spender", lease=lease)
        with pytest.raises(BudgetExceeded):
            run.add_usage(tokens_in=80, tokens_out=40)
        store.release(lease, status=Status.FAILED)
        steps = len(store.history("spender"))
    nothing = sp(folder, "budget", "spender", "--store", url)
    assert nothing.returncode == 2
    raised = sp(folder, "budget", "spender", "--tokens", "1000", "--steps", "50", "--store", url, "--json")
    assert raised.returncode == 0, raised.stderr
    data = json.loads(raised.stdout)
    assert data["status"] == "running"
    assert data["queued"] is True
    assert data["budget"] == {"tokens": 1000, "spend": None, "steps": 50}
    assert data["remaining"]["tokens"] == 880
    with safepoint.open_store(url) as store:
        assert len(store.history("spender")) == steps + 1
        again = store.claim("worker-2")
        assert again is not None
        resumed = Run.resume(store, "spender", lease=again)
        assert resumed.active
        assert resumed.budget == Budget(tokens=1000, steps=50)
