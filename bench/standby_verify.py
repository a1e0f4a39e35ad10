"""How long ``safepoint verify`` takes on a hot standby, and what bounds one of its transactions.

A primary and two streaming standbys of the script's own (``tests/pg_clusters.py``: initdb,
pg_basebackup, free ports, removed at the end): one with the default
``max_standby_streaming_delay`` (30 s), one with 0 (every conflicting query cancelled at once).
The primary is filled with ``--runs`` runs of ``--steps`` steps (each step one new message and a
changed state), then ``safepoint verify --json`` runs as a subprocess against the primary and the
standby, timed, and the standby's committed transactions counted (``pg_stat_database``): verify
reads in a transaction per call, so the streaming delay bounds one load, not the walk. Last, verify
runs on the eager standby while the primary deletes and vacuums a scratch table in a loop, and the
reader's retries are counted (its stderr's "retrying" lines).

    sudo PYTHONPATH=src .venv/bin/python bench/standby_verify.py --runs 300 --steps 20

Needs root (the servers run as the ``postgres`` user) and PostgreSQL's server tools.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import safepoint  # noqa: E402
from pg_clusters import Cluster, clusters  # noqa: E402
from safepoint import Checkpoint  # noqa: E402

SAFEPOINT = str(Path(sys.executable).with_name("safepoint"))


def fill(url: str, runs: int, steps: int, threads: int = 8) -> None:
    def one(n: int) -> None:
        cp = Checkpoint(run_id=f"run-{n}", messages=[{"role": "user", "content": f"task {n} " * 20}])
        store.save(cp)
        for step in range(1, steps):
            cp = cp.next()
            cp.messages.append({"role": "assistant", "content": f"step {step} of run {n} " * 20})
            cp.state["step"] = step
            store.save(cp)

    with safepoint.open_store(url, max_size=threads) as store, ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(runs)))


def replayed(primary: Cluster, *standbys: Cluster) -> None:
    primary.execute("SELECT pg_current_xact_id()")
    lsn = primary.execute("SELECT pg_current_wal_insert_lsn()")[0][0]
    for standby in standbys:
        while standby.execute(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'") != [(True,)]:
            time.sleep(0.05)


def commits(cluster: Cluster) -> int:
    return int(cluster.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")[0][0])  # type: ignore[call-overload]


def verify(url: str) -> tuple[float, dict[str, object], str]:
    started = time.monotonic()
    done = subprocess.run(
        [SAFEPOINT, "verify", "--json", "--store", url], capture_output=True, text=True, check=False
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"verify exited {done.returncode}: {done.stderr[-2000:]}")
    return took, json.loads(done.stdout), done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with clusters() as kit:
        primary = kit.primary()
        standby = kit.standby(primary, name="reader")
        eager = kit.standby(primary, name="eager", settings={"max_standby_streaming_delay": "0"})
        started = time.monotonic()
        fill(primary.url(), args.runs, args.steps)
        print(f"filled {args.runs} runs x {args.steps} steps in {time.monotonic() - started:.1f} s")
        primary.execute("CREATE TABLE churn (n int)")
        replayed(primary, standby, eager)
        took, result, _ = verify(primary.url())
        failed = len(result["failures"])  # type: ignore[arg-type]
        print(f"verify on the primary: {took:.2f} s, {result['checked']} checkpoints, {failed} failed")
        before = commits(standby)
        took, result, _ = verify(standby.url())
        transactions = commits(standby) - before
        print(
            f"verify on the standby: {took:.2f} s, {result['checked']} checkpoints,"
            f" {len(result['failures'])} failed, {transactions} transactions"  # type: ignore[arg-type]
        )
        stop = threading.Event()
        cycles = 0

        def churn() -> None:
            nonlocal cycles
            while not stop.is_set():
                primary.execute("INSERT INTO churn SELECT generate_series(1, 1000)")
                primary.execute("DELETE FROM churn")
                primary.execute("VACUUM churn")
                cycles += 1

        churner = threading.Thread(target=churn)
        churner.start()
        try:
            took, result, err = verify(eager.url())
        finally:
            stop.set()
            churner.join()
        retries = err.count("retrying")
        conflicts = eager.execute(
            "SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = 'postgres'"
        )[0][0]
        print(
            f"verify on the eager standby under {cycles} delete+VACUUM cycles: {took:.2f} s,"
            f" {result['checked']} checkpoints, {len(result['failures'])} failed,"  # type: ignore[arg-type]
            f" {retries} retries, confl_snapshot {conflicts}"
        )


if __name__ == "__main__":
    main()
