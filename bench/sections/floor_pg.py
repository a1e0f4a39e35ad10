"""A PostgreSQL save against the floor of the same rows (issue 34's PostgreSQL targets).

    PYTHONPATH=src .venv/bin/python bench/sections/floor_pg.py [--saves 2000] [--sizes 500,3000]
        [--routes direct,pgbouncer] [--callgrind] [--json out.json] [--pg-url URL]

Not part of ``make bench`` (a few minutes; the callgrind part needs valgrind
and a C compiler). It measures the ``safepoint`` it imports, so the same
script run with ``PYTHONPATH`` pointing at another checkout's ``src`` gives
that checkout's numbers (``bench/report/floor_pg.py`` sets two JSON outputs
side by side). For each route (PostgreSQL direct, and through PgBouncer in
transaction mode with ``prepare_threshold=None``, the documented setting)
and each message size (each step adds a user message and an assistant reply
of that many characters, sets three counters, one cursor and a two-key
state), one run is saved step after step in place, and in alternating blocks
a *raw commit* writes the same rows into another run of the same tables:
one statement, its run row's head moved and the checkpoint row inserted,
with the bytes the store's save stored for that step (read back outside the
measured spans), binary parameters, prepared as the route allows. Reported,
per save / per raw commit:

- **server CPU**: utime + stime of each side's own backend process
  (``/proc/<pid>/stat``; the pid from ``pg_backend_pid()``, each side on a
  connection of its own — through PgBouncer, a PgBouncer of its own with a
  pool of one), summed over the blocks of each side; ``schedstat`` beside it
  (nanoseconds, where ``stat`` counts 10 ms ticks);
- **bytes sent**: the client socket's ``tcpi_bytes_acked`` (``TCP_INFO``)
  per save, against the content: the step's new message bodies plus its
  stored header;
- **WAL**: ``pg_current_wal_insert_lsn()`` deltas around each block, median
  block (other clients of the server write WAL too; the median keeps their
  blocks out);
- **client instructions** (``--callgrind``): ``valgrind --tool=callgrind
  --instr-atstart=no --collect-atstart=no``, collection toggled around the
  measured calls only (the floor section's client requests,
  ``floor_probe.Callgrind``: no compiler needed), a save against a raw prepared INSERT: the
  same statement as the raw commit, its two messages encoded with
  ``orjson.dumps`` in the measured span.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script: the packages it imports live in bench/ (and the PgBouncer helper in tests/).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(
    0, str(Path(__file__).resolve().parents[2] / "tests")
)  # pgbouncer.py: a PgBouncer on a free port

import orjson
import pg_server
import psycopg
from psycopg import sql

import safepoint
from pgbouncer import PgBouncer

BLOCK = 50
STORE_OPTIONS: dict[str, Any] = {}  # open_store's, beside the route's (--no-scrubber)
X = chr(215)  # the multiplication sign of the report's ratios
BOUNCER_OPTIONS = {"prepare_threshold": None}  # PgBouncer 1.18 in transaction mode: docs/operations.md

# The raw commit: the save's two rows, one statement, no checks beyond the step's.
RAW_SQL = """WITH run AS (UPDATE {schema}.safepoint_runs SET head_step = %(step)s, head_digest = %(digest)s,
status = %(status)s, schema_version = %(schema_version)s, labels = %(labels)s::jsonb,
counters = %(counters)s::jsonb, next_seq = %(next_seq)s, updated_at = now()
WHERE id = %(run_ref)s AND head_step = %(step)s - 1 RETURNING id)
INSERT INTO {schema}.safepoint_checkpoints (run_ref, step, schema_version, status, created_at, message_count,
ranges, header, digest, first_seq, added, messages, carriers, chains)
SELECT id, %(step)s, %(schema_version)s, %(status)s, now(), %(message_count)s, %(ranges)s::jsonb, %(header)s,
%(digest)s, %(first_seq)s, %(added)s, %(messages)s, %(carriers)s, %(chains)s FROM run"""
STORED = (
    "SELECT step, schema_version, status, message_count, ranges::text, header, digest, first_seq, added,"
    " messages, carriers, chains FROM {schema}.safepoint_checkpoints WHERE run_ref = %(run_ref)s"
    " AND step BETWEEN %(first)s AND %(last)s ORDER BY step"
)


# -- the workload --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    messages: list[dict[str, Any]]
    counters: dict[str, int]
    cursor: dict[str, Any]
    state: dict[str, Any]


def workload(steps: int, size: int, seed: int = 34) -> list[Step]:
    """``steps`` steps, each two messages of ``size`` characters of seeded random words."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(2, 9))) for _ in range(4096)]

    def text(n: int) -> str:
        out: list[str] = []
        length = 0
        while length < n:
            word = rng.choice(words)
            out.append(word)
            length += len(word) + 1
        return " ".join(out)[:n]

    return [
        Step(
            [{"role": "user", "content": text(size)}, {"role": "assistant", "content": text(size)}],
            {"tokens_in": 40 * i, "tokens_out": 30 * i, "turns": i},
            {"offset": i, "page": i // 10},
            {"topic": f"t{i % 7}", "mood": "ok" if i % 2 else "busy"},
        )
        for i in range(1, steps + 1)
    ]


def advance(cp: safepoint.Checkpoint, step: Step) -> None:
    cp.step += 1
    cp.messages.extend(step.messages)
    cp.counters.update(step.counters)
    cp.cursors["main"] = step.cursor
    cp.state.update(step.state)


# -- what /proc and the sockets say ---------------------------------------------------


_TICKS = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> tuple[float, float]:
    """(utime + stime from /proc/<pid>/stat, run time from /proc/<pid>/schedstat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return ticks / _TICKS, ns / 1e9


def bytes_acked(fd: int) -> int:
    """``tcpi_bytes_acked`` of a TCP socket: the bytes it sent that the other end has."""
    sock = socket.socket(fileno=fd)
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    finally:
        sock.detach()
    return int(struct.unpack_from("Q", info, 120)[0])


def backend_pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


# -- the two sides ----------------------------------------------------------------------


@dataclass(slots=True)
class Side:
    """What one side's blocks add up to."""

    ops: int = 0
    cpu_stat: float = 0.0
    cpu_sched: float = 0.0
    client: float = 0.0
    sent: int = 0
    wal_blocks: list[float] = field(default_factory=list)

    def per_op(self) -> dict[str, float]:
        return {
            "ops": self.ops,
            "server_cpu_stat_us": 1e6 * self.cpu_stat / self.ops,
            "server_cpu_sched_us": 1e6 * self.cpu_sched / self.ops,
            "client_cpu_us": 1e6 * self.client / self.ops,
            "bytes_sent": self.sent / self.ops,
            "wal_bytes": statistics.median(self.wal_blocks),
        }


@contextmanager
def route_urls(url: str, route: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(the store's URL, the raw side's URL, the store's options) for ``route``."""
    if route == "direct":
        yield url, url, {}
        return
    bouncers = [PgBouncer(url, pool_size=1), PgBouncer(url, pool_size=1)]
    try:
        for bouncer in bouncers:
            bouncer.start()
        yield bouncers[0].dsn, bouncers[1].dsn, dict(BOUNCER_OPTIONS)
    finally:
        for bouncer in bouncers:
            bouncer.stop()


class Pair:
    """A store saving one run in place, and a raw connection writing the same rows into another run."""

    def __init__(self, url: str, store_url: str, raw_url: str, options: dict[str, Any], schema: str) -> None:
        self.monitor = psycopg.connect(url, autocommit=True)
        options = {**STORE_OPTIONS, **options}
        self.store = safepoint.open_store(store_url, schema=schema, min_size=1, max_size=1, **options)
        self.cp = safepoint.Checkpoint(run_id="saved")
        self.store.save(self.cp)
        self.store.save(safepoint.Checkpoint(run_id="raw"))
        self.ident = sql.Identifier(schema).as_string(self.monitor)
        refs = dict(self.monitor.execute(f"SELECT run_id, id FROM {self.ident}.safepoint_runs").fetchall())  # type: ignore[call-overload]
        self.run_ref, self.raw_ref = refs["saved"], refs["raw"]
        self.raw = psycopg.connect(
            raw_url, autocommit=True, prepare_threshold=options.get("prepare_threshold", 5)
        )
        self.raw_sql = RAW_SQL.format(schema=self.ident)
        with self.store.driver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's only one
            self.store_pid, self.store_fd = backend_pid(conn), conn.pgconn.socket
        self.raw_pid, self.raw_fd = backend_pid(self.raw), self.raw.pgconn.socket
        self.content = 0  # message bodies + stored headers, of the measured saves
        self.raw_step = 0

    def close(self) -> None:
        self.store.close()
        self.raw.close()
        self.monitor.close()

    def stored(self, first: int, last: int) -> list[tuple[Any, ...]]:
        query = STORED.format(schema=self.ident)
        return self.monitor.execute(query, {"run_ref": self.run_ref, "first": first, "last": last}).fetchall()  # type: ignore[call-overload, no-any-return]

    def raw_params(self, row: tuple[Any, ...], step: Step) -> dict[str, Any]:
        (
            number,
            version,
            status,
            count,
            ranges,
            header,
            digest,
            first_seq,
            added,
            messages,
            carriers,
            chains,
        ) = row
        return {
            "run_ref": self.raw_ref,
            "step": number,
            "digest": digest,
            "status": status,
            "schema_version": version,
            "labels": "{}",
            "counters": orjson.dumps(step.counters).decode(),
            "next_seq": first_seq + added,
            "message_count": count,
            "ranges": ranges,
            "header": header,
            "first_seq": first_seq,
            "added": added,
            "messages": messages,  # the bytes the save stored (the callgrind part encodes them anew)
            "carriers": carriers,
            "chains": chains,
        }

    def wal(self) -> int:
        row = self.monitor.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
        assert row is not None
        return int(row[0])

    def save_block(self, steps: list[Step], side: Side) -> None:
        with self.counted(side, self.store_pid, self.store_fd, len(steps)):
            for step in steps:
                advance(self.cp, step)
                self.store.save(self.cp)
        rows = self.stored(self.cp.step - len(steps) + 1, self.cp.step)
        self.content += sum(len(row[9] or b"") + len(row[5]) for row in rows)

    def raw_block(self, rows: list[tuple[Any, ...]], steps: list[Step], side: Side) -> None:
        params = [self.raw_params(row, step) for row, step in zip(rows, steps, strict=True)]
        with self.counted(side, self.raw_pid, self.raw_fd, len(rows)):
            for one in params:
                self.raw.execute(self.raw_sql, one, binary=True)

    @contextmanager
    def counted(self, side: Side, pid: int, fd: int, ops: int) -> Iterator[None]:
        """What the block inside costs, added to ``side``: the backend's CPU, the bytes sent on
        the connection, WAL per operation and the client's own thread time."""
        wal, sent, (stat, sched), client = self.wal(), bytes_acked(fd), backend_cpu(pid), time.thread_time()
        yield
        client = time.thread_time() - client
        stat2, sched2 = backend_cpu(pid)
        side.sent += bytes_acked(fd) - sent
        side.wal_blocks.append((self.wal() - wal) / ops)
        side.cpu_stat += stat2 - stat
        side.cpu_sched += sched2 - sched
        side.client += client
        side.ops += ops


def measure(url: str, route: str, size: int, saves: int, warmup: int) -> dict[str, Any]:
    steps = workload(warmup + saves, size)
    save_side, raw_side = Side(), Side()
    with (
        route_urls(url, route) as (store_url, raw_url, options),
        pg_server.scratch_schema(url, "floorpg") as schema,
    ):
        pair = Pair(url, store_url, raw_url, options, schema)
        try:
            for start in range(0, warmup, BLOCK):  # both sides warm: the run under way, statements prepared
                chunk = steps[start : start + BLOCK]
                pair.save_block(chunk, Side())
                pair.raw_block(pair.stored(start + 1, start + len(chunk)), chunk, Side())
            pair.content = 0
            for start in range(warmup, warmup + saves, BLOCK):
                chunk = steps[start : start + BLOCK]
                pair.save_block(chunk, save_side)
                pair.raw_block(pair.stored(start + 1, start + len(chunk)), chunk, raw_side)
            content = pair.content / save_side.ops
            hot = pair.monitor.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = %s"
                " AND relname = 'safepoint_runs'",
                (schema,),
            ).fetchone()
        finally:
            pair.close()
    return {
        "route": route,
        "size": size,
        "save": save_side.per_op(),
        "raw": raw_side.per_op(),
        "content_bytes": content,
        "run_updates_hot": list(hot) if hot else None,
    }


# -- client instructions (callgrind) -------------------------------------------------------


def callgrind_child(url: str, route: str, size: int, count: int) -> None:
    """Runs under valgrind: ``count`` saves, then ``count`` raw prepared INSERTs, each collected alone."""
    from sections.floor_probe import Callgrind  # noqa: PLC0415 - only the child under valgrind

    callgrind = Callgrind()
    warm = 60
    steps = workload(warm + 2 * count, size)
    with (
        route_urls(url, route) as (store_url, raw_url, options),
        pg_server.scratch_schema(url, "floorcg") as schema,
    ):
        pair = Pair(url, store_url, raw_url, options, schema)
        try:
            pair.save_block(steps[:warm], Side())
            pair.raw_block(pair.stored(1, warm), steps[:warm], Side())
            callgrind.start()
            for step in steps[warm : warm + count]:
                advance(pair.cp, step)
                callgrind.toggle()
                pair.store.save(pair.cp)
                callgrind.toggle()
            callgrind.dump("save")
            rows = pair.stored(warm + 1, warm + count)
            params = [
                pair.raw_params(row, step) for row, step in zip(rows, steps[warm : warm + count], strict=True)
            ]
            for one, step in zip(params, steps[warm : warm + count], strict=True):
                callgrind.toggle()
                one["messages"] = b"\n".join([orjson.dumps(m) for m in step.messages])
                pair.raw.execute(pair.raw_sql, one, binary=True)
                callgrind.toggle()
            callgrind.dump("raw")
        finally:
            pair.close()


def client_instructions(url: str, route: str, size: int, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="floorpg-cg-") as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
            f"--callgrind-out-file={out}.%p", sys.executable, __file__, "--callgrind-child",
            "--pg-url", url, "--routes", route, "--sizes", str(size), "--count", str(count),
            *(["--no-scrubber"] if STORE_OPTIONS.get("scrubber") is False else []),
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        totals = dict(_dumps(Path(folder)))
    return {
        "save_instructions": totals.get("save", 0) / count,
        "raw_instructions": totals.get("raw", 0) / count,
    }


def _dumps(folder: Path) -> Iterator[tuple[str, int]]:
    """(label, instructions) of each ``CALLGRIND_DUMP_STATS_AT(label)`` dump in ``folder``."""
    for dump in folder.glob("callgrind.out.*"):
        label, total = "", 0
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger:"):
                label = line.rsplit(" ", 1)[-1].strip("'")
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
        yield label, total


# -- the time-range listing without the updated_at index -------------------------------


def listing(url: str, runs: int, repeats: int = 7) -> dict[str, Any]:
    """``store.runs(updated_since=…)`` over ``runs`` runs: median ms for a recent and an old bound."""
    with pg_server.scratch_schema(url, "floorls") as schema:
        store = safepoint.open_store(url, schema=schema, min_size=1, max_size=2)
        try:
            stamps = []
            for n in range(runs):
                cp = safepoint.Checkpoint(run_id=f"run-{n:05d}", labels={"n": str(n % 10)})
                cp.messages.append({"role": "user", "content": f"hello {n}"})
                store.save(cp)
                stamps.append(cp.created_at)
            out: dict[str, Any] = {"runs": runs}
            for name, since in (("recent", stamps[-20]), ("old", stamps[runs // 10])):
                store.runs(updated_since=since, limit=50)
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    page = store.runs(updated_since=since, limit=50)
                    times.append(time.perf_counter() - start)
                out[name] = {"ms": 1000 * statistics.median(times), "items": len(page.items)}
        finally:
            store.close()
    return out


# -- the report -----------------------------------------------------------------------------


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| route | messages | server CPU / save (stat, sched) | / raw commit (stat, sched)"
        " | bytes sent / save | / content | WAL / save | / raw commit"
        " | client instructions / save | / raw prepared INSERT |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "route" not in r:  # the listing's entry
            continue
        save, raw = r["save"], r["raw"]
        instr = r.get("instructions") or {}
        cg = "— | —"
        if instr.get("raw_instructions"):
            ratio = instr["save_instructions"] / instr["raw_instructions"]
            cg = f"{instr['save_instructions'] / 1e6:.2f} M | {ratio:.2f}{X}"
        stat, sched = save["server_cpu_stat_us"], save["server_cpu_sched_us"]
        lines.append(
            f"| {r['route']} | {r['size']:,} B | {stat:.0f} µs, {sched:.0f} µs | "
            f"{stat / raw['server_cpu_stat_us']:.2f}{X}, {sched / raw['server_cpu_sched_us']:.2f}{X} | "
            f"{save['bytes_sent']:,.0f} B | {save['bytes_sent'] / r['content_bytes']:.2f}{X} | "
            f"{save['wal_bytes']:,.0f} B | {save['wal_bytes'] / raw['wal_bytes']:.2f}{X} | {cg} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pg-url", default=pg_server.DEFAULT_URL)
    parser.add_argument("--saves", type=int, default=2000, help="measured saves (and raw commits) per case")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--sizes", default="500,3000")
    parser.add_argument("--routes", default="direct,pgbouncer")
    parser.add_argument("--callgrind", action="store_true", help="client instructions too (valgrind)")
    parser.add_argument("--count", type=int, default=20, help="saves collected under callgrind")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--no-scrubber", action="store_true", help="open the store with scrubber=False")
    parser.add_argument("--listing", type=int, default=0, help="time-range listing over this many runs")
    parser.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.no_scrubber:
        STORE_OPTIONS["scrubber"] = False
    routes = args.routes.split(",")
    if args.callgrind_child:
        callgrind_child(args.pg_url, routes[0], sizes[0], args.count)
        return 0
    reason = pg_server.unreachable(args.pg_url)
    if reason is not None:
        print(f"PostgreSQL at {args.pg_url} unreachable: {reason}", file=sys.stderr)
        return 1
    results: list[dict[str, Any]] = []
    if args.listing:
        shown = listing(args.pg_url, args.listing)
        results.append({"listing": shown})
        print(json.dumps(shown), file=sys.stderr, flush=True)
        print(
            f"Time-range listing, {shown['runs']:,} runs, `store.runs(updated_since=…, limit=50)`, "
            "median of 7: "
            f"recent bound {shown['recent']['ms']:.1f} ms ({shown['recent']['items']} runs), "
            f"old bound {shown['old']['ms']:.1f} ms ({shown['old']['items']} runs)\n"
        )
    for route in routes:
        for size in sizes:
            result = measure(args.pg_url, route, size, args.saves, args.warmup)
            if args.callgrind:
                result["instructions"] = client_instructions(args.pg_url, route, size, args.count)
            results.append(result)
            print(json.dumps(result), file=sys.stderr, flush=True)
    print(
        f"safepoint from {Path(safepoint.__file__).parent}; {args.saves} interleaved saves per side, "
        f"blocks of {BLOCK}\n"
    )
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
