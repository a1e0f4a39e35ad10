"""The primary dies while 4 worker processes save; its standby is promoted: what was lost?

Two real PostgreSQL clusters of the test's own (``pg_clusters``): a primary and
a streaming standby. The workers open the store from one multi-host URL
(``target_session_attrs=read-write``) and nothing in safepoint names the
topology; they ride the promotion out with the ``Worker``'s default retry
policy. Each worker writes a ledger outside the database
(``helpers/failover_worker.py``): every save the store acknowledged, every run
done, every in-doubt save the retry settled.

* synchronous standby, ``pg_ctl stop -m immediate`` of the primary (every
  backend at once) with saves in flight: every acknowledged save is on the new
  primary, no run lost or done twice, every answer the uninterrupted run's,
  and at least one save whose commit was in doubt was settled by the retry's
  digest check (landed, or saved again);
* the same with the postmaster SIGKILLed alone (its backends orphaned);
* asynchronous standby with its walreceiver stopped for a moment before the
  kill (lag made real): ``safepoint verify`` clean, every run ends done or
  failed with a typed error, no raw traceback; the acknowledged saves lost
  and the runs done twice are measured and printed, not asserted zero;
* a worker started while no host accepts writes (the primary gone, the standby
  not yet promoted) opens the store once the promotion is done.

"In flight" is made sure of, not hoped for: with a synchronous standby every
commit waits for the standby's flush, so the test stops the standby's
walreceiver until a save waits (``failover``'s docstring), then kills.

The figures (kill to first save on the new primary, promotion, in-doubt saves,
losses) are printed: run with ``-s``. The clusters are the test's own, on their
own ports; the shared server is never touched, but these run in the serial
``pg_restart`` pass with the other tests that stop servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

import safepoint
from pg_clusters import Cluster, Kit, clusters, multi_host_url, wait_writable
from safepoint import Checkpoint, SafepointError, Status, errors

HELPER = Path(__file__).parent / "helpers" / "failover_worker.py"
SAFEPOINT = str(Path(sys.executable).with_name("safepoint"))
pytestmark = pytest.mark.pg_restart
STEPS, WORKERS = 3, 4
# Short, so that a lease the asynchronous standby never heard of ends soon. An outage that
# outlasts one costs work, never a save: a save under a lease another worker took is refused.
LEASE = 3.0
KILL_AT = 0.4  # the share of runs done when the primary dies


@dataclass
class Ledger:
    """What the workers wrote: acknowledged saves, runs done, in-doubt saves settled."""

    # run, step, digest, worker, time.time() when the save returned
    acks: list[tuple[str, int, str, str, float]] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    settled: Counter[str] = field(default_factory=Counter)  # landed / resaved
    exits: int = 0

    @classmethod
    def read(cls, path: Path) -> Ledger:
        ledger = cls()
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, *rest = line.split("\t")
            if kind == "ack":
                ledger.acks.append((rest[0], int(rest[1]), rest[2], rest[3], float(rest[4])))
            elif kind == "done":
                ledger.done[rest[0]] += 1
            elif kind in ("landed", "resaved"):
                ledger.settled[kind] += 1
            elif kind == "exit":
                ledger.exits += 1
        return ledger


def spawn(url: str, ledger: Path, worker_id: str) -> subprocess.Popen[bytes]:
    """A worker process; its stderr goes to a file beside the ledger, so a worker says what it met."""
    stderr = open(ledger.with_name(f"{worker_id}.stderr"), "wb")  # noqa: SIM115  # closed by the child's exit
    return subprocess.Popen(
        [sys.executable, str(HELPER), url, str(ledger), worker_id, str(STEPS), str(LEASE)], stderr=stderr
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], list[str]]:
    """One run through the same worker on SQLite, with nothing in its way: its state and messages."""
    folder = tmp_path_factory.mktemp("reference")
    url = f"sqlite:///{folder / 'reference.db'}"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="reference"))
        store.enqueue("reference")
    assert spawn(url, folder / "ledger.tsv", "ref").wait(timeout=120) == 0
    with safepoint.open_store(url) as store:
        cp = store.load("reference")
    return cp.state, [m["content"] for m in cp.messages]


@dataclass
class Failover:
    """One scenario's outcome: the ledger, the new primary's URL, the workers' exits and the times."""

    ledger: Ledger
    url: str
    codes: list[int | None]
    stderr: dict[str, str]
    times: dict[str, float]

    def first_saves_after(self, instant: float) -> dict[str, float]:
        """Each worker's first acknowledged save after ``instant``: seconds after it."""
        first: dict[str, float] = {}
        for *_, worker, at in self.ledger.acks:
            if at > instant:
                first[worker] = min(first.get(worker, at), at)
        return {worker: at - instant for worker, at in first.items()}


def failover(
    kit: Kit,
    tmp_path: Path,
    *,
    runs: int,
    synchronous: bool,
    kill: Callable[[Cluster], None],
    receiver_after: Literal["resume", "kill"],
    lag: float = 0.0,
) -> Failover:
    """Seed ``runs`` queued runs, start the workers and, once ``KILL_AT`` of the runs are done,
    stop the standby's walreceiver, kill the primary with ``kill``, resume or kill the
    walreceiver (``receiver_after``), promote the standby and wait for the workers to drain
    the queue.

    The stopped walreceiver is what puts saves in flight at the kill. Synchronous, every
    commit waits for the standby's flush: it stays stopped until at least one save waits
    (pg_stat_activity's ``SyncRep``), so the kill surely cuts a commit whose outcome the
    worker cannot know. Asynchronous, it stays stopped ``lag`` seconds while saves go on
    and are acknowledged: the standby's lag, made real. Killed, it takes the WAL it had not
    written with it (the standby's postmaster restarts it and recovery goes on from disk),
    as the standby would never have had it if the primary's machine had gone."""
    began = time.time()
    primary = kit.primary(synchronous="standby1" if synchronous else None)
    standby = kit.standby(primary, name="standby1")
    url = multi_host_url(primary, standby)
    up = time.time()
    with safepoint.open_store(url) as store:
        for i in range(runs):
            store.save(Checkpoint(run_id=f"run-{i:04d}"))
            store.enqueue(f"run-{i:04d}")
    caught_up(primary, "standby1")  # the lag to measure is the one made below, not the seeding's
    path = tmp_path / "ledger.tsv"
    path.touch()
    workers = [spawn(url, path, f"w{n}") for n in range(WORKERS)]
    times: dict[str, float] = {"began": began, "up": up, "seeded": time.time()}
    receiver = standby.process_pid("walreceiver")
    assert receiver is not None
    try:
        deadline = time.monotonic() + 180
        while path.read_text(encoding="utf-8").count("done\t") < runs * KILL_AT:
            assert time.monotonic() < deadline, "the workers did not get going"
            assert all(w.poll() is None for w in workers), "a worker exited before the kill"
            time.sleep(0.02)
        times["stalled"] = time.time()
        if synchronous:
            times["saves waiting"] = stall_until_a_save_waits(primary, receiver)
        else:
            os.kill(receiver, signal.SIGSTOP)
            time.sleep(lag)
        times["kill"] = time.time()
        kill(primary)
        times["killed"] = time.time()
        # The walreceiver goes on only once every process of the old primary is gone: an
        # orphan of a killed postmaster not yet scheduled since its death could still have a
        # waiting commit acknowledged by the flush report, and be counted as the new primary's.
        wait_gone(primary.children)
        if receiver_after == "kill":
            os.kill(receiver, signal.SIGKILL)
            wait_accepting(standby)
        else:
            os.kill(receiver, signal.SIGCONT)
        # From here on every acknowledged save is the new primary's: the old one is gone, and
        # since the walreceiver stopped none of its commits could be acknowledged (synchronous)
        # or each was (asynchronous) before the kill.
        times["promoting"] = time.time()
        standby.promote()
        wait_writable(standby)
        times["promoted"] = time.time()
        codes = [w.wait(timeout=240) for w in workers]
        times["drained"] = time.time()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(receiver, signal.SIGCONT)  # a stopped process would hold up the standby's shutdown
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    stderr = {
        f"w{n}": path.with_name(f"w{n}.stderr").read_text(encoding="utf-8", errors="replace")
        for n in range(WORKERS)
    }
    return Failover(Ledger.read(path), standby.url(), codes, stderr, times)


def stall_until_a_save_waits(primary: Cluster, receiver: int, tries: int = 50) -> int:
    """Stop the walreceiver ``receiver`` until at least one save waits on the primary for the
    standby's flush; how many saves wait. Writers stall within milliseconds; if the ones
    that stalled are claims or releases, let them through and stop it again."""
    for _ in range(tries):
        os.kill(receiver, signal.SIGSTOP)
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            waiting = primary.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND"
                " (query LIKE '%safepoint_save_next%' OR query LIKE '%INSERT INTO safepoint_checkpoints%')"
            )[0][0]
            if isinstance(waiting, int) and waiting > 0:
                return waiting
            time.sleep(0.005)
        os.kill(receiver, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("no save waited for the standby")


def caught_up(primary: Cluster, name: str, timeout: float = 60) -> None:
    """Until the standby ``name`` has replayed everything the primary wrote so far."""
    target = primary.execute("SELECT pg_current_wal_lsn()::text")[0][0]
    deadline = time.monotonic() + timeout
    while True:
        rows = primary.execute(
            f"SELECT replay_lsn >= '{target}'::pg_lsn FROM pg_stat_replication"
            f" WHERE application_name = '{name}'"
        )
        if rows == [(True,)]:
            return
        assert time.monotonic() < deadline, f"standby {name} did not catch up"
        time.sleep(0.02)


def wait_gone(pids: set[int], timeout: float = 60) -> None:
    """Until none of ``pids`` runs (an exited process that nobody reaped yet counts as gone)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while True:
            try:
                state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                break
            if state in ("Z", "X"):
                break
            assert time.monotonic() < deadline, "a process of the old primary outlived it"
            time.sleep(0.01)


def wait_accepting(cluster: Cluster, timeout: float = 60) -> None:
    """Until ``cluster`` answers queries again (a standby whose postmaster restarted its processes)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.execute("SELECT 1")
            return
        except Exception:
            assert time.monotonic() < deadline, f"{cluster.name} did not come back"
            time.sleep(0.05)


def stored_digests(store: safepoint.Store, run_ids: set[str]) -> dict[tuple[str, int], str]:
    """Every stored checkpoint's digest on ``store``, by run and step."""
    found: dict[tuple[str, int], str] = {}
    for run_id in run_ids:
        for info in store.history(run_id):
            found[(run_id, info.step)] = info.digest
    return found


def no_raw_tracebacks(outcome: Failover) -> None:
    raw = {worker: text[-3000:] for worker, text in outcome.stderr.items() if "Traceback" in text}
    assert not raw, raw


def figures(name: str, outcome: Failover, extra: dict[str, object]) -> dict[str, object]:
    """The scenario's figures, printed (``-s``) and returned."""
    t = outcome.times
    firsts = outcome.first_saves_after(t["promoting"])
    back = {worker: round(after + t["promoting"] - t["kill"], 3) for worker, after in sorted(firsts.items())}
    retries = sum(text.count("retrying in") for text in outcome.stderr.values())
    shown: dict[str, object] = {
        "acknowledged saves": len(outcome.ledger.acks),
        "acknowledged before the kill": sum(1 for *_, at in outcome.ledger.acks if at < t["kill"]),
        "kill took s": round(t["killed"] - t["kill"], 3),
        "kill to promoted s": round(t["promoted"] - t["kill"], 3),
        "kill to first save on the new primary s": min(back.values(), default=None),
        "kill to each worker's first save there s": back,
        "saves waiting for the standby at the kill": t.get("saves waiting"),
        "in-doubt saves that had landed": outcome.ledger.settled["landed"],
        "in-doubt saves saved again": outcome.ledger.settled["resaved"],
        "store calls retried": retries,
        "phases s": {
            "clusters up": round(t["up"] - t["began"], 1),
            "seeding": round(t["seeded"] - t["up"], 1),
            "work before the kill": round(t["kill"] - t["seeded"], 1),
            "after the kill": round(t["drained"] - t["kill"], 1),
        },
        **extra,
    }
    print(f"\n{name}: {json.dumps(shown)}")
    return shown


def nothing_lost(outcome: Failover, runs: int, reference: tuple[dict[str, object], list[str]]) -> None:
    """The synchronous standby's promise: every acknowledged save on the new primary, every run
    done once with the uninterrupted answer, and the in-doubt saves settled by the retry."""
    no_raw_tracebacks(outcome)
    assert outcome.codes == [0] * WORKERS, {w: t[-3000:] for w, t in outcome.stderr.items()}
    assert outcome.ledger.exits == WORKERS
    run_ids = {f"run-{i:04d}" for i in range(runs)}
    with safepoint.open_store(outcome.url) as store:
        stored = stored_digests(store, run_ids)
        statuses = Counter(info.status for info in store.runs(limit=runs).items)
        answers = [store.load(run_id) for run_id in sorted(run_ids)]
    missing = [
        (run, step) for run, step, digest, *_ in outcome.ledger.acks if stored.get((run, step)) != digest
    ]
    assert missing == []
    assert statuses == {Status.DONE: runs}
    assert set(outcome.ledger.done) == run_ids
    assert max(outcome.ledger.done.values()) == 1
    state, messages = reference
    for cp in answers:
        assert cp.state == state
        assert [m["content"] for m in cp.messages] == messages
    assert sum(outcome.ledger.settled.values()) >= 1, "no save was in doubt at the kill"


def test_sync_standby_promoted_after_immediate_stop_loses_nothing_acknowledged(
    tmp_path: Path, reference: tuple[dict[str, object], list[str]]
) -> None:
    """Sync standby, `pg_ctl stop -m immediate` mid-save, promoted: 0 acknowledged lost, 0 twice."""
    runs = 300
    with clusters() as kit:
        outcome = failover(
            kit,
            tmp_path,
            runs=runs,
            synchronous=True,
            kill=lambda p: p.stop("immediate"),
            receiver_after="resume",
        )
        figures("sync standby, immediate stop", outcome, {"runs": runs})
        nothing_lost(outcome, runs, reference)


def test_sync_standby_promoted_after_postmaster_sigkill_loses_nothing_acknowledged(
    tmp_path: Path, reference: tuple[dict[str, object], list[str]]
) -> None:
    """Sync standby, the postmaster SIGKILLed alone, promoted: 0 acknowledged lost, 0 twice."""
    runs = 300  # the size for a SIGKILL under 4 workers
    with clusters() as kit:
        outcome = failover(
            kit, tmp_path, runs=runs, synchronous=True, kill=Cluster.kill_postmaster, receiver_after="resume"
        )
        figures("sync standby, postmaster SIGKILL", outcome, {"runs": runs})
        nothing_lost(outcome, runs, reference)


def test_async_standby_with_lag_verifies_and_every_run_ends(tmp_path: Path) -> None:
    """Async standby lagging at the kill: verify clean, every run ends typed; losses measured."""
    runs, lag = 150, 0.5
    with clusters() as kit:
        outcome = failover(
            kit,
            tmp_path,
            runs=runs,
            synchronous=False,
            kill=lambda p: p.stop("immediate"),
            receiver_after="kill",
            lag=lag,
        )
        run_ids = {f"run-{i:04d}" for i in range(runs)}
        with safepoint.open_store(outcome.url) as store:
            stored = stored_digests(store, run_ids)
            infos = store.runs(limit=runs).items
        checked = subprocess.run(
            [SAFEPOINT, "verify", "--store", outcome.url, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    acks = outcome.ledger.acks
    lost = [(run, step) for run, step, digest, *_ in acks if stored.get((run, step)) != digest]
    in_lag = sum(1 for *_, at in acks if outcome.times["stalled"] <= at < outcome.times["kill"])
    repeated = sum(1 for n in outcome.ledger.done.values() if n > 1)
    statuses = Counter(info.status for info in infos)
    figures(
        "async standby, walreceiver stopped, immediate stop",
        outcome,
        {
            "runs": runs,
            "lag s": lag,
            "acknowledged during the lag": in_lag,
            "acknowledged saves lost": len(lost),
            "runs done twice": repeated,
            "statuses": {str(s): n for s, n in statuses.items()},
        },
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["failures"] == []
    no_raw_tracebacks(outcome)
    assert outcome.codes == [0] * WORKERS, {w: t[-3000:] for w, t in outcome.stderr.items()}
    assert set(statuses) <= {Status.DONE, Status.FAILED}, statuses
    for info in infos:
        if info.status is Status.FAILED:  # a typed error, recorded as "Type: message"
            kind = getattr(errors, (info.last_error or "").split(":")[0], None)
            assert isinstance(kind, type), info.last_error
            assert issubclass(kind, SafepointError), info.last_error
    assert set(outcome.ledger.done) <= run_ids
    # A run done on the new primary was done by a worker that wrote it down.
    assert {info.run_id for info in infos if info.status is Status.DONE} <= set(outcome.ledger.done)


def test_a_worker_started_while_no_host_accepts_writes_waits_for_the_promotion(
    tmp_path: Path, reference: tuple[dict[str, object], list[str]]
) -> None:
    """A worker opening the store mid-failover (primary gone, standby not promoted) rides it out."""
    with clusters() as kit:
        primary = kit.primary()
        standby = kit.standby(primary, name="standby1")
        url = multi_host_url(primary, standby)
        with safepoint.open_store(url) as store:
            store.save(Checkpoint(run_id="late"))
            store.enqueue("late")
        caught_up(primary, "standby1")
        primary.stop("immediate")
        path = tmp_path / "ledger.tsv"
        worker = spawn(url, path, "late")
        try:
            said = path.with_name("late.stderr")
            deadline = time.monotonic() + 120
            # Promoted only once the worker's open has failed and is being retried.
            while "open: PostgreSQL connection failed" not in said.read_text(encoding="utf-8"):
                assert worker.poll() is None, said.read_text(encoding="utf-8")[-3000:]
                assert time.monotonic() < deadline, "the worker never tried to open the store"
                time.sleep(0.05)
            standby.promote()
            assert worker.wait(timeout=120) == 0, said.read_text(encoding="utf-8")[-3000:]
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert "Traceback" not in said.read_text(encoding="utf-8")
        assert Ledger.read(path).done == Counter({"late": 1})
        with safepoint.open_store(standby.url()) as store:
            cp = store.load("late")
        assert (cp.state, [m["content"] for m in cp.messages]) == reference
