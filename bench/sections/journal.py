"""What the call journal costs (issue 32): per recorded call, journal bytes per call, a replay
read, and a whole LangGraph turn with and without the journal.

    .venv/bin/python bench/run.py --section journal      # make bench SECTION=journal

Per backend (SQLite at the store's defaults — WAL, ``synchronous=FULL``,
group commit on — and PostgreSQL in a schema of its own, dropped after),
one process records calls each way ``journal_calls.ways`` lists, each on a
run of its own, in blocks of ``BLOCK`` calls whose order rotates, beside
the floor (a bare durable commit of a 2 KB row) and a plain ``store.save``:
``CALLS`` calls of each, after ``WARM`` untimed ones (the floor: 1,500, so
its WAL has reached its working size). Wall is ``time.perf_counter`` around
one recorded call (all the store calls it makes), CPU ``time.process_time``.
Then, in processes of their own, the same calls counted without a clock:
instructions (callgrind, collecting only around the calls) and, on
SQLite, named queries, statements, fsyncs and bytes written per call
(``strace``). Bytes per call: a fresh store recording 2 KB tool results
(intent + record), the journal's table and index (and blobs) measured after
``BYTES_AT`` calls. The LangGraph turn is ``journal_turn``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import machine
import pg_server
import psycopg
from psycopg import sql

from sections import journal_calls as calls
from sections import journal_turn

CALLS, WARM, FLOOR_WARM, BLOCK = 1000, 100, 1500, 50
BYTES_AT = (100, 1000, 10_000)
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(slots=True)
class Series:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def ms(self, kind: str = "wall") -> float:
        return statistics.median(self.wall if kind == "wall" else self.cpu) * 1e3


@dataclass(slots=True)
class Backend:
    name: str
    series: dict[str, Series] = field(default_factory=dict)
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)  # the count probe's, per way
    ir: dict[str, float] | str = "not measured"  # instructions per call, or why not
    sizes: dict[int, dict[str, int]] = field(default_factory=dict)  # calls -> {part: bytes}
    settings: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None


@dataclass(slots=True)
class Result:
    described: dict[str, str]
    backends: list[Backend]
    turn: journal_turn.TurnResult
    labels: dict[str, str]
    seconds: float = 0.0
    load_end: str = ""


def _time(units: list[tuple[str, Callable[[int], None]]], warm: dict[str, int]) -> dict[str, Series]:
    """``CALLS`` timed calls of each unit, in rotating blocks, after its warm-up calls."""
    series = {name: Series() for name, _ in units}
    for name, unit in units:
        for n in range(warm.get(name, WARM)):
            unit(n)
    for block in range(CALLS // BLOCK):
        shift = block % len(units)
        for name, unit in units[shift:] + units[:shift]:
            base, out = warm.get(name, WARM) + block * BLOCK, series[name]
            for n in range(base, base + BLOCK):
                start, cpu = time.perf_counter(), time.process_time()
                unit(n)
                out.cpu.append(time.process_time() - cpu)
                out.wall.append(time.perf_counter() - start)
    return series


def _sqlite(workdir: Path, p: calls.Payloads) -> Backend:
    backend = Backend("SQLite")
    folder = workdir / "journal-sqlite"
    shutil.rmtree(folder, ignore_errors=True)
    url = f"sqlite:///{folder / 'journal.db'}"
    store = calls.open_bench_store(url, None)
    bare = calls.open_bench_store(f"sqlite:///{folder / 'unscrubbed.db'}", None, scrubber=False)
    try:
        calls.prepare(store, [*calls.ways(p), *calls.reads(p)])
        calls.prepare(bare, calls.ways(p))
        floor = calls.raw_floor(url)
        assert floor is not None
        model = next(way for way in calls.ways(p) if way.name == "model")
        extra = [("model_unscrubbed", lambda n: model.unit(bare, f"model/{calls.call_key(n)}"))]
        units = calls.units(store, p, WARM, floor[0]) + extra
        backend.series = _time(units, {"floor": FLOOR_WARM})
        floor[1]()
        backend.settings = _sqlite_settings(folder / "journal.db")
    finally:
        store.close()
        bare.close()
    shutil.rmtree(folder, ignore_errors=True)
    return backend


def _sqlite_settings(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return {
        "journal_mode": mode,
        "synchronous": "FULL (set by safepoint on every writable SQLite file: store/sqlite/connect.py)",
        "group_commit": "on (the default; passed explicitly)",
        "sqlite": sqlite3.sqlite_version,
    }


def _sqlite_sizes(folder: Path, p: calls.Payloads) -> dict[int, dict[str, int]]:
    """The journal's pages (table, index, overflow pages among them) and blobs after each of
    ``BYTES_AT`` recorded 2 KB tool results (intent + record)."""
    shutil.rmtree(folder, ignore_errors=True)
    path = folder / "journal.db"
    store = calls.open_bench_store(f"sqlite:///{path}", None)
    tool = calls.ways(p)[0]
    calls.prepare(store, [tool])
    sizes: dict[int, dict[str, int]] = {}
    done = 0
    try:
        for target in BYTES_AT:
            for n in range(done, target):
                tool.unit(store, calls.call_key(n))
            done = target
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                rows = conn.execute(
                    "SELECT name, pagetype, sum(pgsize) FROM dbstat"
                    " WHERE name IN ('safepoint_calls', 'safepoint_calls_step') GROUP BY name, pagetype"
                ).fetchall()
            part = {"table": 0, "index": 0, "overflow": 0}
            for name, pagetype, size in rows:
                part["index" if name == "safepoint_calls_step" else "table"] += size
                part["overflow"] += size if pagetype == "overflow" else 0
            part["blobs"] = _dir_bytes(path.with_name(path.name + ".blobs"))
            sizes[target] = part
    finally:
        store.close()
    shutil.rmtree(folder, ignore_errors=True)
    return sizes


def _dir_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) if directory.exists() else 0


def _postgres(url: str | None, p: calls.Payloads) -> Backend:
    backend = Backend("PostgreSQL")
    if url is None:
        backend.skipped = "not asked for (--no-postgres)"
        return backend
    why = pg_server.unreachable(url)
    if why is not None:
        backend.skipped = f"no PostgreSQL server at {url}: {why}"
        return backend
    settings = pg_server.settings(url)
    keep = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay")
    backend.settings = {name: settings[name] for name in keep}
    with pg_server.scratch_schema(url, "journal") as schema:
        store = calls.open_bench_store(url, schema)
        floor = _pg_floor(url, schema)
        try:
            calls.prepare(store, [*calls.ways(p), *calls.reads(p)])
            backend.series = _time(calls.units(store, p, WARM, floor[0]), {})
        finally:
            floor[1]()
            store.close()
    return backend


def _pg_floor(url: str, schema: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """One autocommit INSERT of a 2 KB row through psycopg: a bare durable commit on the server."""
    conn = psycopg.connect(url, autocommit=True)
    table = sql.Identifier(schema, "floor_rows")
    conn.execute(
        sql.SQL("CREATE TABLE {} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body bytea)").format(
            table
        )
    )
    insert = sql.SQL("INSERT INTO {} (body) VALUES (%s)").format(table)
    body = os.urandom(calls.TOOL_BYTES)

    def commit() -> None:
        conn.execute(insert, (body,))

    return commit, conn.close


def _pg_sizes(url: str, schema: str, p: calls.Payloads) -> dict[int, dict[str, int]]:
    store = calls.open_bench_store(url, schema)
    tool = calls.ways(p)[0]
    calls.prepare(store, [tool])
    sizes: dict[int, dict[str, int]] = {}
    done = 0
    name = f"{schema}.safepoint_calls"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for target in BYTES_AT:
                for n in range(done, target):
                    tool.unit(store, calls.call_key(n))
                done = target
                row = conn.execute(
                    "SELECT pg_relation_size(%s::regclass), pg_indexes_size(%s::regclass),"
                    " pg_total_relation_size(%s::regclass)",
                    (name, name, name),
                ).fetchone()
                assert row is not None
                heap, index, total = row
                sizes[target] = {"table": total - index, "index": index, "heap": heap, "blobs": 0}
    finally:
        store.close()
    return sizes


# -- the probes: instructions (callgrind) and counts (strace) -------------------------------


def _probe(mode: str, url: str, schema: str | None, wrap: list[str] | None) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    command = [
        *(wrap or []),
        sys.executable,
        str(Path(calls.__file__)),
        mode,
        url,
        *([schema] if schema else []),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"journal probe {mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _sqlite_counts(workdir: Path) -> dict[str, dict[str, Any]]:
    """Named queries and statements per call; with strace, fsyncs and bytes written per call."""
    folder = workdir / "journal-count"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    url = f"sqlite:///{folder / 'journal.db'}"
    log = folder / "strace.log"
    strace = ["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,pwrite64,newfstatat", "-o", str(log)]
    counts = _probe("count", url, None, strace if shutil.which("strace") else None)
    if log.exists():
        for name, found in _syscalls(log.read_text(), counts["calls"]).items():
            counts.setdefault(name, {}).update(found)
    shutil.rmtree(folder, ignore_errors=True)
    return counts


def _syscalls(trace: str, per: int) -> dict[str, dict[str, float]]:
    """fsyncs and bytes written (pwrite64) between each way's two marks, per call."""
    out: dict[str, dict[str, float]] = {}
    current: str | None = None
    mark = re.compile(re.escape(calls.MARK) + r"(\w+)-(begin|end)")
    written = re.compile(r"^\d+\s+pwrite64\(.*\)\s*=\s*(\d+)")
    for line in trace.splitlines():
        found = mark.search(line)
        if found:
            current = found.group(1) if found.group(2) == "begin" else None
            if current:
                out[current] = {"fsyncs": 0.0, "written": 0.0}
        elif current is not None:
            if re.match(r"^\d+\s+f(data)?sync\(", line):
                out[current]["fsyncs"] += 1 / per
            elif match := written.match(line):
                out[current]["written"] += int(match.group(1)) / per
    return out


def _start_instructions(targets: list[tuple[Backend, str, str | None]], folder: Path) -> list[Any]:
    """The callgrind probes, one process per backend, started side by side (counts, not times)."""
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        for backend, _, _ in targets:
            backend.ir = "valgrind or a C compiler missing"
        return []
    shim = calls.build_shim(folder)
    env = {**os.environ, "SAFEPOINT_BENCH_SHIM": str(shim), "PYTHONPATH": str(SRC)}
    running = []
    for index, (backend, url, schema) in enumerate(targets):
        out = folder / f"cg-{index}.out"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no"]
        command.append(f"--callgrind-out-file={out}")
        command += [sys.executable, str(Path(calls.__file__)), "ir", url, *([schema] if schema else [])]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        running.append((backend, out, subprocess.Popen(command, env=env, **pipes)))  # type: ignore[call-overload]
    return running


def _finish_instructions(running: list[Any]) -> None:
    """Each probe's dumps, one per way: its instructions over its calls, less the empty loop's."""
    for backend, out, process in running:
        stdout, err = process.communicate()
        if process.returncode != 0:
            backend.ir = f"callgrind probe failed: {err.strip().splitlines()[-1] if err.strip() else '?'}"
            continue
        counted = json.loads(stdout.strip().splitlines()[-1])["calls"]
        totals = {}
        for dump in out.parent.glob(out.name + ".*"):
            text = dump.read_text()
            label = re.search(r"^desc: Trigger: Client Request: (\w+)", text, re.M)
            total = re.search(r"^totals: (\d+)", text, re.M)
            if label and total:
                totals[label.group(1)] = int(total.group(1))
        empty = totals.pop("empty", 0)
        backend.ir = {name: (count - empty) / counted for name, count in totals.items()}


def _count(workdir: Path, pg_url: str | None, p: calls.Payloads, lite: Backend, pg: Backend) -> None:
    """Everything counted without a clock, side by side: instructions (two callgrind processes),
    then, meanwhile, queries, statements, fsyncs and bytes written per call, and bytes per call."""
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="safepoint-journal-")))
        ir_db = workdir / "journal-ir" / "journal.db"
        shutil.rmtree(ir_db.parent, ignore_errors=True)
        targets: list[tuple[Backend, str, str | None]] = [(lite, f"sqlite:///{ir_db}", None)]
        if pg.skipped is None and pg_url is not None:
            targets.append((pg, pg_url, stack.enter_context(pg_server.scratch_schema(pg_url, "journal_ir"))))
        running = _start_instructions(targets, folder)
        lite.counts = _sqlite_counts(workdir)
        lite.sizes = _sqlite_sizes(workdir / "journal-sizes", p)
        if pg.skipped is None and pg_url is not None:
            with pg_server.scratch_schema(pg_url, "journal_count") as schema:
                pg.counts = _probe("count", pg_url, schema, None)
            with pg_server.scratch_schema(pg_url, "journal_bytes") as schema:
                pg.sizes = _pg_sizes(pg_url, schema, p)
        _finish_instructions(running)
        shutil.rmtree(ir_db.parent, ignore_errors=True)


def run(
    workdir: Path, pg_url: str | None = pg_server.DEFAULT_URL, log: Callable[[str], None] = print
) -> Result:
    """The section's measurements: timed ones alone, one after the other, then the counted ones."""
    began = time.perf_counter()
    described = machine.describe(workdir)
    p = calls.payloads()
    lite = _sqlite(workdir, p)
    log("journal: SQLite " + ", ".join(f"{name} {s.ms():.3f} ms" for name, s in lite.series.items()))
    pg = _postgres(pg_url, p)
    log(
        "journal: PostgreSQL "
        + (pg.skipped or ", ".join(f"{n} {s.ms():.3f} ms" for n, s in pg.series.items()))
    )
    turn = journal_turn.run(workdir)
    log(f"journal: LangGraph turn: {turn.skipped or 'timed'}")
    _count(workdir, pg_url, p, lite, pg)
    log("journal: counted")
    labels = {way.name: way.label for way in [*calls.ways(p), *calls.reads(p)]}
    labels.update(save=calls.Saver.label, floor="floor: a bare durable commit of a 2 KB row")
    labels["model_unscrubbed"] = "4 KB model response: record alone, store opened with `scrubber=False`"
    seconds = time.perf_counter() - began
    return Result(described, [lite, pg], turn, labels, seconds, machine.load_average())
