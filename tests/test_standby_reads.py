"""Readers on a hot standby: every read command, ``safepoint ui`` and a read-only store work on a
streaming replica and create nothing; a read the standby cancels for a conflict with recovery is
``StoreUnavailable`` and asked again; a write there is ``StoreReadOnly``, never a raw driver error.

The clusters are the test's own (``pg_clusters``): a primary, a standby with the default
``max_standby_streaming_delay`` (30 s) for the commands, and an *eager* standby with the delay at
0, which cancels a conflicting query the moment the primary's cleanup is replayed. A conflict is
made, not waited for: on the primary one session deletes rows of a scratch table and a second
takes an ACCESS EXCLUSIVE lock on the checkpoints table, both left open; the standby replays the
lock, so a reader there blocks on it holding a snapshot that still needs the deleted rows; then the
delete commits and VACUUM removes them, and replaying that cleanup cancels the reader (SQLSTATE
40001). Rolling the lock back lets the retried read finish.

Marked ``pg_restart``: the serial pass, with the other tests that start and stop servers. The
commands run as the real executable in subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

import safepoint
from pg_clusters import Cluster, clusters, multi_host_url
from safepoint import Checkpoint, StoreReadOnly, StoreUnavailable, Worker, retrying
from safepoint.cli.output import ExitCode
from safepoint_exe import SAFEPOINT, sp

pytestmark = pytest.mark.pg_restart

RUNS, STEPS = 12, 4  # the store the module reads: RUNS runs of STEPS checkpoints
APP = "from safepoint import MigrationChain\n\nCHAIN = MigrationChain(current=1)\n"
READ_COMMANDS: list[tuple[str, ...]] = [
    ("runs", "--json", "--limit", "100"),
    ("show", "run-3", "--json"),
    ("history", "run-3", "--json"),
    ("diff", "run-3", "0", "3", "--json"),
    ("verify", "--json"),
    ("export", "run-3"),
    ("check", "--migrations", "app:CHAIN", "--json"),
]
CATALOG = """SELECT n.nspname, c.relname, c.relkind, c.relpersistence
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace ORDER BY 1, 2"""


@dataclass
class Replica:
    primary: Cluster
    standby: Cluster  # the default max_standby_streaming_delay
    eager: Cluster  # max_standby_streaming_delay = 0


def replayed(primary: Cluster, *standbys: Cluster, timeout: float = 30) -> None:
    """Until every standby has replayed all the primary wrote so far, an open transaction's lock
    record included: a commit that wrote no WAL of its own is asynchronous, so the WAL writer
    flushes everything before it in a moment, where nothing else would flush that record."""
    primary.execute("SELECT pg_current_xact_id()")
    lsn = primary.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    deadline = time.monotonic() + timeout
    for standby in standbys:
        while standby.execute(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'") != [(True,)]:
            assert time.monotonic() < deadline, f"{standby.name} did not replay the primary's WAL"
            time.sleep(0.02)


def until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def fill(url: str) -> None:
    """RUNS runs of STEPS steps, each step adding a message and changing the state."""
    with safepoint.open_store(url) as store:
        for n in range(RUNS):
            cp = Checkpoint(run_id=f"run-{n}", messages=[{"role": "user", "content": f"task {n}"}])
            store.save(cp)
            for step in range(1, STEPS):
                cp = cp.next()
                cp.messages.append({"role": "assistant", "content": f"step {step} of run {n}"})
                cp.state["step"] = step
                store.save(cp)


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    with clusters() as kit:
        primary = kit.primary()
        standby = kit.standby(primary, name="reader")
        eager = kit.standby(primary, name="eager", settings={"max_standby_streaming_delay": "0"})
        fill(primary.url())
        primary.execute("CREATE TABLE sp_churn (n int)")  # the conflicts' scratch table, not the store's
        replayed(primary, standby, eager)
        yield Replica(primary, standby, eager)


def catalog(cluster: Cluster) -> list[tuple[object, ...]]:
    return cluster.execute(CATALOG)


def commits(cluster: Cluster) -> int:
    """Transactions committed in the store's database on ``cluster`` (its own statistics)."""
    rows = cluster.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
    return int(rows[0][0])  # type: ignore[call-overload]


def assert_clean(result: subprocess.CompletedProcess[str], command: tuple[str, ...]) -> None:
    assert result.returncode == 0, (command, result.stderr)
    assert "Traceback" not in result.stderr, (command, result.stderr)


# -- readers -------------------------------------------------------------------------


def test_every_read_command_works_on_a_hot_standby_and_creates_nothing(
    replica: Replica, tmp_path: Path
) -> None:
    """runs, show, history, diff, verify, export and check against the standby exit 0 with the
    store's contents, and the primary's catalog (and the standby's) is the same afterwards."""
    (tmp_path / "app.py").write_text(APP)
    before = catalog(replica.primary), catalog(replica.standby)
    log_start = replica.standby.log.stat().st_size
    commits_before = commits(replica.standby)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda c: sp(tmp_path, *c, "--store", replica.standby.url()), READ_COMMANDS))
    for command, result in zip(READ_COMMANDS, results, strict=True):
        assert_clean(result, command)
    out = dict(zip((c[0] for c in READ_COMMANDS), (r.stdout for r in results), strict=True))
    assert {run["run_id"] for run in json.loads(out["runs"])["runs"]} == {f"run-{n}" for n in range(RUNS)}
    assert json.loads(out["show"])["state"] == {"step": STEPS - 1}
    assert [row["step"] for row in json.loads(out["history"])] == list(range(STEPS))
    assert len(json.loads(out["diff"])["messages"]["added"]) == STEPS - 1
    verified = json.loads(out["verify"])
    assert (verified["checked"], verified["failures"]) == (RUNS * STEPS, [])
    assert json.loads(out["export"])["checkpoint"]["run_id"] == "run-3"
    checked = json.loads(out["check"])
    assert (checked["checked"], checked["failures"]) == (RUNS * STEPS, [])
    assert (catalog(replica.primary), catalog(replica.standby)) == before
    # Nothing was even attempted that the standby refused: its log has no error since.
    with replica.standby.log.open("rb") as server_log:
        server_log.seek(log_start)
        assert b"ERROR" not in server_log.read()
    # verify reads in a transaction per call, each with its own snapshot: the standby's
    # max_standby_streaming_delay bounds one load, not the walk over the store.
    assert commits(replica.standby) - commits_before >= RUNS * STEPS


def test_a_prefer_standby_url_reads_the_standby_and_its_lag(replica: Replica, tmp_path: Path) -> None:
    """``target_session_attrs=prefer-standby`` reads on the standby: a run saved while the standby's
    replay is paused is missing there (the documented lag) and listed once replay resumes."""
    reader = multi_host_url(replica.primary, replica.standby, attrs="prefer-standby")
    replica.standby.execute("SELECT pg_wal_replay_pause()")
    try:
        until(
            lambda: replica.standby.execute("SELECT pg_get_wal_replay_pause_state()") == [("paused",)],
            "paused",
        )
        with safepoint.open_store(replica.primary.url()) as store:
            store.save(Checkpoint(run_id="saved-during-the-pause"))
        lagging = sp(tmp_path, "runs", "--json", "--limit", "100", "--store", reader)
        assert_clean(lagging, ("runs",))
        assert "saved-during-the-pause" not in {r["run_id"] for r in json.loads(lagging.stdout)["runs"]}
    finally:
        replica.standby.execute("SELECT pg_wal_replay_resume()")
    replayed(replica.primary, replica.standby)
    caught_up = sp(tmp_path, "runs", "--json", "--limit", "100", "--store", reader)
    assert_clean(caught_up, ("runs",))
    assert "saved-during-the-pause" in {r["run_id"] for r in json.loads(caught_up.stdout)["runs"]}
    with safepoint.open_store(replica.primary.url()) as store:
        store.delete_run("saved-during-the-pause")
    replayed(replica.primary, replica.standby, replica.eager)


def _get(port: int, path: str, accept: str = "text/html") -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(answer.status), answer.read().decode()


def test_the_inspector_serves_a_standby_read_only(replica: Replica, tmp_path: Path) -> None:
    """``safepoint ui`` on the standby: the runs, a run, a step and a whole-store verify from the
    page, all answered; nothing created on the primary."""
    from pg_clusters import free_port  # noqa: PLC0415

    before = catalog(replica.primary)
    port = free_port()
    proc = subprocess.Popen(
        [SAFEPOINT, "ui", "--store", replica.standby.url(), "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _answers(port, proc), "safepoint ui answers")
        status, home = _get(port, "/")
        assert status == 200
        assert "read-only" in home
        assert all(f"run-{n}" in home for n in range(RUNS))
        status, run = _get(port, "/run/~run-3")
        assert status == 200
        assert "step 2 of run 3" in run or "run-3" in run
        status, step = _get(port, "/run/~run-3?step=2")
        assert (status, "step 2 of run 3" in step) == (200, True)
        token = re.search(r'name="form_token" value="([^"]+)"', run)
        assert token is not None
        form = f"form_token={token.group(1)}".encode()
        posted = urllib.request.Request(f"http://127.0.0.1:{port}/verify", data=form, method="POST")
        with urllib.request.urlopen(posted, timeout=10) as answer:
            assert answer.status == 200
        progress: dict[str, Any] = {}

        def verified() -> bool:
            progress.update(json.loads(_get(port, "/verify", accept="application/json")[1]))
            return not progress["running"] and progress["done"] == RUNS

        until(verified, "the inspector's verify ends")
        assert (progress["checked"], progress["failures"]) == (RUNS * STEPS, [])
    finally:
        proc.send_signal(2)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert catalog(replica.primary) == before


def _answers(port: int, proc: subprocess.Popen[str]) -> bool:
    assert proc.poll() is None, proc.communicate()
    try:
        return _get(port, "/")[0] == 200
    except OSError:
        return False


# -- recovery conflicts --------------------------------------------------------------------


@contextmanager
def conflict_ahead(replica: Replica) -> Iterator[Callable[[], None]]:
    """Readers of the eager standby's checkpoints table block (the primary holds it locked) holding
    a snapshot that needs rows the primary is deleting; the function given cancels them (the
    delete commits, VACUUM removes the rows, the standby replays it). Leaving unlocks the table."""
    primary = replica.primary
    primary.execute("INSERT INTO sp_churn SELECT generate_series(1, 100)")
    with (
        psycopg.connect(primary.dsn()) as deleter,
        psycopg.connect(primary.dsn()) as locker,
    ):
        deleter.execute("DELETE FROM sp_churn")  # its xid first: older than the lock holder's
        locker.execute("LOCK TABLE safepoint.safepoint_checkpoints IN ACCESS EXCLUSIVE MODE")
        replayed(primary, replica.eager)

        def cancel() -> None:
            until(lambda: _lock_waiters(replica.eager) > 0, "a reader waits on the standby")
            deleter.commit()
            primary.execute("VACUUM sp_churn")
            replayed(primary, replica.eager)

        try:
            yield cancel
        finally:
            locker.rollback()
            deleter.rollback()
    replayed(primary, replica.eager)


def _lock_waiters(cluster: Cluster) -> int:
    rows = cluster.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE backend_type = 'client backend' AND wait_event_type = 'Lock'"
    )
    return int(rows[0][0])  # type: ignore[call-overload]


class _Retries(logging.Handler):
    """The retry policy's log lines, kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_read_cancelled_by_recovery_is_unavailable_and_a_reader_asks_again(replica: Replica) -> None:
    """On the eager standby a load cancelled by replayed cleanup raises ``StoreUnavailable`` (the
    driver's 40001 chained); through ``retrying.reading`` the same load is asked again and returns
    the stored checkpoint."""
    store = safepoint.open_store(replica.eager.url(), read_only=True)
    expected = store.load("run-5")
    failed: list[BaseException] = []

    def load() -> None:
        try:
            store.load("run-5")
        except BaseException as exc:
            failed.append(exc)

    with conflict_ahead(replica) as cancel:
        reader = threading.Thread(target=load)
        reader.start()
        cancel()
        reader.join(30)
    assert len(failed) == 1, failed
    error = failed[0]
    assert isinstance(error, StoreUnavailable)
    assert "conflict with recovery" in str(error)
    assert isinstance(error.__cause__, psycopg.errors.SerializationFailure)
    assert error.__cause__.sqlstate == "40001"

    retries = _Retries()
    logging.getLogger("safepoint.retrying").addHandler(retries)
    loaded: list[Checkpoint] = []
    try:
        with conflict_ahead(replica) as cancel:
            reader = threading.Thread(target=lambda: loaded.append(retrying.reading(store).load("run-5")))
            reader.start()
            cancel()
            until(lambda: bool(retries.lines), "the reader retried")
        reader.join(30)
    finally:
        logging.getLogger("safepoint.retrying").removeHandler(retries)
        store.close()
    assert [cp.to_dict() for cp in loaded] == [expected.to_dict()]
    assert any("conflict with recovery" in line for line in retries.lines), retries.lines


def test_verify_on_a_standby_rides_out_a_recovery_conflict(replica: Replica, tmp_path: Path) -> None:
    """``safepoint verify`` on the eager standby, cancelled mid-walk by a replayed cleanup: it says
    it retries, then verifies every checkpoint and exits 0."""
    log = tmp_path / "stderr.txt"
    with conflict_ahead(replica) as cancel, log.open("w") as errors:
        proc = subprocess.Popen(
            [SAFEPOINT, "verify", "--json", "--store", replica.eager.url()],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        cancel()
        until(lambda: "retrying" in log.read_text(), "verify retried")
    out, _ = proc.communicate(timeout=60)
    err = log.read_text()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "conflict with recovery" in err
    verified = json.loads(out)
    assert (verified["checked"], verified["failures"]) == (RUNS * STEPS, [])


# -- writers ---------------------------------------------------------------------------


def test_writes_on_a_standby_are_refused_with_a_typed_error(replica: Replica, tmp_path: Path) -> None:
    """Opening the standby for writing and a write command there: ``StoreReadOnly`` naming the hot
    standby, the store's exit code 5, one line on stderr (a JSON object with --json)."""
    log_start = replica.standby.log.stat().st_size
    with pytest.raises(StoreReadOnly, match="hot standby") as refused:
        safepoint.open_store(replica.standby.url())
    assert refused.value.standby is True
    with replica.standby.log.open("rb") as server_log:  # what the readers' test finds none of
        server_log.seek(log_start)
        assert b"ERROR:  cannot set transaction read-write mode during recovery" in server_log.read()
    assert isinstance(refused.value.__cause__, psycopg.errors.FeatureNotSupported)
    with (
        safepoint.open_store(replica.standby.url(), read_only=True) as store,
        pytest.raises(StoreReadOnly) as read_only,
    ):
        store.save(store.load("run-1").next())
    assert read_only.value.standby is False
    before = catalog(replica.primary)
    commands = [("cancel", "run-1"), ("requeue", "run-1"), ("gc",), ("cancel", "run-1", "--json")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda c: sp(tmp_path, *c, "--store", replica.standby.url()), commands))
    for command, result in zip(commands, results, strict=True):
        assert result.returncode == ExitCode.UNAVAILABLE, (command, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "hot standby" in result.stderr
    assert all(r.stderr.startswith("error: PostgreSQL refused a write") for r in results[:3])
    assert json.loads(results[3].stderr)["type"] == "StoreReadOnly"
    assert catalog(replica.primary) == before
    with safepoint.open_store(replica.standby.url(), read_only=True) as store:
        assert store.run("run-1").status.value == "running"


def test_the_async_store_reads_a_standby_and_is_refused_writes_alike(replica: Replica) -> None:
    """``open_async_store`` on the standby: read-only it loads; for writing it is ``StoreReadOnly``."""

    async def main() -> None:
        reader = await safepoint.open_async_store(replica.standby.url(), read_only=True)
        try:
            assert (await reader.load("run-2")).state == {"step": STEPS - 1}
        finally:
            await reader.close()
        with pytest.raises(StoreReadOnly, match="hot standby"):
            await safepoint.open_async_store(replica.standby.url())

    asyncio.run(main())


def test_a_worker_whose_url_reaches_a_standby_stops_with_a_typed_error() -> None:
    """A worker's store opened with ``target_session_attrs=any`` over a primary and its standby:
    the primary stops, the pool reconnects to the standby, and ``Worker.run`` raises
    ``StoreReadOnly`` at its claim instead of spinning; the queued runs are all still there."""
    with clusters() as kit:
        primary = kit.primary()
        standby = kit.standby(primary)
        store = safepoint.open_store(multi_host_url(primary, standby, attrs="any"), min_size=1)
        for n in range(5):
            store.save(Checkpoint(run_id=f"queued-{n}"))
            store.enqueue(f"queued-{n}")
        replayed(primary, standby)
        primary.stop("fast")
        handled: list[str] = []
        worker = Worker(store, lambda job: handled.append(job.run_id), retry_for=30, poll=0.05)
        with pytest.raises(StoreReadOnly, match="hot standby") as refused:
            worker.run(stop_when_idle=True)
        store.close()
        assert refused.value.standby is True
        assert handled == []
        with safepoint.open_store(standby.url(), read_only=True) as reader:
            assert reader.queue_depth() == 5
