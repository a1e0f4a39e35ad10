"""The run row's integrity on every backend, plain and encrypted, and listing is not loading.

A run row's status edited by hand, a status record from an older lease
epoch put back, an older sealed labels value of the same run put back: each
is named by ``safepoint verify`` (run and column, never a value). A deleted
SQLite head row is the documented limit (docs/operations.md): the run loads
its previous step and verify has nothing to compare it with. A run whose row
cannot be read is listed as unreadable, by its id, and the rest of the
listing stands — in ``runs()``, ``safepoint runs`` and ``safepoint verify``,
each run as a real subprocess.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import safepoint
from helpers import store_targets as targets
from helpers.store_targets import CONFIGS, Target, made
from safepoint import Checkpoint, Store
from safepoint.cli.output import ExitCode
from safepoint.tamper import run_mismatches
from safepoint.ui import create_app
from safepoint.ui.verifying import verify_run

MARKER = "INTEGRITY-MARKER-77c1"


@pytest.fixture(params=CONFIGS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with made(request.param, tmp_path) as made_target:
        yield made_target


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty folder to run the CLI from."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


def sp(target: Target, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real executable on the target's store, given the keyring (env) only when it is encrypted."""
    result = targets.sp(target, cwd, *args)
    assert MARKER not in result.stdout + result.stderr
    return result


def save_run(store: Store, run_id: str, steps: int, labels: dict[str, str] | None = None) -> None:
    cp = Checkpoint(run_id=run_id, labels=labels or {"team": MARKER})
    for i in range(steps):
        cp.messages.append({"role": "user", "content": f"{MARKER} {i}"})
        store.save(cp)
        cp = cp.next()


def verify_failures(target: Target, cwd: Path) -> list[dict[str, Any]]:
    result = sp(target, cwd, "verify", "--json")
    failures: list[dict[str, Any]] = json.loads(result.stdout)["failures"]
    assert result.returncode == (ExitCode.FAILURE if failures else 0), result.stderr
    return failures


# -- the run row's status ---------------------------------------------------------------------


def test_a_hand_edited_status_is_reported_by_verify(target: Target, cwd: Path) -> None:
    """Statuses set without a checkpoint (release, requeue) pass verify; one edited by hand is named."""
    with target.open() as store:
        for run_id in ("edited", "released", "requeued"):
            save_run(store, run_id, 3)
        for run_id, status in (("released", "done"), ("requeued", "failed")):
            store.enqueue(run_id)
            lease = store.claim("w", lease=60)
            assert lease is not None
            assert lease.run_id == run_id
            store.release(lease, status=status)  # the worker's word, not the head's
        store.requeue("requeued")  # failed -> running, without a checkpoint
        assert store.status_origin("released").set_by == "release"
        assert store.status_origin("requeued").set_by == "requeue"
    target.execute("UPDATE safepoint_runs SET status = 'done' WHERE run_id = 'edited'")
    with target.open(read_only=True) as store:
        origin = store.status_origin("edited")
        assert (origin.status, origin.set_by) == ("done", None)
        head = store.load("edited")
        assert run_mismatches(store.run("edited"), head, None, origin) == ["status"]
        _, failures = verify_run(store, "edited")  # the inspector's verify
        assert [step for step, _ in failures] == [2]
        assert [verify_run(store, run_id)[1] for run_id in ("released", "requeued")] == [[], []]
    failures = verify_failures(target, cwd)
    assert [(f["run_id"], f["step"], f["error"]) for f in failures] == [("edited", 2, "CorruptCheckpoint")]
    assert "status" in failures[0]["message"]
    assert "done" not in failures[0]["message"]  # the column is named, its value never quoted


def test_a_status_record_counts_only_for_its_status_and_lease_epoch(tmp_path: Path) -> None:
    """A record names the status it set and the epoch it was made under: an edit beside it, or an
    older record put back after a later claim, is reported; the next save clears the record."""
    path = tmp_path / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store, closing(sqlite3.connect(path)) as conn:
        save_run(store, "r", 2)
        store.enqueue("r")
        first = store.claim("w", lease=60)
        assert first is not None
        store.release(first, status="failed", requeue=True)
        ((old,),) = conn.execute("SELECT status_change FROM safepoint_runs").fetchall()
        assert store.status_origin("r").set_by == "release"
        with conn:
            conn.execute("UPDATE safepoint_runs SET status = 'done'")  # beside a record naming failed
        assert store.status_origin("r").set_by is None
        with conn:
            conn.execute("UPDATE safepoint_runs SET status = 'failed'")
        second = store.claim("w", lease=60)  # a new epoch: the record from the first is history
        assert second is not None
        store.release(second, status="waiting")
        with conn:
            conn.execute("UPDATE safepoint_runs SET status = 'failed', status_change = ?", (old,))
        assert store.status_origin("r").set_by is None  # an older epoch's record accounts for nothing
        with conn:
            conn.execute("UPDATE safepoint_runs SET status = 'waiting', status_change = NULL")
        head = store.load("r")
        assert run_mismatches(store.run("r"), head, None, store.status_origin("r")) == ["status"]
        store.save(head.next())  # a save sets the head's status and clears any record
        origin = store.status_origin("r")
        assert (origin.status, origin.set_by) == (head.status.value, None)


def test_a_cancel_whose_head_does_not_load_is_recorded(tmp_path: Path) -> None:
    """``cancel`` of a run whose head cannot be loaded cancels the run row alone, and says so."""
    path = tmp_path / "state.db"
    with safepoint.open_store(f"sqlite:///{path}") as store:
        save_run(store, "r", 2)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE safepoint_checkpoints SET header = CAST('{}' AS BLOB) WHERE step = 1")
    with safepoint.open_store(f"sqlite:///{path}") as store:
        assert store.cancel("r").step is None
        origin = store.status_origin("r")
        assert (origin.status, origin.set_by) == ("cancelled", "cancel")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_status_apart_from_the_head_before_the_upgrade_is_recorded_by_it(
    backend: str, tmp_path: Path
) -> None:
    """The status_change revision records a status that already differed from the head's (a run quarantined by
    older code) as it stands, so verify does not call it tampered; the other runs get no record."""
    with made(backend, tmp_path) as target:
        with target.open() as store:
            save_run(store, "quarantined", 2)
            save_run(store, "fine", 2)
        # As older code left them: the status set by a release, no column to record it.
        target.execute("UPDATE safepoint_runs SET status = 'failed' WHERE run_id = 'quarantined'")
        target.execute("ALTER TABLE safepoint_runs DROP COLUMN status_change")
        revision = 7 if backend == "sqlite" else 8  # the status_change revision of each dialect
        target.execute(f"DELETE FROM safepoint_ddl_revisions WHERE revision = {revision}")
        with target.open() as store:  # applies the status_change revision again
            assert store.status_origin("quarantined").set_by == "upgrade"
            assert store.status_origin("fine").set_by is None
            head = store.load("quarantined")
            origin = store.status_origin("quarantined")
            assert run_mismatches(store.run("quarantined"), head, None, origin) == []


# -- the SQLite head, kept in the checkpoint keys ---------------------------------------------


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_sqlite_a_deleted_head_row_is_the_documented_limit(
    tmp_path: Path, cwd: Path, encrypted: bool
) -> None:
    """On SQLite a head row deleted cleanly reads as saves that never happened (docs/operations.md,
    "What SQLite cannot tell"): the previous step loads, verify is clean, the lost step saves again."""
    path = tmp_path / "state.db"
    target = Target(f"sqlite:///{path}", encrypted, lambda _: [])
    with target.open() as store:
        save_run(store, "r", 3)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM safepoint_checkpoints WHERE step = 2")
    with target.open() as store:
        head = store.load("r")
        assert head.step == 1
        assert [info.step for info in store.history("r")] == [0, 1]
        assert run_mismatches(store.run("r"), head, None, store.status_origin("r")) == []
        if not encrypted:  # the real executable agrees (its keyring path is covered below)
            assert verify_failures(target, cwd) == []
        store.save(head.next())
        assert store.load("r").step == 2


# -- older sealed run-row values put back -----------------------------------------------------


def test_older_labels_put_back_are_reported_by_verify(target: Target, cwd: Path) -> None:
    """An older labels value of the same run copied back into the run row (sealed for that run, so it
    opens) is what a listing shows until verify names it against the head's digest-covered labels."""
    with target.open() as store:
        cp = Checkpoint(run_id="r", labels={"stage": "draft"})
        store.save(cp)
        ((older,),) = target.execute("SELECT labels FROM safepoint_runs")
        cp = cp.next()
        cp.labels = {"stage": "final"}
        store.save(cp)
    stored = older if isinstance(older, str) else json.dumps(older)
    cast = "::jsonb" if target.url.startswith("postgresql") else ""
    target.execute("UPDATE safepoint_runs SET labels = '" + stored.replace("'", "''") + "'" + cast)
    with target.open(read_only=True) as store:
        (listed,) = store.runs()
        assert listed.labels == {"stage": "draft"}  # the row's copy: a listing does not load the head
        head = store.load("r")
        assert head.labels == {"stage": "final"}
        assert run_mismatches(store.run("r"), head, None, store.status_origin("r")) == ["labels"]
    if target.encrypted:  # the real executable names it too (plain stores: tests/test_tamper.py)
        failures = verify_failures(target, cwd)
        assert [(f["run_id"], f["step"]) for f in failures] == [("r", 1)]
        assert "labels" in failures[0]["message"]
        assert "draft" not in failures[0]["message"]


# -- listing is not loading -------------------------------------------------------------------


def test_a_damaged_run_is_listed_as_unreadable_and_the_rest_stands(target: Target, cwd: Path) -> None:
    """One run whose row does not read (a label column no save writes; on an encrypted store another
    run's sealed labels) is listed as unreadable by its id; the others are listed as they are."""
    ids = [f"run-{i}" for i in range(5)]
    with target.open() as store:
        for run_id in ids:
            save_run(store, run_id, 1, {"name": run_id})
    if target.encrypted:  # sealed for run-1: it does not open as run-2's
        target.execute(
            "UPDATE safepoint_runs SET labels = (SELECT labels FROM safepoint_runs WHERE run_id = 'run-1')"
            " WHERE run_id = 'run-2'"
        )
    else:
        target.execute(f"UPDATE safepoint_runs SET labels = '\"{MARKER}\"' WHERE run_id = 'run-2'")
    with target.open(read_only=True) as store:
        listed = {run.run_id: run for run in store.runs()}
        assert sorted(listed) == ids
        assert listed["run-2"].unreadable == "CorruptCheckpoint"
        assert (listed["run-2"].labels, listed["run-2"].counters) == ({}, {})
        assert all(
            listed[i].labels == {"name": i} and listed[i].unreadable is None for i in ids if i != "run-2"
        )
        assert [run.run_id for run in store.runs(labels={"name": "run-3"})] == ["run-3"]
    if target.url.startswith("sqlite") and not target.encrypted:  # the inspector's runs page
        with target.open(read_only=True) as store:
            page = TestClient(create_app(store), base_url="http://127.0.0.1:8765").get("/").text
        row = page[page.index('<tr class="run unreadable">') :]
        assert "run-2" in row[: row.index("</tr>")]
        assert "CorruptCheckpoint" in row[: row.index("</tr>")]
        assert all(run_id in page for run_id in ids)
    shown = sp(target, cwd, "runs")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "run-2" in line)
    assert "unreadable" in line
    assert "CorruptCheckpoint" in line
    assert all(run_id in shown.stdout for run_id in ids)
    if target.url.startswith("sqlite") and not target.encrypted:
        as_json = json.loads(sp(target, cwd, "runs", "--json").stdout)["runs"]
        unreadable = [(r["run_id"], r["unreadable"]) for r in as_json if r["unreadable"]]
        assert unreadable == [("run-2", "CorruptCheckpoint")]
    failures = verify_failures(target, cwd)
    assert {f["run_id"] for f in failures} == {"run-2"}
