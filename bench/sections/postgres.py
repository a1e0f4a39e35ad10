"""The PostgreSQL section: saves/s with 1 and 8 writers against raw commits and PostgresSaver,
per-step save time, and claims/s with 8 workers, all on one server in one run.

Every client is a ``pg_writer.py`` child process (so 8 writers are not capped
by one interpreter's GIL) driven in lockstep phases by ``sections.pg_phases.Writers``:

1. **1 writer**, ``reps`` times: one child alternates blocks of ``BLOCK``
   safepoint saves (its own run, ``steps`` agent steps) with blocks of
   ``BLOCK`` raw INSERT commits, on fresh schemas each repetition.
2. **8 writers**: eight children, each with its own run, do the same in
   lockstep: all save a block, then all commit a raw block, and so on.
3. **LangGraph PostgresSaver**: 1 writer, then 8 writers, each on its own
   thread, ``langgraph_steps`` (1 writer) / ``langgraph_steps_8`` (8) agent
   steps. Its cost per step grows with the run's length, so it runs shorter
   runs, and safepoint is compared over the same first steps of its runs.
4. **Claims**: ``claim_runs`` runs queued (step 0 saved, ``enqueue``), then 8
   workers claim and release until the queue is empty; then as many runs
   again, each claimed, loaded, saved one step under the lease and released.
5. **LangGraph adapter** (issue 8): one child with two contenders in
   alternating phases, ``SafepointSaver`` over a safepoint store
   (``adapter_turns`` turns) and ``PostgresSaver`` (``langgraph_steps``
   turns), each on its own schema, with bytes and ``get_state`` probed.
6. **Large tool outputs** (issue 5): one child, ``blob_steps`` steps of
   ``workloads.blobs`` (1 MB outputs) saved by a safepoint store at its
   defaults (blobs in its own table) and run through ``PostgresSaver``, in
   alternating phases of 10 steps; then the bytes in each schema.

Every experiment has schemas of its own, dropped at the end.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import pg_server
import psycopg
from contenders import raw_postgres
from pg_server import CpuSample
from psycopg import sql
from workloads import blobs as blob_workload

import safepoint
from sections.pg_phases import Tally, Writers

BLOCK = 50
WRITERS = 8
CLAIMERS = 8


@dataclass(frozen=True, slots=True)
class Throughput:
    """One contender's phases in one experiment: operations, summed phase wall time, CPU."""

    name: str
    writers: int
    ops: int
    seconds: float
    cpu: CpuSample
    wal_bytes: int  # the server's WAL written during the phases
    phase_ops: list[int]
    phase_seconds: list[float]
    op_seconds: list[list[float]]  # per writer, one entry per operation
    op_cpu: list[list[float]] = field(default_factory=list)  # per writer, CPU per operation (safepoint)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds

    def prefix_rate(self, per_writer: int) -> float:
        """Operations/s over the phases that covered each writer's first ``per_writer`` operations."""
        ops = seconds = 0.0
        for n, s in zip(self.phase_ops, self.phase_seconds, strict=True):
            if ops >= per_writer * self.writers:
                break
            ops, seconds = ops + n, seconds + s
        return ops / seconds


@dataclass(frozen=True, slots=True)
class AdapterRun:
    """One LangGraph checkpointer's turns: seconds per ``invoke``, and probes by turn."""

    saver: str
    seconds: list[float]
    probe_bytes: dict[int, int]
    get_state: dict[int, list[float]]


@dataclass(frozen=True, slots=True)
class BlobRun:
    """One contender's steps of the large-output agent: seconds per step, bytes at the end."""

    name: str
    seconds: list[float]
    stored_bytes: int


@dataclass(slots=True)
class PgResults:
    url: str
    skipped: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    steps: int = 0
    langgraph_steps: int = 0
    langgraph_steps_8: int = 0
    claim_runs: int = 0
    adapter_turns: int = 0
    one: list[tuple[Throughput, Throughput]] = field(default_factory=list)  # (safepoint, raw) per rep
    eight: tuple[Throughput, Throughput] | None = None
    # The same two rows in one bare statement (contenders/floor_postgres.py), beside each experiment above.
    floor_one: list[Throughput] = field(default_factory=list)
    floor_eight: Throughput | None = None
    langgraph_one: Throughput | None = None
    langgraph_eight: Throughput | None = None
    claims: Throughput | None = None
    claim_save: Throughput | None = None
    adapter: dict[str, AdapterRun] = field(default_factory=dict)  # "safepoint" / "postgres"
    blob_steps: int = 0
    blob_unique_bytes: int = 0  # unique content bytes of those steps
    blob_kinds: list[str] = field(default_factory=list)  # per step: "small", "new" or "repeat"
    blobs: dict[str, BlobRun] = field(default_factory=dict)  # "safepoint" / "postgres"
    facts: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def run(
    url: str,
    *,
    steps: int,
    reps: int,
    langgraph_steps: int,
    langgraph_steps_8: int,
    claim_runs: int,
    langgraph: bool = True,
    adapter_turns: int = 0,
    blob_steps: int = 0,
) -> PgResults:
    began = time.perf_counter()
    results = PgResults(url=url, steps=steps, claim_runs=claim_runs)
    results.adapter_turns = adapter_turns if langgraph else 0
    results.blob_steps = blob_steps if langgraph else 0
    if langgraph:
        results.langgraph_steps, results.langgraph_steps_8 = langgraph_steps, langgraph_steps_8
    reason = pg_server.unreachable(url)
    if reason is not None:
        results.skipped = f"the server at {url} could not be reached ({reason}); start it, or pass `--pg-url`"
        _log(f"PostgreSQL skipped: {results.skipped}")
        return results
    try:
        _measure(results, reps=reps, langgraph=langgraph, adapter_turns=adapter_turns)
    except (psycopg.Error, RuntimeError) as exc:  # e.g. the server restarted under the benchmark
        results.skipped = f"the section failed during the run ({type(exc).__name__}: {exc})"
        _log(f"PostgreSQL section failed: {exc}")
    results.seconds = time.perf_counter() - began
    return results


def _measure(results: PgResults, *, reps: int, langgraph: bool, adapter_turns: int) -> None:
    url, steps = results.url, results.steps
    results.settings = pg_server.settings(url)
    for rep in range(1, reps + 1):
        *pair, floor = _versus_raw(url, 1, steps, results.facts if rep == 1 else None)
        results.one.append((pair[0], pair[1]))
        results.floor_one.append(floor)
        _log(f"PostgreSQL 1 writer rep {rep}: {pair[0].rate:,.0f} saves/s, raw {pair[1].rate:,.0f} commits/s")
    *pair, results.floor_eight = _versus_raw(url, WRITERS, steps, None)
    results.eight = (pair[0], pair[1])
    _log(
        f"PostgreSQL {WRITERS} writers: {results.eight[0].rate:,.0f} saves/s, "
        f"raw {results.eight[1].rate:,.0f} commits/s"
    )
    if langgraph:
        results.langgraph_one = _langgraph(url, 1, results.langgraph_steps, results.facts)
        _log(f"PostgresSaver 1 writer: {results.langgraph_one.rate:,.1f} steps/s")
        results.langgraph_eight = _langgraph(url, WRITERS, results.langgraph_steps_8, None)
        _log(f"PostgresSaver {WRITERS} writers: {results.langgraph_eight.rate:,.1f} steps/s")
    results.claims, results.claim_save = _claims(url, results.claim_runs, results.facts)
    _log(
        f"claims with {CLAIMERS} workers: {results.claims.rate:,.0f}/s; "
        f"claim+load+save+release: {results.claim_save.rate:,.0f} runs/s"
    )
    if langgraph and adapter_turns:
        results.adapter = _adapter(url, adapter_turns, results.langgraph_steps)
        for name, done in results.adapter.items():
            _log(f"PostgreSQL adapter: {name} {len(done.seconds)} turns in {sum(done.seconds):.1f} s")
    if results.blob_steps:
        results.blobs = _blobs(url, results.blob_steps)
        workload = blob_workload.build(results.blob_steps)
        results.blob_unique_bytes = workload.unique_content_bytes()
        results.blob_kinds = workload.kinds
        for name, blob_run in results.blobs.items():
            _log(f"PostgreSQL large outputs: {name} {blob_run.stored_bytes:,} bytes")


# -- experiments ----------------------------------------------------------------


def _versus_raw(
    url: str, writers: int, steps: int, facts: dict[str, str] | None
) -> tuple[Throughput, Throughput, Throughput]:
    """``writers`` children alternating blocks of BLOCK operations: safepoint saves, raw commits, the floor.

    The floor writes into tables of its own, made by the store (same
    columns, same indexes), so the facts read from the store's schema
    afterwards are the saves' alone.
    """
    with (
        pg_server.scratch_schema(url, "sp") as schema,
        pg_server.scratch_schema(url, "raw", create=True) as raw_schema,
        pg_server.scratch_schema(url, "floor") as floor_schema,
    ):
        for tables in (schema, floor_schema):  # the tables, before the children start
            safepoint.open_store(url, schema=tables).close()
        raw_postgres.create_table(url, raw_schema)
        specs = [
            [
                {"name": "safepoint", "kind": "safepoint", "url": url, "schema": schema}
                | {"steps": steps, "index": i},
                {"name": "raw", "kind": "raw", "url": url, "schema": raw_schema, "index": i},
                {"name": "floor", "kind": "floor", "url": url, "schema": floor_schema}
                | {"steps": steps, "index": i},
            ]
            for i in range(writers)
        ]
        with Writers(specs, wal_url=url) as group:
            done = 0
            while done < steps:
                count = min(BLOCK, steps - done)
                group.phase("safepoint", count)
                group.phase("raw", count)
                group.phase("floor", count)
                done += count
            children = group.finish()
        if facts is not None:
            facts.update(_store_facts(url, schema, steps))
    return (
        _throughput("safepoint", group.tallies["safepoint"], children, writers),
        _throughput("raw", group.tallies["raw"], children, writers),
        _throughput("floor", group.tallies["floor"], children, writers),
    )


def _langgraph(url: str, writers: int, steps: int, facts: dict[str, str] | None) -> Throughput:
    from contenders import langgraph_postgres  # noqa: PLC0415 (LangGraph loads only when this part runs)

    with pg_server.scratch_schema(url, "lg", create=True) as schema:
        langgraph_postgres.setup(url, schema)
        specs = [
            [{"name": "langgraph", "kind": "langgraph", "url": url, "schema": schema, "index": i}]
            for i in range(writers)
        ]
        for spec in specs:
            spec[0]["steps"] = steps
        with Writers(specs, wal_url=url) as group:
            done = 0
            while done < steps:
                count = min(BLOCK, steps - done)
                group.phase("langgraph", count)
                done += count
            children = group.finish()
        if facts is not None:
            size = _relation_bytes(url, schema)
            facts["PostgresSaver: bytes in its tables after its 1-writer run"] = (
                f"{size:,} B after {steps} steps"
            )
    return _throughput("langgraph", group.tallies["langgraph"], children, writers)


def _adapter(url: str, safepoint_turns: int, postgres_turns: int) -> dict[str, AdapterRun]:
    """SafepointSaver and PostgresSaver in one child, alternating phases of BLOCK turns."""
    from contenders import langgraph_postgres  # noqa: PLC0415 (LangGraph loads only when this part runs)

    turns = {"safepoint": safepoint_turns, "postgres": postgres_turns}
    with (
        pg_server.scratch_schema(url, "ad_sp") as sp_schema,
        pg_server.scratch_schema(url, "ad_lg", create=True) as lg_schema,
    ):
        langgraph_postgres.setup(url, lg_schema)
        schemas = {"safepoint": sp_schema, "postgres": lg_schema}
        spec = [
            {
                "name": name,
                "kind": "langgraph",
                "saver": name,
                "url": url,
                "schema": schemas[name],
                "index": 0,
                "steps": turns[name],
                "probes": sorted({p for p in (10, 100, turns[name]) if p <= turns[name]}),
            }
            for name in turns
        ]
        with Writers([spec]) as group:
            done = dict.fromkeys(turns, 0)
            while any(done[name] < total for name, total in turns.items()):
                for name, total in turns.items():
                    if done[name] < total:
                        done[name] += group.phase(name, min(BLOCK, total - done[name]))
            (child,) = group.finish()
    return {
        name: AdapterRun(
            saver=name,
            seconds=child[name]["seconds"],
            probe_bytes={int(t): p["bytes"] for t, p in child[name]["probes"].items()},
            get_state={int(t): p["get_state"] for t, p in child[name]["probes"].items()},
        )
        for name in turns
    }


def _blobs(url: str, steps: int) -> dict[str, BlobRun]:
    """safepoint and PostgresSaver on the large-output agent, in one child, alternating phases."""
    from contenders import langgraph_postgres  # noqa: PLC0415 (LangGraph loads only when this part runs)

    with (
        pg_server.scratch_schema(url, "bl_sp") as sp_schema,
        pg_server.scratch_schema(url, "bl_lg", create=True) as lg_schema,
    ):
        langgraph_postgres.setup(url, lg_schema)
        safepoint.open_store(url, schema=sp_schema).close()
        schemas = {"safepoint": sp_schema, "postgres": lg_schema}
        common = {"url": url, "index": 0, "steps": steps, "workload": "blobs"}
        spec = [
            {"name": "safepoint", "kind": "safepoint", "schema": sp_schema} | common,
            {"name": "postgres", "kind": "langgraph", "saver": "postgres", "schema": lg_schema} | common,
        ]
        with Writers([spec]) as group:
            done = 0
            while done < steps:
                count = min(10, steps - done)
                for name in schemas:
                    group.phase(name, count)
                done += count
            (child,) = group.finish()
        return {
            name: BlobRun(name, child[name]["seconds"], langgraph_postgres.schema_bytes(url, schema))
            for name, schema in schemas.items()
        }


def _claims(url: str, runs: int, facts: dict[str, str]) -> tuple[Throughput, Throughput]:
    per_worker = -(-runs // CLAIMERS)
    with pg_server.scratch_schema(url, "claims") as schema:
        safepoint.open_store(url, schema=schema).close()
        common = {"url": url, "schema": schema}
        specs = [
            [
                {"name": "fill", "kind": "fill", "prefix": "queued", "index": i} | common,
                {"name": "claim", "kind": "claim", "index": i} | common,
                {"name": "claim_save", "kind": "claim_save", "index": i} | common,
            ]
            for i in range(CLAIMERS)
        ]
        with Writers(specs, wal_url=url) as group:
            group.phase("fill", per_worker)
            claimed = group.phase("claim", 10 * per_worker)
            left = _scalar(url, schema, "SELECT count(*) FROM safepoint_runs WHERE queued_at IS NOT NULL")
            group.phase("fill", per_worker)
            finished = group.phase("claim_save", 10 * per_worker)
            children = group.finish()
        done = _scalar(url, schema, "SELECT count(*) FROM safepoint_runs WHERE status = 'done'")
        queued = CLAIMERS * per_worker
        facts["claims: runs queued / claimed and released / left queued"] = f"{queued} / {claimed} / {left}"
        facts["claim+load+save+release: runs queued / finished / status done"] = (
            f"{queued} / {finished} / {done}"
        )
    return (
        _throughput("claim", group.tallies["claim"], children, CLAIMERS),
        _throughput("claim_save", group.tallies["claim_save"], children, CLAIMERS),
    )


# -- helpers ----------------------------------------------------------------------


def _throughput(name: str, tally: Tally, children: list[dict[str, Any]], writers: int) -> Throughput:
    return Throughput(
        name=name,
        writers=writers,
        ops=tally.ops,
        seconds=tally.seconds,
        cpu=tally.cpu,
        wal_bytes=tally.wal_bytes,
        phase_ops=tally.phase_ops,
        phase_seconds=tally.phase_seconds,
        op_seconds=[child[name]["seconds"] for child in children],
        op_cpu=[child[name]["cpu"] for child in children if "cpu" in child[name]],
    )


def _store_facts(url: str, schema: str, steps: int) -> dict[str, str]:
    """What one writer's run left: table sizes, and how the run row was updated (HOT or not)."""
    row = _row(
        url,
        schema,
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE schemaname = current_schema() AND relname = 'safepoint_runs'",
    )
    indexes = _row(
        url,
        schema,
        "SELECT string_agg(indexrelname, ', ' ORDER BY indexrelname) FROM pg_stat_user_indexes "
        "WHERE schemaname = current_schema() AND relname = 'safepoint_runs'",
    )
    return {
        "safepoint: bytes in its tables after one writer's run": (
            f"{_relation_bytes(url, schema):,} B after {steps} steps (indexes and TOAST included)"
        ),
        "safepoint: run-row updates / of which HOT": f"{row[0]} / {row[1]}" if row else "unknown",
        "safepoint: indexes on safepoint_runs": str(indexes[0]) if indexes else "unknown",
    }


def _relation_bytes(url: str, schema: str) -> int:
    value = _scalar(
        url,
        schema,
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r'",
    )
    return int(value)


def _scalar(url: str, schema: str, query: str) -> Any:
    row = _row(url, schema, query)
    return row[0] if row else None


def _row(url: str, schema: str, query: str) -> tuple[Any, ...] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn.execute(sql.SQL(query)).fetchone()  # type: ignore[arg-type]


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
