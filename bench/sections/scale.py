"""Scale: many queued runs, many worker processes, one PostgreSQL server (issue 14).

    .venv/bin/python bench/run.py --scale-only            # this section alone, printed
    .venv/bin/python bench/run.py --scale-only --scale-runs 2000 --scale-workers 8

10,000 runs are queued (step 0 saved and ``enqueue``d) in a template
database; each pass clones it into a fresh database (``CREATE DATABASE …
TEMPLATE``), so every pass starts from the same queue, and drops it
afterwards. Then 32 worker processes (``scale_worker.py``) each open a store
whose pool is sized so that all of them fit the server's ``max_connections``
beside the connections already open, make one round trip, and wait at a
barrier; the clock starts when the parent releases them all at once. Each
worker is a ``safepoint.Worker`` whose handler saves a few short steps with
``job.save`` and returns ``DONE``.

Claim latency is timed inside the workers around ``store.claim``; the parent
orders every claim that took a run by its start (one monotonic clock on the
machine) and compares the first 1,000 with the last 1,000. "Claimed twice"
counts a run claimed again while an earlier lease on it was still unexpired
(a reclaim after a lease expired is the queue working as designed, counted
apart); "done twice" counts runs the handler finished more than once. Both
must be 0, and every run must end ``done`` at its last step.

The same workload then runs through a real PgBouncer in transaction mode
(``tests/pgbouncer.py``), the workers' pools pointing at it and PgBouncer's
server pool sized to ``--scale-bouncer-pool``.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pg_server
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import safepoint

WORKER = Path(__file__).resolve().parent / "scale_worker.py"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import pgbouncer  # noqa: E402  # the tests' PgBouncer fixture, shared rather than copied

WINDOW = 1000  # claims compared at the start and at the end
TARGET = 1.5  # p99 of the last WINDOW claims / p99 of the first WINDOW
MARGIN = 10  # connections left free for everyone else on the server
PER_WORKER = 2  # a Worker holds at most 2: its loop and its heartbeat thread


@dataclass
class Pass:
    """One pass of the workload, direct or through PgBouncer."""

    label: str
    runs: int
    workers: int
    steps: int
    pool_per_worker: int
    bouncer_pool: int | None
    seconds: float = 0.0  # barrier released → last run released
    claims: list[list[Any]] = field(default_factory=list)
    empty_claims: int = 0
    saves: list[float] = field(default_factory=list)
    claimed_twice: int = 0
    reclaimed_after_expiry: int = 0
    done_twice: int = 0
    not_done: int = 0
    server_cpu: float = 0.0  # CPU seconds of the server backends connected to this pass's database
    worker_cpu: float = 0.0  # ... of the worker processes, from the barrier to their exit
    bouncer_cpu: float | None = None  # ... of the PgBouncer process
    machine: pg_server.CpuSample = pg_server.ZERO  # the whole machine (others' work included)
    claim_pages: tuple[int, int] = (0, 0)  # buffer pages the claim's scan touches: at go, at the end

    def window(self, last: bool) -> list[float]:
        size = min(WINDOW, len(self.claims) // 2)
        chosen = self.claims[-size:] if last else self.claims[:size]
        return sorted(claim[1] for claim in chosen)

    @property
    def ratio(self) -> float:
        first = quantile(self.window(False), 0.99)
        return quantile(self.window(True), 0.99) / first if first else float("inf")

    @property
    def passed(self) -> bool:
        return (
            self.ratio <= TARGET and self.claimed_twice == 0 and self.done_twice == 0 and self.not_done == 0
        )


@dataclass
class Result:
    passes: list[Pass]
    fill_seconds: float
    max_connections: int
    in_use: int
    skipped: list[str]


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank quantile of sorted ``values`` (0 when empty)."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]


def run(
    url: str,
    *,
    runs: int = 10_000,
    workers: int = 32,
    steps: int = 2,
    lease: float = 30.0,
    bouncer_pool: int = 16,
    through_pgbouncer: bool = True,
) -> Result | str:
    """Both passes; a string saying why when the server cannot be used."""
    why = pg_server.unreachable(url)
    if why is not None:
        return f"PostgreSQL unreachable: {why}"
    max_connections, in_use = _connections(url)
    per_worker = min(PER_WORKER, (max_connections - in_use - MARGIN) // workers)
    if per_worker < 1:
        return f"{workers} workers do not fit max_connections={max_connections} ({in_use} in use)"
    skipped: list[str] = []
    passes: list[Pass] = []
    with _database(url, "tpl") as template:
        fill_seconds = _fill(template, runs)
        _log(f"scale: {runs:,} runs queued in {fill_seconds:.1f}s")
        with _database(url, "direct", template=template) as direct:
            passes.append(
                _pass(
                    "PostgreSQL",
                    direct,
                    check=direct,
                    options={},
                    runs=runs,
                    workers=workers,
                    steps=steps,
                    lease=lease,
                    per_worker=per_worker,
                    bouncer_pool=None,
                )
            )
        if not through_pgbouncer:
            skipped.append("PgBouncer pass skipped (--scale-no-pgbouncer)")
        elif pgbouncer.find_pgbouncer() is None:
            skipped.append("PgBouncer pass skipped: no pgbouncer binary (make bench installs it)")
        else:
            with (
                _database(url, "bouncer", template=template) as target,
                pgbouncer.started_pgbouncer(target, pool_size=bouncer_pool) as bouncer,
            ):
                options = {"prepare_threshold": None}  # PgBouncer 1.18: no prepared statements
                label = f"PgBouncer (transaction mode, {bouncer_pool} server connections)"
                passes.append(
                    _pass(
                        label,
                        bouncer.dsn,
                        check=target,
                        options=options,
                        runs=runs,
                        workers=workers,
                        steps=steps,
                        lease=lease,
                        per_worker=per_worker,
                        bouncer_pool=bouncer_pool,
                        bouncer_pid=bouncer.pid,
                    )
                )
    return Result(passes, fill_seconds, max_connections, in_use, skipped)


def _connections(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int,"
            " current_setting('superuser_reserved_connections')::int,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]) + int(row[2])


@contextmanager
def _database(url: str, label: str, *, template: str | None = None) -> Iterator[str]:
    """A fresh database (a clone of ``template``'s when given); yields its URL, drops it afterwards."""
    name = f"bench_scale_{label}_{os.getpid()}_{secrets.token_hex(3)}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        source = str(conninfo_to_dict(template)["dbname"])
        create = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(source)
        )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(create)
    params = conninfo_to_dict(url)
    user = params.get("user", "postgres")
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    target = f"postgresql://{user}@{host}:{port}/{name}"
    try:
        yield target
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _fill(url: str, runs: int) -> float:
    """Queue ``runs`` runs at step 0 from 8 threads; the seconds it took."""
    began = time.perf_counter()
    with safepoint.open_store(url, max_size=8) as store:

        def fill(start: int) -> None:
            for number in range(start, runs, 8):
                cp = safepoint.Checkpoint(run_id=f"scale-{number:06d}", labels={"bench": "scale"})
                cp.messages.append({"role": "user", "content": f"ticket {number}: look this up"})
                store.save(cp)
                store.enqueue(cp.run_id)

        threads = [threading.Thread(target=fill, args=(start,)) for start in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return time.perf_counter() - began


def _pass(
    label: str,
    url: str,
    *,
    check: str,
    options: dict[str, Any],
    runs: int,
    workers: int,
    steps: int,
    lease: float,
    per_worker: int,
    bouncer_pool: int | None,
    bouncer_pid: int | None = None,
) -> Pass:
    result = Pass(label, runs, workers, steps, per_worker, bouncer_pool)
    with tempfile.TemporaryDirectory(prefix="sp-scale-") as folder:
        children = []
        spawned = time.monotonic()
        for index in range(workers):
            spec = {
                "url": url,
                "options": {"min_size": per_worker, "max_size": per_worker, **options},
                "worker_id": f"scale-worker-{index}",
                "steps": steps,
                "lease": lease,
                "out": str(Path(folder) / f"worker-{index}.json"),
            }
            children.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), json.dumps(spec)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for child in children:  # the barrier: every worker connected
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a scale worker failed to start (exit {child.wait()})")
        _log(
            f"scale ({label}): {workers} workers connected in {time.monotonic() - spawned:.1f}s,"
            f" {per_worker} connections each; go"
        )
        backends = _backends(check)
        pages_at_go = _claim_pages(check)
        watched = backends + ([bouncer_pid] if bouncer_pid is not None else [])
        before, machine = _cpu(watched), pg_server.sample([])
        go = time.monotonic()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        _wait_done(check, runs, children)
        # Before the workers exit, while their backends are still there; a backend that
        # connected during the pass (PgBouncer opens server connections lazily) counts whole.
        backends = sorted(set(backends) | set(_backends(check)))
        after = _cpu(backends + ([bouncer_pid] if bouncer_pid is not None else []))
        result.machine = pg_server.sample([]) - machine
        result.claim_pages = (pages_at_go, _claim_pages(check))
        result.server_cpu = sum(after.get(pid, 0.0) - before.get(pid, 0.0) for pid in backends)
        if bouncer_pid is not None:
            result.bouncer_cpu = after.get(bouncer_pid, 0.0) - before.get(bouncer_pid, 0.0)
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait(timeout=120)
        codes = [child.returncode for child in children]
        if any(codes):
            raise RuntimeError(f"scale workers exited with {codes}")
        outputs = [json.loads(path.read_text()) for path in sorted(Path(folder).glob("worker-*.json"))]
    result.seconds = max(out["last_done"] for out in outputs) - go
    result.claims = sorted((claim for out in outputs for claim in out["claims"]), key=lambda claim: claim[0])
    result.empty_claims = sum(len(out["empty"]) for out in outputs)
    result.worker_cpu = sum(out["cpu"] for out in outputs)
    result.saves = sorted(seconds for out in outputs for seconds in out["saves"])
    handled = Counter(run_id for out in outputs for run_id in out["handled"])
    result.done_twice = sum(1 for count in handled.values() if count > 1)
    result.claimed_twice, result.reclaimed_after_expiry = _double_claims(result.claims)
    result.not_done = _not_done(check, runs, steps)
    _log(
        f"scale ({label}): {runs / result.seconds:,.0f} runs/s, claim p99 last/first {result.ratio:.2f}x,"
        f" claimed twice {result.claimed_twice}, not done {result.not_done}"
    )
    return result


def _wait_done(url: str, runs: int, children: list[subprocess.Popen[str]], timeout: float = 900) -> None:
    """Until every run is done (or a worker died, or ``timeout``)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM safepoint.safepoint_runs WHERE status = 'done'"
            ).fetchone()
            if row is not None and row[0] >= runs:
                return
            if any(child.poll() is not None for child in children):
                return
            time.sleep(0.25)
    _log("scale: not every run was done in time")


def _backends(url: str) -> list[int]:
    """The server processes connected to ``url``'s database, but for this query's own."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [int(row[0]) for row in rows]


def _claim_pages(url: str) -> int:
    """Buffer pages the claim's search for the oldest claimable run reads now (EXPLAIN ANALYZE).

    The same search as the claim statement's subquery, without its row lock;
    an index entry of a run that left the queue stays until vacuum, so this
    is what grows if anything in the claim's cost does.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id FROM safepoint.safepoint_runs"
            " WHERE queued_at IS NOT NULL AND (lease_owner IS NULL OR lease_expires_at <= now())"
            " ORDER BY queued_at, id LIMIT 1"
        ).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def _cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds (user + system) each live process of ``pids`` has used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return out


def _double_claims(claims: list[list[Any]]) -> tuple[int, int]:
    """(claims of a run while an earlier lease on it was unexpired, reclaims after one expired)."""
    by_run: dict[str, list[list[Any]]] = defaultdict(list)
    for claim in claims:
        by_run[claim[2]].append(claim)
    twice = after_expiry = 0
    for taken in by_run.values():
        taken.sort(key=lambda claim: claim[3])  # by epoch
        for earlier, later in itertools.pairwise(taken):
            if later[5] < earlier[4]:
                twice += 1
            else:
                after_expiry += 1
    return twice, after_expiry


def _not_done(url: str, runs: int, steps: int) -> int:
    """Runs that are not ``done`` at their last step (missing runs count too)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM safepoint.safepoint_runs WHERE status = 'done' AND head_step = %s",
            (steps,),
        ).fetchone()
    assert row is not None
    return runs - int(row[0])


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
