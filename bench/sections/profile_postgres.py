"""Where a safepoint save on PostgreSQL spends its time, and what changing it would buy.

    .venv/bin/python bench/sections/profile_postgres.py [--saves 1000] [--pg-url URL] [--skip-variants]

Not part of ``make bench`` (it takes a few minutes, and its variants are
experiments, not the library). It prints Markdown:

1. **Client CPU**: cProfile with a CPU-time clock (``time.thread_time``, so
   waits for the server do not count) over ``--saves`` saves of one run,
   grouped by package, and the costliest functions.
2. **Server, per statement**: every statement a save runs, explained with
   ``ANALYZE, BUFFERS, WAL`` as it runs in the real save transaction (same
   parameters, same transaction, committed as usual), named by the public
   trace hook; and the WAL a save writes (``pg_current_wal_lsn()`` before and
   after), against a raw 1-row commit.
3. **Variants**, in the benchmark's lockstep harness against raw commits,
   with 1 and 8 writers: the store as it is; the same without the
   ``safepoint_runs_updated`` index (so the run-row update is HOT) or with
   pglz instead of lz4 (before DDL revision 4); and a floor: the same two
   rows written by one autocommit statement (``contenders/floor_postgres.py``), with no
   checks and no safepoint client code, what any design on these tables
   costs at least.

How section 2 sees the plans: PostgreSQL's own ``auto_explain``, loaded into
the store's one pooled connection (``open_store(min_size=1, max_size=1)``;
the pool is the driver's ``pool``, there for tools), logs the plan of every
statement that connection runs as a NOTICE the connection's notice handler
keeps, and the trace hook (``safepoint.observe.QueryObserver``) names the
statements in the order they ran. Explaining captured statements again on a
separate connection would need their parameters, which the hook never
carries, and would run each write twice; auto_explain measures the one real
execution. Nothing is patched: the store runs as shipped, and every schema
is dropped afterwards.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script: the packages it imports live in bench/, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pg_server
import psycopg
from contenders import raw_postgres
from psycopg import sql
from workloads import agent as agent_workload

import safepoint
from safepoint.observe import Attributes, NoObserver
from sections.pg_phases import Writers

STEPS_BEFORE_EXPLAIN = 500  # saves before the explained ones: a run well under way
NOT_EXPLAINED = ("set_search_path",)  # the per-transaction schema, not the save's work
# auto_explain's settings for the profiled session: every statement, with what EXPLAIN's
# ANALYZE, BUFFERS and WAL options add, sent to the client (NOTICE) rather than the server log.
AUTO_EXPLAIN = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_buffers = on",
    "SET auto_explain.log_wal = on",
    "SET auto_explain.log_level = notice",
)
BLOCK = 50


# -- 1. client CPU ----------------------------------------------------------------


def client_profile(url: str, saves: int) -> str:
    steps = agent_workload.build(saves).steps
    with pg_server.scratch_schema(url, "prof") as schema:
        store = safepoint.open_store(url, schema=schema)
        cp = safepoint.Checkpoint(run_id="profiled")
        store.save(cp)
        profile = cProfile.Profile(time.thread_time)
        plain: list[float] = []
        for i, agent_step in enumerate(steps):
            _advance(cp, agent_step)
            if i % 2:  # every other save unprofiled: the CPU a save really takes
                start = time.thread_time()
                store.save(cp)
                plain.append(time.thread_time() - start)
            else:
                profile.enable()
                store.save(cp)
                profile.disable()
        store.close()
    stats = pstats.Stats(profile)
    groups: collections.Counter[str] = collections.Counter()
    total = 0.0
    for (file, _line, function), (_cc, _nc, own, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        groups[_group(file, function)] += own
        total += own
    profiled = len(steps) - len(plain)
    rows = [
        f"| {name} | {share / total:.1%} |"
        for name, share in groups.most_common(12)
        if share / total >= 0.005
    ]
    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # type: ignore[attr-defined]
    functions = [
        f"| `{_short(file)}:{line}({function})` | {nc:,} | {own / total:.1%} |"
        for (file, line, function), (_cc, nc, own, _cum, _callers) in top
    ]
    return "\n".join(
        [
            "## 1. Client CPU of a save",
            "",
            f"Unprofiled: {statistics.fmean(plain) * 1000:.3f} ms of CPU per save (mean of {len(plain)}).",
            f"Profiled ({profiled} saves, cProfile on `thread_time`; shares are what counts, "
            "cProfile inflates the absolute time):",
            "",
            "| Where | share of client CPU |",
            "|---|---|",
            *rows,
            "",
            "| Function | calls | own share |",
            "|---|---|---|",
            *functions,
        ]
    )


def _group(file: str, function: str) -> str:
    if "/safepoint/" in file:
        return "safepoint " + file.split("/safepoint/", 1)[1]
    for package in ("psycopg_pool", "psycopg"):
        if f"/{package}/" in file:
            return package
    if file == "~":
        return "builtins (" + function.strip("<>").split()[-1] + ")"
    return "stdlib " + file.rsplit("/", 1)[-1]


def _short(file: str) -> str:
    for marker in ("/site-packages/", "/src/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file.rsplit("/", 1)[-1]


def _advance(cp: safepoint.Checkpoint, agent_step: agent_workload.AgentStep) -> None:
    cp.step += 1
    agent_step.apply(cp)


# -- 2. server, per statement -------------------------------------------------------


_EXECUTION = re.compile(r"duration: ([\d.]+) ms")  # auto_explain's "duration: … ms  plan: …"
_WAL = re.compile(r"WAL: (.*)")
_BUFFERS = re.compile(r"^\s*Buffers: (.*)", re.MULTILINE)


class _Names(NoObserver):
    """The trace hook's side of section 2: each statement's name, in the order the driver ran them."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def query(self, name: str, seconds: float, attributes: Attributes) -> None:
        self.names.append(name)


def server_profile(url: str, saves: int) -> str:
    steps = agent_workload.build(STEPS_BEFORE_EXPLAIN + saves).steps
    plans: dict[str, list[str]] = collections.defaultdict(list)
    with pg_server.scratch_schema(url, "explain") as schema:
        observer = _Names()
        store = safepoint.open_store(url, schema=schema, min_size=1, max_size=1, observer=observer)
        cp = safepoint.Checkpoint(run_id="explained")
        store.save(cp)
        for agent_step in steps[:STEPS_BEFORE_EXPLAIN]:
            _advance(cp, agent_step)
            store.save(cp)
        wal_save = _wal_per(url, lambda: _save_next(store, cp, steps), saves // 2)
        notices: list[str] = []
        with store.driver.pool.connection() as conn:  # type: ignore[attr-defined]  # the pool's only one
            for setting in AUTO_EXPLAIN:
                conn.execute(setting)
            conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
        for _ in range(saves // 2):
            observer.names.clear()
            notices.clear()
            _save_next(store, cp, steps)
            # One plan per statement, in order (BEGIN and COMMIT have none, nor are they named).
            # A save too large to go alone goes as one message whose set_config, not named, comes first.
            if observer.names == ["save_next"] and len(notices) == 2:
                del notices[0]
            if len(notices) != len(observer.names):
                raise RuntimeError(f"{len(notices)} plans for the statements {observer.names}")
            for name, plan in zip(observer.names, notices, strict=True):
                if name not in NOT_EXPLAINED:
                    plans[name].append(plan)
        hot = _one(url, schema, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s")
        store.close()
    with pg_server.scratch_schema(url, "explainraw", create=True) as raw_schema:
        raw_postgres.create_table(url, raw_schema)
        writer = raw_postgres.RawWriter({"url": url, "schema": raw_schema, "index": 0})
        writer.block(50)
        wal_raw = _wal_per(url, lambda: writer.block(1), saves // 2)
        writer.close()
    rows = []
    for name, texts in plans.items():
        times = [float(m.group(1)) for t in texts if (m := _EXECUTION.search(t))]
        wal = [m.group(1) for t in texts if (m := _WAL.search(t))]
        buffers = [m.group(1) for t in texts if (m := _BUFFERS.search(t))]
        rows.append(
            f"| `{name}` | {statistics.median(times):.3f} ms | {statistics.fmean(times):.3f} ms | "
            f"{collections.Counter(wal).most_common(1)[0][0] if wal else '—'} | "
            f"{collections.Counter(buffers).most_common(1)[0][0] if buffers else '—'} |"
        )
    return "\n".join(
        [
            "## 2. Server side of a save",
            "",
            f"After {STEPS_BEFORE_EXPLAIN} steps, {saves // 2} saves, each statement explained by "
            "`auto_explain` (ANALYZE, BUFFERS, WAL) as it ran in the real transaction:",
            "",
            "| Statement | execution median | mean | WAL (most common) | buffers (most common) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"WAL per save: {wal_save:,.0f} bytes; per raw 1-row ({raw_postgres.ROW_BYTES} B) commit: "
            f"{wal_raw:,.0f} bytes ({wal_save / wal_raw:.1f}{chr(215)}).",
            f"Run-row updates / HOT, whole run: {hot[0] if hot else '?'} / {hot[1] if hot else '?'}.",
        ]
    )


def _save_next(
    store: safepoint.Store, cp: safepoint.Checkpoint, steps: list[agent_workload.AgentStep]
) -> None:
    _advance(cp, steps[cp.step])
    store.save(cp)


def _wal_per(url: str, action: Any, count: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        for _ in range(count):
            action()
        row = conn.execute(
            "SELECT pg_current_wal_insert_lsn() - %s::pg_lsn", (before[0] if before else None,)
        )
        diff = row.fetchone()
    return float(diff[0]) / count if diff else 0.0


def _one(url: str, schema: str, query: str) -> tuple[Any, ...] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn.execute(
            query.replace("WHERE", "WHERE schemaname = current_schema() AND").encode(), ("safepoint_runs",)
        ).fetchone()


# -- 3. variants --------------------------------------------------------------------


_NO_UPDATED_INDEX = "DROP INDEX {schema}.safepoint_runs_updated"
_PGLZ = "ALTER TABLE {schema}.safepoint_checkpoints ALTER COLUMN messages SET COMPRESSION pglz"

# (label, pg_writer kind, DDL applied to the fresh schema first): the store always as shipped.
VARIANTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("store as it is", "safepoint", ()),
    ("… with pglz TOAST compression (before DDL revision 4)", "safepoint", (_PGLZ,)),
    ("… HOT run-row update (no `safepoint_runs_updated` index)", "safepoint", (_NO_UPDATED_INDEX,)),
    ("floor: the two rows in 1 autocommit statement", "floor", ()),
    ("floor, HOT", "floor", (_NO_UPDATED_INDEX,)),
)


def variants(url: str, steps: int, writer_counts: tuple[int, ...]) -> str:
    rows = []
    for writers in writer_counts:
        for label, kind, ddl in VARIANTS:
            rate, raw_rate, server, client = _variant(url, writers, steps, kind, ddl=ddl)
            rows.append(
                f"| {writers} | {label} | {rate:,.0f} | {raw_rate:,.0f} | {rate / raw_rate:.2f}{chr(215)} | "
                f"{server * 1000:.3f} ms | {client * 1000:.3f} ms |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(
        [
            "## 3. Variants against raw commits (same lockstep harness as the benchmark)",
            "",
            f"{steps} agent steps per writer, alternating phases of {BLOCK} saves and {BLOCK} raw commits.",
            "",
            "| writers | variant | saves/s | raw commits/s | ratio | server CPU / save | client CPU / save |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def _variant(
    url: str, writers: int, steps: int, kind: str, *, ddl: tuple[str, ...]
) -> tuple[float, float, float, float]:
    with (
        pg_server.scratch_schema(url, "var") as schema,
        pg_server.scratch_schema(url, "varraw", create=True) as raw_schema,
    ):
        safepoint.open_store(url, schema=schema).close()
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in ddl:
                conn.execute(sql.SQL(statement).format(schema=sql.Identifier(schema)))  # type: ignore[arg-type]
        raw_postgres.create_table(url, raw_schema)
        common = {"url": url, "schema": schema, "steps": steps}
        specs = [
            [
                {"name": "save", "kind": kind, "index": i} | common,
                {"name": "raw", "kind": "raw", "url": url, "schema": raw_schema, "index": i},
            ]
            for i in range(writers)
        ]
        with Writers(specs) as group:
            for _ in range(0, steps, BLOCK):
                group.phase("save", BLOCK)
                group.phase("raw", BLOCK)
            group.finish()
    save, raw = group.tallies["save"], group.tallies["raw"]
    return save.rate, raw.rate, save.cpu.server / save.ops, save.cpu.clients / save.ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pg-url", default=pg_server.DEFAULT_URL)
    parser.add_argument("--saves", type=int, default=1000, help="saves profiled (client and server)")
    parser.add_argument("--variant-steps", type=int, default=500, help="agent steps per writer, per variant")
    parser.add_argument("--skip-variants", action="store_true")
    args = parser.parse_args(argv)
    reason = pg_server.unreachable(args.pg_url)
    if reason is not None:
        print(f"PostgreSQL at {args.pg_url} unreachable: {reason}", file=sys.stderr)
        return 1
    parts = [client_profile(args.pg_url, args.saves), server_profile(args.pg_url, args.saves)]
    if not args.skip_variants:
        parts.append(variants(args.pg_url, args.variant_steps, (1, 8)))
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
