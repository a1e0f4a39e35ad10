"""Tenants on PostgreSQL (issue 38): the fair claim's cost, fairness at scale, and what RLS costs.

    make bench SECTION=tenants      # or: .venv/bin/python bench/run.py --section tenants

Row-level security never stops a superuser, so the store runs here as roles
the section makes on the server (``tests/test_tenants_postgres.py``'s
layout, ``safepoint.store.postgres.roles``): an owner (NOSUPERUSER) that
applies the DDL revisions in schemas it owns, and an application role
(NOSUPERUSER, no BYPASSRLS) granted ``grant_statements``; every figure is
the application role's. Roles and schemas have unique names and are dropped
at the end, failure or not (roles are cluster-wide objects).

1. **The claim with 100 tenants** (one of which, ``t050``, holds the queued
   runs) through ``FairClaims`` against one tenant's plain ``store.claim``:
   each side a store of its own with a pool of one connection, blocks of
   ``BLOCK`` claims taking turns; the claimed runs are released (done)
   after each block, outside the counted span. Statements per claim are
   ``FairClaims.claims + FairClaims.looks`` over the runs claimed (1 for the
   plain claim). Server CPU: the side's own backend (``/proc/<pid>/schedstat``,
   nanoseconds; ``stat``'s ticks beside it), client CPU: the thread's time.
2. **Fairness**: two tenants with ``BIG`` and ``SMALL`` queued runs (the big
   tenant's queued first), ``WORKERS`` threads each with its own
   ``FairClaims`` over one store (the pool shared, as one worker process's
   threads would), each claiming, then releasing the run as done, until
   nothing is claimable. Claims are numbered in the order they returned.
3. **RLS on against RLS off**: the same role, two schemas, one with the
   tenant tables as revision 12 leaves them (RLS enabled and forced), one
   with ``ALTER TABLE … DISABLE ROW LEVEL SECURITY`` on each. A save of the
   next step in place (``save_next`` alone: two 500-character messages a
   step, ``floor_pg``'s workload) and a claim, heartbeat and release
   (requeue) cycle over ``QUEUE`` runs, each in blocks taking turns across
   the sides. The store sends each of claim, heartbeat and release as a
   call of a schema function that takes the tenant first (DDL revision 12,
   since 3a71fcc), alone. Beside them, **the UPDATE alone** (``Raw``,
   the baseline): the claim, heartbeat and release UPDATEs as they were
   before (``BEFORE_FUNCTIONS``, kept here: queries.sql at 3a71fcc^, the
   schema named), each alone and prepared on an autocommit connection whose
   *session* sets the tenant (``options=-c safepoint.tenant=…``) — no
   BEGIN, settings statement or COMMIT; and the same UPDATEs as the store
   sent them before 3a71fcc: BEGIN, the settings statement, the UPDATE and
   COMMIT in one pipeline.
   Round trips: the client socket's ``tcpi_data_segs_out`` and
   ``tcpi_data_segs_in`` (``TCP_INFO``) per call — on loopback each flush of
   the client, and each reply of the server, is one segment.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import machine
import pg_server
import psycopg
from psycopg import sql

import safepoint
from safepoint.store.postgres import statements
from safepoint.store.postgres.roles import TENANT_TABLES, grant_statements
from safepoint.worker.fair import FairClaims

X = chr(215)
BLOCK = 50
TENANTS = 100
BUSY = "t050"
CLAIMS = 2000  # measured claims per side (part 1)
WARM = 100
BIG, SMALL, WORKERS = 5000, 20, 8
SAVES = 2000  # measured saves per side (part 3)
CYCLES = 2000  # measured claim / heartbeat / release calls per side (part 3)
QUEUE = BLOCK  # runs in each side's queue (part 3)
SIZE = 500
LEASE = 600.0
_TICKS = os.sysconf("SC_CLK_TCK")


# -- what /proc and the socket say ------------------------------------------------------------


def _backend(pid: int) -> tuple[float, float]:
    """(utime + stime ticks, schedstat run time) of a backend, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return (int(fields[11]) + int(fields[12])) / _TICKS, ns / 1e9


def _segments(fd: int) -> tuple[int, int]:
    """(data segments sent, data segments received) on a TCP socket (``tcp_info``)."""
    sock = socket.socket(fileno=fd)
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    finally:
        sock.detach()
    segs_in, segs_out = struct.unpack_from("II", info, 152)
    return int(segs_out), int(segs_in)


@dataclass(slots=True)
class Tally:
    """One side's counted calls of one kind."""

    ops: int = 0
    stat: float = 0.0
    sched: float = 0.0
    client: float = 0.0
    sends: int = 0
    replies: int = 0
    statements: int = 0
    blocks: list[float] = field(default_factory=list)  # server CPU (schedstat) per op, block by block

    def per_op(self) -> dict[str, Any]:
        n = max(self.ops, 1)
        return {
            "blocks": [1e6 * b for b in self.blocks],
            "ops": self.ops,
            "server_us": 1e6 * self.sched / n,
            "server_stat_us": 1e6 * self.stat / n,
            "client_us": 1e6 * self.client / n,
            "sends": self.sends / n,
            "replies": self.replies / n,
            "statements": self.statements / n,
        }


@dataclass(slots=True)
class Conn:
    """The one connection a side's calls go through: its backend's pid and its socket."""

    pid: int
    fd: int

    @classmethod
    def of_store(cls, store: safepoint.Store) -> Conn:
        with store.driver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's only one
            return cls.of(conn)

    @classmethod
    def of(cls, conn: psycopg.Connection[Any]) -> Conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return cls(int(row[0]), conn.pgconn.socket)

    @contextmanager
    def counted(self, tally: Tally, ops: int) -> Iterator[None]:
        (stat, sched), (out, got), client = _backend(self.pid), _segments(self.fd), time.thread_time()
        yield
        client = time.thread_time() - client
        (stat2, sched2), (out2, got2) = _backend(self.pid), _segments(self.fd)
        tally.stat += stat2 - stat
        tally.sched += sched2 - sched
        tally.client += client
        tally.sends += out2 - out
        tally.replies += got2 - got
        tally.ops += ops
        tally.blocks.append((sched2 - sched) / ops)


# -- the roles --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Roles:
    dsn: str  # the superuser's
    owner: str
    app: str
    schemas: list[str] = field(default_factory=list)

    def url(self, role: str) -> str:
        return re.sub(r"^postgresql://[^@/]*@", f"postgresql://{role}@", self.dsn)

    def schema(self, name: str, *, rls: bool = True) -> str:
        """A schema the owner owns, with the store's tables (the owner applies the DDL revisions)
        and the application role's grants; ``rls=False``: row-level security disabled on the
        tenant tables."""
        schema = f"bench_tenants_{name}_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(schema), sql.Identifier(self.owner)
                )
            )
        self.schemas.append(schema)
        safepoint.open_store(self.url(self.owner), schema=schema, min_size=0, max_size=1).close()
        with psycopg.connect(self.url(self.owner), autocommit=True) as conn:
            for grant in grant_statements(schema, app=self.app):
                conn.execute(grant)
            if not rls:
                for table in TENANT_TABLES:
                    conn.execute(
                        sql.SQL("ALTER TABLE {} DISABLE ROW LEVEL SECURITY").format(
                            sql.Identifier(schema, table)
                        )
                    )
        return schema

    def store(self, schema: str, tenant: str | None = None, *, pool: int = 1) -> safepoint.Store:
        options: dict[str, Any] = {"min_size": 1, "max_size": pool}
        if tenant is not None:
            options["tenant"] = tenant
        return safepoint.open_store(self.url(self.app), schema=schema, **options)


@contextmanager
def roles(dsn: str) -> Iterator[Roles]:
    tag = secrets.token_hex(5)
    made = Roles(dsn, f"sp_bench_{tag}_owner", f"sp_bench_{tag}_app")
    created: list[str] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for role in (made.owner, made.app):
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(sql.Identifier(role))
                )
                created.append(role)
        yield made
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in made.schemas:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            for role in created:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _queue(store: safepoint.Store, runs: int, prefix: str = "r") -> None:
    for i in range(runs):
        run_id = f"{prefix}{i:05d}"
        store.save(safepoint.Checkpoint(run_id=run_id))
        store.enqueue(run_id)


# -- 1. the claim with 100 tenants -------------------------------------------------------------


def claims(r: Roles, log: Callable[[str], None]) -> dict[str, Any]:
    schema = r.schema("claims")
    fair_store, solo = r.store(schema), r.store(schema, "solo")
    try:
        names = [f"t{i:03d}" for i in range(TENANTS)]
        fair = FairClaims(fair_store, names)
        runs = WARM + CLAIMS
        _queue(fair.handle(BUSY), runs)
        _queue(solo, runs)
        log(f"tenants: {runs:,} runs queued in {BUSY} (of {TENANTS} tenants) and in one tenant")
        fair_conn, solo_conn = Conn.of_store(fair_store), Conn.of_store(solo)
        sides = {"fair": Tally(), "plain": Tally()}

        def fair_block(n: int, tally: Tally) -> None:
            before = fair.claims + fair.looks
            taken: list[tuple[safepoint.Store, Any]] = []
            with fair_conn.counted(tally, n):
                for _ in range(n):
                    got = fair.claim("w", lease=LEASE)
                    assert got is not None
                    taken.append(got)
            tally.statements += fair.claims + fair.looks - before
            for handle, lease in taken:
                handle.release(lease, status="done")

        def plain_block(n: int, tally: Tally) -> None:
            taken = []
            with solo_conn.counted(tally, n):
                for _ in range(n):
                    lease = solo.claim("w", lease=LEASE)
                    assert lease is not None
                    taken.append(lease)
            tally.statements += n
            for lease in taken:
                solo.release(lease, status="done")

        for _ in range(0, WARM, BLOCK):
            fair_block(BLOCK, Tally())
            plain_block(BLOCK, Tally())
        for _ in range(0, CLAIMS, BLOCK):
            fair_block(BLOCK, sides["fair"])
            plain_block(BLOCK, sides["plain"])
        return {"fair": sides["fair"].per_op(), "plain": sides["plain"].per_op(), "looks": fair.looks}
    finally:
        fair_store.close()
        solo.close()


# -- 2. fairness at scale ----------------------------------------------------------------------


def fairness(r: Roles, log: Callable[[str], None]) -> dict[str, Any]:
    schema = r.schema("fair")
    store = r.store(schema, pool=WORKERS)
    try:
        _queue(store.for_tenant("big"), BIG)
        _queue(store.for_tenant("small"), SMALL)
        log(f"tenants: {BIG:,} and {SMALL} runs queued; {WORKERS} workers claiming")
        order: list[tuple[str, str]] = []
        lock = threading.Lock()
        errors: list[BaseException] = []
        looks: list[int] = []

        def worker(index: int) -> None:
            fair = FairClaims(store, ["big", "small"])
            try:
                while (got := fair.claim(f"w{index}", lease=LEASE)) is not None:
                    handle, lease = got
                    with lock:
                        order.append((handle.tenant, lease.run_id))
                    handle.release(lease, status="done")
            except BaseException as exc:  # reported by the parent
                errors.append(exc)
            finally:
                looks.append(fair.looks)

        began = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        if errors:
            raise errors[0]
        small = [i + 1 for i, (tenant, _) in enumerate(order) if tenant == "small"]
        return {
            "claimed": len(order),
            "distinct": len(set(order)),
            "twice": len(order) - len(set(order)),
            "small_claimed": len(small),
            "small_last": small[-1] if small else None,
            "small_first": small[0] if small else None,
            "seconds": seconds,
            "looks": sum(looks),
        }
    finally:
        store.close()


# -- 3. RLS on and off, and the UPDATE alone --------------------------------------------------


def _steps(n: int) -> list[list[dict[str, Any]]]:
    from sections.floor_pg import workload  # noqa: PLC0415 - the floor section's workload (it imports PgBouncer's helper)

    return [step.messages for step in workload(n, SIZE)]


class Side:
    """One schema's store (a pool of one): a run saved in place, and a queue of ``QUEUE`` runs."""

    def __init__(self, r: Roles, schema: str) -> None:
        self.store = r.store(schema, "a")
        self.cp = safepoint.Checkpoint(run_id="saved")
        self.store.save(self.cp)
        _queue(self.store, QUEUE)
        self.conn = Conn.of_store(self.store)
        self.tallies = {name: Tally() for name in ("save", "claim", "heartbeat", "release")}

    def saves(self, steps: list[list[dict[str, Any]]], tally: Tally) -> None:
        with self.conn.counted(tally, len(steps)):
            for messages in steps:
                self.cp.step += 1
                self.cp.messages.extend(messages)
                self.cp.counters["turns"] = self.cp.step
                self.store.save(self.cp)

    def cycle(self, n: int, tallies: dict[str, Tally]) -> None:
        leases = []
        with self.conn.counted(tallies["claim"], n):
            for _ in range(n):
                leases.append(self.store.claim("w", lease=LEASE))
        with self.conn.counted(tallies["heartbeat"], n):
            beats = [self.store.heartbeat(lease) for lease in leases]  # type: ignore[arg-type]
        with self.conn.counted(tallies["release"], n):
            for lease in beats:
                self.store.release(lease, requeue=True)

    def close(self) -> None:
        self.store.close()


# The baseline: the claim, heartbeat and release UPDATEs as the store sent them before they became
# schema functions (src/safepoint/store/postgres/queries.sql at 3a71fcc^), the tenant filter read
# from the setting as it was then. ``{schema}`` is filled with the schema's quoted name.
BEFORE_FUNCTIONS = {
    "claim": """
UPDATE {schema}.safepoint_runs
SET lease_owner = %(worker_id)s, lease_epoch = lease_epoch + 1,
    lease_expires_at = 'epoch'::timestamptz + %(expires_at)s::bigint * interval '1 microsecond',
    attempts = attempts + 1, retry_at = NULL
WHERE id = (
    SELECT id FROM {schema}.safepoint_runs
    WHERE tenant = current_setting('safepoint.tenant') AND queued_at IS NOT NULL
      AND (lease_owner IS NULL
           OR lease_expires_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
      AND (retry_at IS NULL
           OR retry_at <= 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
      AND schema_version <= %(max_version)s::integer
      AND (%(held_limit)s::bigint IS NULL
           OR (SELECT count(*) FROM {schema}.safepoint_runs
               WHERE tenant = current_setting('safepoint.tenant') AND lease_owner IS NOT NULL
                 AND lease_expires_at > 'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
              < %(held_limit)s::bigint)
    ORDER BY queued_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING run_id, lease_epoch, (extract(epoch FROM lease_expires_at) * 1000000)::bigint, attempts, status
""",
    "heartbeat": """
UPDATE {schema}.safepoint_runs
SET lease_expires_at = 'epoch'::timestamptz + %(expires_at)s::bigint * interval '1 microsecond'
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s AND lease_owner = %(worker_id)s
  AND lease_epoch = %(epoch)s::bigint
RETURNING (extract(epoch FROM lease_expires_at) * 1000000)::bigint
""",
    "release": """
UPDATE {schema}.safepoint_runs
SET lease_owner = NULL, lease_expires_at = NULL,
    queued_at = CASE WHEN %(requeue)s::boolean
                     THEN coalesce(queued_at,
                                   'epoch'::timestamptz + %(now)s::bigint * interval '1 microsecond')
                END,
    status = coalesce(%(status)s::text, status),
    status_change = CASE WHEN %(status)s::text IS NULL THEN status_change
                         ELSE json_build_object('by', 'release', 'status', %(status)s::text,
                                                'epoch', %(epoch)s::bigint)::text END,
    attempts = CASE %(attempts)s::text WHEN 'reset' THEN 0
                                      WHEN 'uncount' THEN greatest(attempts - 1, 0)
                                      ELSE attempts END,
    retry_at = 'epoch'::timestamptz + %(retry_at)s::bigint * interval '1 microsecond',
    last_error = CASE WHEN %(attempts)s::text = 'reset' THEN NULL
                      ELSE coalesce(%(error)s::text, last_error) END
WHERE tenant = current_setting('safepoint.tenant') AND run_id = %(run_id)s AND lease_owner = %(worker_id)s
  AND lease_epoch = %(epoch)s::bigint
RETURNING id
""",
}


class Raw:
    """The claim, heartbeat and release UPDATEs as they were before they became schema functions
    (``BEFORE_FUNCTIONS``), on a psycopg connection of their own, as the application role, in one
    of two ways:

    * ``alone`` (the baseline): each UPDATE alone on the autocommit connection, prepared, the tenant
      set by the *session* (``options=-c safepoint.tenant=…``): no BEGIN, settings statement or
      COMMIT;
    * ``piped``: BEGIN, the store's settings statement, the UPDATE and COMMIT in one pipeline, the
      way the store sent these calls before 3a71fcc — the four statements without the store's Python.
    """

    def __init__(self, r: Roles, schema: str, way: str) -> None:
        self.way = way
        tenant = f"raw_{way}"
        with r.store(schema, tenant) as store:
            _queue(store, QUEUE)
            self.max_version = store.settings.schema_version
        options: dict[str, Any] = {"options": f"-c safepoint.tenant={tenant}"} if way == "alone" else {}
        self.db = psycopg.connect(r.url(r.app), autocommit=True, **options)
        ident = sql.Identifier(schema)
        self.sql = {
            name: sql.SQL(text.strip()).format(schema=ident).as_string(self.db)
            for name, text in BEFORE_FUNCTIONS.items()
        }
        self.settings_sql = statements.SETUP[statements.SET_SEARCH_PATH]
        self.settings = statements.transaction_settings(ident.as_string(self.db), tenant)
        self.conn = Conn.of(self.db)

    def _call(self, name: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        if self.way == "alone":
            return self.db.execute(self.sql[name], params, prepare=True).fetchone()
        with self.db.pipeline():
            self.db.execute(statements.BEGIN[True], prepare=False)
            self.db.execute(self.settings_sql, self.settings)
            cursor = self.db.execute(self.sql[name], params)
            self.db.execute(statements.COMMIT, prepare=False)
        return cursor.fetchone()

    def cycle(self, n: int, tallies: dict[str, Tally]) -> None:
        leases = []
        with self.conn.counted(tallies["claim"], n):
            for _ in range(n):
                now = _micros()
                row = self._call(
                    "claim",
                    {"worker_id": "w", "now": now, "expires_at": now + int(LEASE * 1e6),
                     "max_version": self.max_version, "held_limit": None},
                )  # fmt: skip
                assert row is not None
                leases.append((row[0], row[1]))
        with self.conn.counted(tallies["heartbeat"], n):
            for run_id, epoch in leases:
                row = self._call(
                    "heartbeat",
                    {"run_id": run_id, "worker_id": "w", "epoch": epoch,
                     "expires_at": _micros() + int(LEASE * 1e6)},
                )  # fmt: skip
                assert row is not None
        with self.conn.counted(tallies["release"], n):
            for run_id, epoch in leases:
                row = self._call(
                    "release",
                    {"run_id": run_id, "worker_id": "w", "epoch": epoch, "status": None, "requeue": True,
                     "now": _micros(), "attempts": "keep", "retry_at": None, "error": None},
                )  # fmt: skip
                assert row is not None

    def close(self) -> None:
        self.db.close()


def _micros() -> int:
    return time.time_ns() // 1000


def rls(r: Roles, log: Callable[[str], None]) -> dict[str, Any]:
    schema_on = r.schema("rlson")
    on, off = Side(r, schema_on), Side(r, r.schema("rlsoff", rls=False))
    raws = {way: Raw(r, schema_on, way) for way in ("alone", "piped")}
    kinds = ("claim", "heartbeat", "release")
    raw_tallies = {way: {name: Tally() for name in kinds} for way in raws}
    try:
        steps = _steps(WARM + SAVES)
        for start in range(0, WARM, BLOCK):  # warm: statements prepared, the runs under way
            chunk = steps[start : start + BLOCK]
            for side in (on, off):
                side.saves(chunk, Tally())
                side.cycle(BLOCK, {name: Tally() for name in kinds})
            for raw in raws.values():
                raw.cycle(BLOCK, {name: Tally() for name in kinds})
        log("tenants: RLS on / off warm")
        for i, start in enumerate(range(WARM, WARM + SAVES, BLOCK)):
            chunk = steps[start : start + BLOCK]
            for side in (on, off) if i % 2 == 0 else (off, on):
                side.saves(chunk, side.tallies["save"])
        # RLS off, on, the UPDATE alone, then the old pipeline: the pairs the targets read (on / off,
        # on / alone) run back to back in either direction.
        ways: list[tuple[Any, dict[str, Tally]]] = [
            (off, off.tallies), (on, on.tallies), *((raw, raw_tallies[way]) for way, raw in raws.items())
        ]  # fmt: skip
        for i in range(CYCLES // BLOCK):
            for one, tallies in ways if i % 2 == 0 else ways[::-1]:
                one.cycle(BLOCK, tallies)
        return {
            "on": {name: t.per_op() for name, t in on.tallies.items()},
            "off": {name: t.per_op() for name, t in off.tallies.items()},
            **{
                way: {name: t.per_op() for name, t in tallies.items()} for way, tallies in raw_tallies.items()
            },
        }
    finally:
        on.close()
        off.close()
        for raw in raws.values():
            raw.close()


# -- the section -------------------------------------------------------------------------------


def run(url: str, log: Callable[[str], None]) -> dict[str, Any]:
    reason = pg_server.unreachable(url)
    if reason is not None:
        return {"skipped": f"PostgreSQL at {url} unreachable: {reason}"}
    began = time.perf_counter()
    out: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine.describe(Path.cwd()),
        "server": pg_server.settings(url)["server_version"],
    }
    with roles(url) as r:
        out["claims"] = claims(r, log)
        log(f"tenants: claims {out['claims']}")
        out["fairness"] = fairness(r, log)
        log(f"tenants: fairness {out['fairness']}")
        out["rls"] = rls(r, log)
        log(f"tenants: rls {out['rls']}")
    out["seconds"] = time.perf_counter() - began
    out["load_end"] = machine.load_average()
    return out


def block_ratio(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, float]:
    """Server CPU per op of ``a`` over ``b``, block against block (the blocks took turns, so each
    pair met the same load): (median, lowest quartile, highest quartile) of the pairs' ratios."""
    ratios = sorted(x / y for x, y in zip(a["blocks"], b["blocks"], strict=True) if y)
    q = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), q[0], q[2]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}{X}" if b else "—"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "**MISS**"


def _cpu_cell(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, float]:
    """A server-CPU ratio's cell (the median of the block pairs' ratios, their quartiles, the pooled
    ratio and the two sides' µs) and the median, which the verdict reads."""
    mid, low, high = block_ratio(a, b)
    pooled = a["server_us"] / b["server_us"]
    cell = (
        f"{mid:.2f}{X} (quartiles {low:.2f} to {high:.2f}{X}; pooled {pooled:.2f}{X}: "
        f"{a['server_us']:.0f} / {b['server_us']:.0f} µs)"
    )
    return cell, mid


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(measure, measured, target, result) rows. Server CPU ratios are judged by the median of the
    block pairs' ratios (each pair ran back to back, so it met the same load on a shared machine)."""
    rows: list[tuple[str, str, str, str]] = []
    fair, plain = result["claims"]["fair"], result["claims"]["plain"]
    head = f"Claim with {TENANTS} tenants (FairClaims) / one tenant (`store.claim`):"
    for key, what in (("statements", "statements"), ("client_us", "client CPU")):
        ratio = fair[key] / plain[key]
        rows.append((f"{head} {what} per claim", f"{ratio:.2f}{X}", f"≤ 1.5{X}", _verdict(ratio <= 1.5)))
    cell, mid = _cpu_cell(fair, plain)
    rows.append((f"{head} server CPU per claim", cell, f"≤ 1.5{X}", _verdict(mid <= 1.5)))
    f = result["fairness"]
    rows.append(
        (
            f"Fairness, {BIG:,} and {SMALL} queued, {WORKERS} workers: "
            "claim index of the small tenant's last run",
            f"{f['small_last']} (of {f['claimed']:,})",
            f"≤ {2 * WORKERS * SMALL}",
            _verdict(f["small_last"] is not None and f["small_last"] <= 2 * WORKERS * SMALL),
        )
    )
    rows.append(("Fairness: runs claimed twice", str(f["twice"]), "0", _verdict(f["twice"] == 0)))
    on, off, alone = result["rls"]["on"], result["rls"]["off"], result["rls"]["alone"]
    for name in ("save", "claim", "heartbeat", "release"):
        cell, mid = _cpu_cell(on[name], off[name])
        rows.append((f"`{name}`: server CPU, RLS on / off", cell, f"≤ 1.10{X}", _verdict(mid <= 1.10)))
        trips = on[name]["replies"] / off[name]["replies"]
        rows.append(
            (f"`{name}`: round trips, RLS on / off", f"{trips:.2f}{X}", f"≤ 1.10{X}", _verdict(trips <= 1.10))
        )
    for name in ("claim", "heartbeat", "release"):
        cell, mid = _cpu_cell(on[name], alone[name])
        rows.append(
            (
                f"`{name}` as sent now (the schema function's call alone) / the UPDATE alone: server CPU",
                cell,
                f"≤ 1.10{X}",
                _verdict(mid <= 1.10),
            )
        )
        trips = on[name]["replies"] / alone[name]["replies"]
        sends = on[name]["sends"] / alone[name]["sends"]
        rows.append(
            (
                f"`{name}` as sent now / the UPDATE alone: round trips (server replies; client sends)",
                f"{trips:.2f}{X} ({sends:.2f}{X})",
                f"1.00{X}",
                _verdict(round(trips, 2) <= 1.00),
            )
        )
    return rows


def render(result: dict[str, Any], *, command: str) -> str:
    if "skipped" in result:
        return f"## Tenants (issue 38)\n\n{result['skipped']}\n"
    m = result["machine"]
    lines = [
        "## Tenants (issue 38)",
        "",
        f"`{command}` (`bench/sections/tenants.py`), run on {result['date']} in {result['seconds']:.0f} s: "
        f"{m['CPU']}, {m['Cores']} cores, {m['RAM']}, {m['OS']}, Python {m['Python']}, PostgreSQL "
        f"{result['server']} on 127.0.0.1 over TCP; {m['Packages']}; "
        f"safepoint measured: {m['safepoint measured']}. "
        f"Load average (1, 5, 15 min) at the start {m['Load average (1, 5, 15 min) at the start']}, "
        f"at the end {result['load_end']}.",
        "",
        "| Measure | Measured | Target | Result |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in targets(result)),
        "",
    ]
    fair, plain = result["claims"]["fair"], result["claims"]["plain"]
    lines += [
        f"### The claim: {TENANTS} tenants against one",
        "",
        "| per claim | statements | client CPU | server CPU (schedstat) | server CPU (stat) "
        "| client sends | server replies |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, t in (
        (f"`FairClaims`, {TENANTS} tenants, 1 busy", fair),
        ("`store.claim`, one tenant", plain),
    ):
        lines.append(
            f"| {label} | {t['statements']:.3f} | {t['client_us']:.0f} µs | {t['server_us']:.0f} µs "
            f"| {t['server_stat_us']:.0f} µs | {t['sends']:.2f} | {t['replies']:.2f} |"
        )
    keys = ("statements", "client_us", "server_us", "server_stat_us", "sends", "replies")
    lines.append("| ratio | " + " | ".join(_ratio(fair[key], plain[key]) for key in keys) + " |")
    f = result["fairness"]
    lines += [
        "",
        "### Fairness",
        "",
        f"{f['claimed']:,} runs claimed ({f['distinct']:,} distinct, {f['twice']} twice) "
        f"in {f['seconds']:.1f} s by {WORKERS} threads; the small tenant's {f['small_claimed']} runs "
        f"were claims {f['small_first']} to {f['small_last']}; {f['looks']} looks across tenants in all.",
        "",
        "### RLS on against off, and the queue calls against the UPDATE alone",
        "",
        "| call | way | server CPU (schedstat) | server CPU (stat) | client CPU | client sends "
        "| server replies |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    rls_result = result["rls"]
    names = {
        "on": "the store, RLS on",
        "off": "the store, RLS off",
        "alone": "raw psycopg: the UPDATE alone, tenant set by the session (RLS on)",
        "piped": "raw psycopg: BEGIN + settings + UPDATE + COMMIT, one pipeline, "
        "as sent before 3a71fcc (RLS on)",
    }
    for name in ("save", "claim", "heartbeat", "release"):
        for way, label in names.items():
            t = rls_result[way].get(name)
            if t is None:
                continue
            lines.append(
                f"| `{name}` | {label} | {t['server_us']:.0f} µs | {t['server_stat_us']:.0f} µs "
                f"| {t['client_us']:.0f} µs | {t['sends']:.2f} | {t['replies']:.2f} |"
            )
    lines += [
        "",
        "| call | server CPU: RLS on / off | store / UPDATE alone | old pipeline / alone "
        "| server replies: on / off | store / alone | client sends: store / alone "
        "| client CPU: on / off | store / alone | old pipeline / alone |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("save", "claim", "heartbeat", "release"):
        on, off = rls_result["on"][name], rls_result["off"][name]
        alone, piped = rls_result["alone"].get(name), rls_result["piped"].get(name)

        def vs(key: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
            if not a or not b:
                return "—"
            if key == "server_us":  # the block pairs' median, as the targets read it
                return f"{block_ratio(a, b)[0]:.2f}{X}"
            return _ratio(a[key], b[key])

        cells = [
            vs("server_us", on, off),
            vs("server_us", on, alone),
            vs("server_us", piped, alone),
            _ratio(on["replies"], off["replies"]),
            vs("replies", on, alone),
            vs("sends", on, alone),
            _ratio(on["client_us"], off["client_us"]),
            vs("client_us", on, alone),
            vs("client_us", piped, alone),
        ]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
