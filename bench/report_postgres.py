"""The PostgreSQL section of docs/benchmarks.md, from ``postgres_section.PgResults``."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence

from agent_workload import MESSAGE_BYTES, TOOL_EVERY, TOOL_OUTPUT_BYTES
from claims import LEASE_SECONDS
from common import WINDOW, window, window_mean, window_median
from fmt import TIMES, Target, targets_table
from fmt import ms as _ms
from fmt import table as _table
from fmt import x as _x
from postgres_section import BLOCK, CLAIMERS, WRITERS, PgResults, Throughput
from raw_postgres import ROW_BYTES

ANCHOR = "postgresql"
TARGET_RAW = 0.7
TARGET_LANGGRAPH = 3.0
TARGET_GROWTH = 1.1


def render(pg: PgResults | None) -> str:
    if pg is None:
        return "## PostgreSQL\n\nSkipped: `--no-postgres` was given."
    if pg.skipped is not None:
        return f"## PostgreSQL\n\nSkipped: {pg.skipped}."
    parts = [
        _intro(pg),
        _targets(pg),
        _throughput(pg),
        _step_times(pg),
        _claims(pg),
        _cpu(pg),
        _settings(pg),
        _method(pg),
    ]
    return "\n\n".join(p.strip("\n") for p in parts)


# -- helpers -----------------------------------------------------------------------


def _one_rate(pg: PgResults, index: int) -> float:
    """Median over repetitions of the 1-writer rate of safepoint (0) or raw (1)."""
    return statistics.median(pair[index].rate for pair in pg.one)


def _one_ratio(pg: PgResults) -> float:
    return statistics.median(sp.rate / raw.rate for sp, raw in pg.one)


def _one_prefix(pg: PgResults, steps: int) -> float:
    return statistics.median(sp.prefix_rate(steps) for sp, _raw in pg.one)


def _growth(series: Sequence[Sequence[float]], first: int, last: int) -> tuple[float, float]:
    return (
        window_median(series, last) / window_median(series, first),
        window_mean(series, last) / window_mean(series, first),
    )


def _probes(pg: PgResults) -> tuple[int, ...]:
    return tuple(sorted({p for p in (10, 100, pg.steps) if p <= pg.steps}))


def _one_series(pg: PgResults) -> list[list[float]]:
    return [run for sp, _raw in pg.one for run in sp.op_seconds]


def _one_cpu(pg: PgResults) -> list[list[float]]:
    return [run for sp, _raw in pg.one for run in sp.op_cpu]


# -- sections -----------------------------------------------------------------------


def _intro(pg: PgResults) -> str:
    s = pg.settings
    return f"""
## PostgreSQL

The same simulated agent against PostgreSQL {s.get("server_version", "?")} on this machine
(`{pg.url}`), in the same run, {pg.seconds / 60:.1f} minutes of it. **Client and server
share the machine's cores** (see "Where the CPU goes"): every number here is
what both sides together can do on this box, not a server's capacity. Every
client is a separate process (`bench/pg_writer.py`), so 8 writers are not capped
by one interpreter's GIL. Durability is the server's default:
`synchronous_commit = {s.get("synchronous_commit", "?")}`, `fsync = {s.get("fsync", "?")}`,
`wal_sync_method = {s.get("wal_sync_method", "?")}` (all settings below).
"""


def targets(pg: PgResults | None) -> list[Target]:
    """Issue 3's targets as measured (none when the section was skipped)."""
    if pg is None or pg.skipped is not None:
        return []
    rows = []
    if pg.eight is not None:
        sp, raw = pg.eight
        ratio = sp.rate / raw.rate
        rows.append(
            Target(
                "#3",
                f"PostgreSQL saves/s, {WRITERS} writers / raw 1-row commits/s, {WRITERS} connections",
                f"{_x(ratio)} ({sp.rate:,.0f} / {raw.rate:,.0f})",
                f"≥ {TARGET_RAW}{TIMES}",
                ratio >= TARGET_RAW,
                ANCHOR,
            )
        )
    if pg.eight is not None and pg.langgraph_eight is not None:
        n = pg.langgraph_steps_8
        sp_rate, lg_rate = pg.eight[0].prefix_rate(n), pg.langgraph_eight.rate
        rows.append(
            Target(
                "#3",
                f"PostgreSQL saves/s, {WRITERS} writers / PostgresSaver steps/s, {WRITERS} writers "
                f"(steps 1-{n} of each run)",
                f"{_x(sp_rate / lg_rate)} ({sp_rate:,.0f} / {lg_rate:,.1f})",
                f"≥ {TARGET_LANGGRAPH:g}{TIMES}",
                sp_rate / lg_rate >= TARGET_LANGGRAPH,
                ANCHOR,
            )
        )
    probes = _probes(pg)
    if pg.one and len(probes) > 1:
        first, last = probes[0], probes[-1]
        median, mean = _growth(_one_series(pg), first, last)
        for label, value in (("window median", median), ("window mean", mean)):
            rows.append(
                Target(
                    "#3",
                    f"PostgreSQL save time, step {last} / step {first}, 1 writer ({label})",
                    _x(value),
                    f"≤ {TARGET_GROWTH}{TIMES}",
                    value <= TARGET_GROWTH,
                    ANCHOR,
                )
            )
    return rows


def _targets(pg: PgResults) -> str:
    rows = targets(pg)
    info = []
    if pg.one:
        info.append(
            [
                "Saves/s, 1 writer / raw 1-row commits/s, 1 connection (median over repetitions)",
                f"{_x(_one_ratio(pg))} ({_one_rate(pg, 0):,.0f} / {_one_rate(pg, 1):,.0f})",
            ]
        )
    if pg.one and pg.langgraph_one is not None:
        n = pg.langgraph_steps
        sp_rate = _one_prefix(pg, n)
        info.append(
            [
                f"Saves/s, 1 writer / PostgresSaver steps/s, 1 writer (steps 1-{n})",
                f"{_x(sp_rate / pg.langgraph_one.rate)} ({sp_rate:,.0f} / {pg.langgraph_one.rate:,.1f})",
            ]
        )
    if pg.claims is not None:
        info.append([f"Claims/s, {CLAIMERS} workers (claim + release)", f"{pg.claims.rate:,.0f}"])
    return f"""
### safepoint on PostgreSQL against its targets (issue 3)

{targets_table(rows)}

Without a target, for context:

{_table(["Measure", "Value"], info)}
"""


def _row(label: str, t: Throughput, digits: int = 0) -> list[str]:
    mean = statistics.fmean(s for run in t.op_seconds for s in run)
    return [
        label,
        str(t.writers),
        f"{t.ops:,}",
        f"{t.seconds:.2f} s",
        f"{t.rate:,.{digits}f}",
        _ms(mean),
        _ms(t.cpu.server / t.ops),
        _ms(t.cpu.clients / t.ops),
        f"{t.cpu.busy / (t.cpu.busy + t.cpu.idle):.0%}" if t.cpu.busy + t.cpu.idle else "—",
        f"{t.wal_bytes / t.ops:,.0f} B",
    ]


def _throughput(pg: PgResults) -> str:
    rows = []
    for i, (sp, raw) in enumerate(pg.one, 1):
        rows.append(_row(f"safepoint `save`, rep {i}", sp))
        rows.append(_row(f"raw INSERT commit, rep {i}", raw))
    if pg.eight is not None:
        rows.append(_row("safepoint `save`", pg.eight[0]))
        rows.append(_row("raw INSERT commit", pg.eight[1]))
    if pg.langgraph_one is not None:
        rows.append(_row(f"PostgresSaver `invoke` ({pg.langgraph_steps} steps)", pg.langgraph_one, 1))
    if pg.langgraph_eight is not None:
        rows.append(
            _row(f"PostgresSaver `invoke` ({pg.langgraph_steps_8} steps each)", pg.langgraph_eight, 1)
        )
    head = [
        "Operation",
        "writers",
        "operations",
        "phase time",
        "per second",
        "mean latency",
        "server CPU / op",
        "client CPU / op",
        "machine busy",
        "WAL / op",
    ]
    ratios = []
    if pg.one and pg.eight is not None:
        ratios.append(
            ["safepoint saves/s / raw commits/s", _x(_one_ratio(pg)), _x(pg.eight[0].rate / pg.eight[1].rate)]
        )
    if pg.one and pg.eight is not None and pg.langgraph_one is not None and pg.langgraph_eight is not None:
        one = _one_prefix(pg, pg.langgraph_steps) / pg.langgraph_one.rate
        eight = pg.eight[0].prefix_rate(pg.langgraph_steps_8) / pg.langgraph_eight.rate
        ratios.append(
            [
                f"safepoint saves/s / PostgresSaver steps/s (steps 1-{pg.langgraph_steps} with 1 writer, "
                f"1-{pg.langgraph_steps_8} with {WRITERS})",
                _x(one),
                _x(eight),
            ]
        )
    if pg.one and pg.eight is not None:
        ratios.append(
            [
                f"{WRITERS} writers / 1 writer, same operation: safepoint / raw",
                "",
                f"{_x(pg.eight[0].rate / _one_rate(pg, 0))} / {_x(pg.eight[1].rate / _one_rate(pg, 1))}",
            ]
        )
    return f"""
### Saves per second: 1 and {WRITERS} writers, against raw commits and PostgresSaver

Each writer is its own process with its own run (or thread, or connection).
Writers run in lockstep phases: all of them do {BLOCK} operations of one kind,
and the phase ends when the slowest is done; safepoint and raw phases
alternate, so both meet the same server at the same moments. "per second" is
operations / summed phase time. "mean latency" is the mean time of one call
as its writer saw it. CPU columns are CPU seconds used during the phases by
all PostgreSQL processes ("server") and by the writer processes ("client"),
per operation, read from `/proc`; "machine busy" is the share of both cores
in use; "WAL / op" is the server's WAL written during the phases per
operation (`pg_current_wal_insert_lsn()` before and after each phase).
PostgresSaver writes the whole message list at every step, so its
cost grows with the run; it ran shorter runs, and the ratios compare it with
safepoint over the same first steps of safepoint's runs (safepoint is flat, so
longer runs only widen the gap).

{_table(head, rows)}

{_table(["Ratio", "1 writer", f"{WRITERS} writers"], ratios)}
"""


def _step_times(pg: PgResults) -> str:
    if not pg.one:
        return ""
    one, cpu = _one_series(pg), _one_cpu(pg)
    eight = pg.eight[0].op_seconds if pg.eight is not None else None
    lg = pg.langgraph_one.op_seconds if pg.langgraph_one is not None else None
    probes = _probes(pg)
    steps = sorted(set(probes) | ({pg.langgraph_steps} if lg else set()))
    rows = []
    for step in steps:
        span = window(step, pg.steps if step in probes else pg.langgraph_steps)
        row = [f"{step} (steps {span.start}-{span.stop - 1})"]
        if step in probes:
            row += [_ms(window_median(one, step)), _ms(window_mean(one, step)), _ms(window_median(cpu, step))]
            row += [_ms(window_median(eight, step))] if eight is not None else ["—"]
        else:
            row += ["—", "—", "—", "—"]
        if lg is not None:
            row.append(_ms(window_median(lg, step)) if step <= pg.langgraph_steps else "—")
        rows.append(row)
    first, last = probes[0], probes[-1]
    growth = ["growth (last / first)"]
    growth += [
        _x(_growth(one, first, last)[0]),
        _x(_growth(one, first, last)[1]),
        _x(_growth(cpu, first, last)[0]),
    ]
    growth.append(_x(_growth(eight, first, last)[0]) if eight is not None else "—")
    if lg is not None:
        lg_last = pg.langgraph_steps
        growth.append(f"{_x(_growth(lg, first, lg_last)[0])} (step {lg_last} / {first})")
    rows.append(growth)
    head = [
        "Step",
        "1 writer: `save` median",
        "1 writer: mean",
        "1 writer: client CPU median",
        f"{WRITERS} writers: `save` median",
    ]
    if lg is not None:
        head.append("PostgresSaver 1 writer: `invoke` median")
    reps = len(pg.one)
    return f"""
### Time per save

Window medians and means ({WINDOW} consecutive steps around the step named,
as in the SQLite section) of the time inside `store.save(cp)`: 1 writer pooled
over {reps} repetition(s), {WRITERS} writers pooled over the writers (each
save then also waits for the CPU the other writers use). "client CPU" is the
CPU time of the saving thread (serialization, psycopg), without the server's
work or the waits.

{_table(head, rows)}
"""


def _claims(pg: PgResults) -> str:
    if pg.claims is None or pg.claim_save is None:
        return ""
    rows = [
        _row("`claim` + `release`", pg.claims),
        _row("`claim` + `load` + `save` + `release(status=done)`", pg.claim_save),
    ]
    claim = [s for run in pg.claims.op_seconds for s in run]
    head = [
        "Per run",
        "workers",
        "runs",
        "phase time",
        "per second",
        "mean latency",
        "server CPU / op",
        "client CPU / op",
        "machine busy",
        "WAL / op",
    ]
    checks = [[k, v] for k, v in pg.facts.items() if k.startswith("claim")]
    return f"""
### Claims with {CLAIMERS} workers

{pg.claim_runs:,} runs were queued (each with a step-0 checkpoint, then
`store.enqueue(run_id)`); {CLAIMERS} worker processes then looped
`lease = store.claim(worker_id, lease={LEASE_SECONDS})` → `store.release(lease)`
until a claim came back empty. Then as many new runs were queued and each
claimed, loaded (`store.load`), advanced one agent step (two messages,
counters, cursor, state), saved under the lease (`store.save(cp,
lease=lease)`) and released as done — a `safepoint.Worker`'s work for a
one-step run, without its heartbeat thread. Median claim+release latency:
{_ms(statistics.median(claim))}.

{_table(head, rows)}

{_table(["Check", "Value"], checks)}
"""


def _cpu(pg: PgResults) -> str:
    rows = []
    named: list[tuple[str, Throughput | None]] = []
    if pg.one:
        named += [
            ("safepoint `save`, 1 writer (rep 1)", pg.one[0][0]),
            ("raw commit, 1 connection", pg.one[0][1]),
        ]
    if pg.eight is not None:
        named += [(f"safepoint `save`, {WRITERS} writers", pg.eight[0])]
        named += [(f"raw commit, {WRITERS} connections", pg.eight[1])]
    named += [(f"PostgresSaver `invoke`, {WRITERS} writers", pg.langgraph_eight)]
    named += [(f"claim + release, {CLAIMERS} workers", pg.claims)]
    for label, t in named:
        if t is None:
            continue
        total = t.cpu.server + t.cpu.clients
        rows.append(
            [
                label,
                _ms(t.cpu.server / t.ops),
                _ms(t.cpu.clients / t.ops),
                f"{t.cpu.server / total:.0%}" if total else "—",
                _ms(t.cpu.busy / t.ops),
                f"{t.cpu.busy / (t.cpu.busy + t.cpu.idle):.0%}" if t.cpu.busy + t.cpu.idle else "—",
            ]
        )
    head = [
        "Operation",
        "server CPU / op",
        "client CPU / op",
        "server share",
        "machine CPU / op",
        "machine busy",
    ]
    return f"""
### Where the CPU goes: server vs client

Client and server share this machine's cores, so with {WRITERS} writers the
throughput is capped by the CPU both sides need per operation: at 100% busy
on {os.cpu_count()} cores, saves/s ≈ cores / machine CPU per save. Server CPU is
every `postgres` process (backends, WAL writer, checkpointer, and backends
that exited, through the postmaster's children times); client CPU is the
writer processes; machine CPU also counts everything else running
(this benchmark's parent, the kernel's interrupts). For where a save's time
goes inside each side (client CPU by package, each statement's server time
and WAL, and what saving through `ops.save`, a HOT run-row update or pglz
instead of lz4 would change, beside a floor of the same two rows in one bare
statement), run `.venv/bin/python bench/profile_postgres.py`.

{_table(head, rows)}
"""


def _settings(pg: PgResults) -> str:
    rows = [[f"`{k}`", v] for k, v in pg.settings.items()]
    rows += [[k, v] for k, v in pg.facts.items() if not k.startswith("claim")]
    return f"""
### Server settings and facts as measured

Read with `SHOW` on the server the benchmark used; nothing was changed for
the benchmark. With `synchronous_commit = on` a commit returns after its WAL
is flushed (`wal_sync_method`), so every save, raw commit and PostgresSaver
write here is durable when it returns.

{_table(["Setting", "Value"], rows)}
"""


def _method(pg: PgResults) -> str:
    return f"""
### Method (PostgreSQL)

- **safepoint writer** (`bench/postgres_store.py`): `safepoint.open_store(url,
  schema=…)` at its defaults (pool of 1-10 connections, statements prepared
  after 5 runs), one run per writer (`writer-<i>`), step 0 saved untimed, then
  {pg.steps} agent steps of `bench/agent_workload.py`: `cp.step += 1`, the step's two
  messages appended (a {MESSAGE_BYTES}-byte user message, or every {TOOL_EVERY}th step a
  {TOOL_OUTPUT_BYTES:,}-byte tool output, and a {MESSAGE_BYTES}-byte assistant reply), counters,
  cursor and state updated, `store.save(cp)` timed. All writers share one
  schema (so one set of tables and indexes), fresh for every experiment.
- **raw writer** (`bench/raw_postgres.py`): one psycopg connection in
  autocommit, `INSERT INTO raw_rows (body) VALUES (%s)` of {ROW_BYTES} random bytes
  into `raw_rows (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body
  bytea NOT NULL)`, in its own schema, shared by the raw writers; as many
  commits as saves, in alternating phases.
- **PostgresSaver writer** (`bench/langgraph_postgres.py`):
  `PostgresSaver.from_conn_string(…)` (its defaults: one autocommit
  connection, `prepare_threshold=0`, no pipeline) with the schema as the
  connection's `search_path`, `setup()` once, then the SQLite section's
  compiled `StateGraph` (`bench/lg_graph.py`: `messages` with `add_messages`,
  one node calling an offline fake chat model) and one `graph.invoke` per
  agent step on its own `thread_id`, default durability.
- **1 writer** ran {len(pg.one)} repetition(s) of {pg.steps} steps; **{WRITERS} writers**
  one run of {pg.steps} steps each; PostgresSaver {pg.langgraph_steps} steps with 1
  writer and {pg.langgraph_steps_8} steps each with {WRITERS}.
- Schemas (`bench_…`) are created for each experiment and dropped after it.
"""
