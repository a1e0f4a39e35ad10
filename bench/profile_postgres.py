"""Where a safepoint save on PostgreSQL spends its time, and what changing it would buy.

    .venv/bin/python bench/profile_postgres.py [--saves 1000] [--pg-url URL] [--skip-variants]

Not part of ``make bench`` (it takes a few minutes, and its variants are
experiments, not the library). It prints Markdown:

1. **Client CPU**: cProfile with a CPU-time clock (``time.thread_time``, so
   waits for the server do not count) over ``--saves`` saves of one run,
   grouped by package, and the costliest functions.
2. **Server, per statement**: the save's write statements run as ``EXPLAIN
   (ANALYZE, BUFFERS, WAL)`` inside the real save transactions (same
   parameters, same transaction, then committed as usual), and the WAL a
   save writes (``pg_current_wal_lsn()`` before and after), against a raw
   1-row commit.
3. **Variants**, in the benchmark's lockstep harness against raw commits,
   with 1 and 8 writers: the store as it is (the one-statement save,
   ``save_next`` in ``postgres/save.sql``, sent as one message: one round trip); the
   same without the ``safepoint_runs_updated`` index (so the run-row update
   is HOT) or with pglz instead of lz4 (before DDL revision 4); every save
   the general way of ``ops.save`` (the drivers' ``save_next`` capability
   withdrawn in the writer processes: three round trips), also without the per-transaction
   ``set_config``; and a floor: the same two rows written by one autocommit
   statement (``FloorWriter``), with no checks and no safepoint client code,
   what any design on these tables costs at least.

Section 2 explains the statements of ``ops.save`` (the one-statement save
sends no pipeline statement to hook), so it withdraws ``save_next`` too.

Nothing in ``src/`` changes: the patches live in the writer processes of
this script, and every schema is dropped afterwards.
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
from typing import Any

import agent_workload
import orjson
import pg_server
import psycopg
import raw_postgres
from pg_phases import Writers
from postgres_store import SafepointWriter
from psycopg import sql

import safepoint
from safepoint.store.postgres import driver as pg_driver
from safepoint.store.postgres import steps as pg_steps

STEPS_BEFORE_EXPLAIN = 500
EXPLAINED = ("advance_run", "insert_checkpoint")
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


_EXECUTION = re.compile(r"Execution Time: ([\d.]+) ms")
_WAL = re.compile(r"WAL: (.*)")
_BUFFERS = re.compile(r"^\s*Buffers: (.*)", re.MULTILINE)


def server_profile(url: str, saves: int) -> str:
    shipped = pg_driver.PostgresDriver.capabilities
    try:
        return _server_profile(url, saves)
    finally:
        pg_driver.PostgresDriver.capabilities = shipped


def _server_profile(url: str, saves: int) -> str:
    steps = agent_workload.build(STEPS_BEFORE_EXPLAIN + saves).steps
    plans: dict[str, list[str]] = collections.defaultdict(list)
    original = pg_driver._execute

    def explaining(conn: psycopg.Connection[Any], line: Any, statement: Any) -> list[Any]:
        if statement.name not in EXPLAINED:
            return original(conn, line, statement)
        text = "EXPLAIN (ANALYZE, BUFFERS, WAL) " + str(statement.sql)
        rows = conn.execute(text.encode(), statement.params).fetchall()
        plans[statement.name].append("\n".join(row[0] for row in rows))
        return []

    with pg_server.scratch_schema(url, "explain") as schema:
        # ops.save's statements, each through _execute (see the module docstring);
        # the shipped capabilities are put back before the function returns.
        pg_driver.PostgresDriver.capabilities = frozenset()
        store = safepoint.open_store(url, schema=schema)
        cp = safepoint.Checkpoint(run_id="explained")
        store.save(cp)
        for agent_step in steps[:STEPS_BEFORE_EXPLAIN]:
            _advance(cp, agent_step)
            store.save(cp)
        wal_save = _wal_per(url, lambda: _save_next(store, cp, steps), saves // 2)
        pg_driver._execute = explaining  # type: ignore[assignment]
        try:
            for _ in range(saves // 2):
                _save_next(store, cp, steps)
        finally:
            pg_driver._execute = original
        hot = _one(url, schema, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s")
        store.close()
    with pg_server.scratch_schema(url, "explainraw", create=True) as raw_schema:
        raw_postgres.create_table(url, raw_schema)
        writer = raw_postgres.RawWriter({"url": url, "schema": raw_schema, "index": 0})
        writer.block(50)
        wal_raw = _wal_per(url, lambda: writer.block(1), saves // 2)
        writer.close()
    rows = []
    for name in EXPLAINED:
        texts = plans[name]
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
            f"After {STEPS_BEFORE_EXPLAIN} steps, {saves // 2} saves with their writes run as "
            "`EXPLAIN (ANALYZE, BUFFERS, WAL)` in the real transaction:",
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


def _op_steps_without_search_path(op: Any, search_path: str, capabilities: frozenset[str]) -> Any:
    """``steps.op_steps`` minus its first statement, set_config('search_path', ...)."""
    steps = pg_steps.op_steps(op, search_path, capabilities)
    next(steps)  # the set_config statement, not sent: the session has the schema on its search_path
    return steps


class VariantWriter(SafepointWriter):
    """A ``pg_writer`` contender: ``SafepointWriter`` patched per ``spec["variant"]`` (comma-separated).

    ``ops_save`` makes every save go through ``ops.save`` (the drivers'
    one-statement ``save_next`` capability withdrawn); ``no_set_config`` drops the
    per-transaction search_path statement, the connections getting the
    schema from the URL's ``options`` instead.
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        flags = set(spec["variant"].split(","))
        if "ops_save" in flags:
            pg_driver.PostgresDriver.capabilities = frozenset()
        if "no_set_config" in flags:
            pg_driver.op_steps = _op_steps_without_search_path  # type: ignore[assignment]
            spec = spec | {"url": f"{spec['url']}?options=-csearch_path%3D{spec['schema']}"}
        super().__init__(spec)


class FloorWriter:
    """A ``pg_writer`` contender: the save's two rows in one autocommit statement, no checks."""

    SQL = """
WITH run AS (
    UPDATE safepoint_runs
    SET head_step = %(step)s::bigint, head_digest = %(digest)s, counters = %(counters)s::jsonb,
        next_seq = next_seq + 2, updated_at = now()
    WHERE id = %(run_ref)s::bigint AND head_step = %(step)s::bigint - 1
    RETURNING id, next_seq - 2 AS first_seq)
INSERT INTO safepoint_checkpoints (
    run_ref, step, schema_version, status, created_at, message_count, ranges, header, digest,
    first_seq, added, messages)
SELECT id, %(step)s::bigint, 1, 'running', now(), %(count)s::bigint, %(ranges)s::jsonb, %(header)s,
       %(digest)s, first_seq, 2, %(messages)s
FROM run
"""

    def __init__(self, spec: dict[str, Any]) -> None:
        store = safepoint.open_store(spec["url"], schema=spec["schema"])
        run_id = f"floor-{spec['index']}"
        store.save(safepoint.Checkpoint(run_id=run_id))
        store.close()
        self._conn = psycopg.connect(pg_server.with_search_path(spec["url"], spec["schema"]), autocommit=True)
        row = self._conn.execute("SELECT id FROM safepoint_runs WHERE run_id = %s", (run_id,)).fetchone()
        self._run_ref = row[0] if row else None
        self._steps = agent_workload.build(spec["steps"]).steps
        self.seconds: list[float] = []

    def block(self, count: int) -> int:
        done = 0
        while done < count and len(self.seconds) < len(self._steps):
            agent_step = self._steps[len(self.seconds)]
            step = agent_step.step
            start = time.perf_counter()
            bodies = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in agent_step.messages]
            params = {
                "run_ref": self._run_ref,
                "step": step,
                "digest": bytes(32),
                "counters": orjson.dumps(agent_step.counters).decode(),
                "count": 2 * step,
                "ranges": f"[[0, {2 * step}]]",
                "header": orjson.dumps({"state": agent_step.state, "cursor": agent_step.cursor}) + bytes(200),
                "messages": b"\n".join(bodies),
            }
            self._conn.execute(self.SQL.encode(), params)
            self.seconds.append(time.perf_counter() - start)
            done += 1
        return done

    def result(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    def close(self) -> None:
        self._conn.close()


_NO_UPDATED_INDEX = "DROP INDEX {schema}.safepoint_runs_updated"
_PGLZ = "ALTER TABLE {schema}.safepoint_checkpoints ALTER COLUMN messages SET COMPRESSION pglz"
_OPS = "every save through `ops.save` (3 round trips)"

# (label, pg_writer kind, variant, DDL applied to the fresh schema first)
VARIANTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("store as it is (one-statement save, one message)", "variant", "as_is", ()),
    ("… with pglz TOAST compression (before DDL revision 4)", "variant", "as_is", (_PGLZ,)),
    ("… HOT run-row update (no `safepoint_runs_updated` index)", "variant", "as_is", (_NO_UPDATED_INDEX,)),
    (_OPS, "variant", "ops_save", ()),
    (f"{_OPS}, no per-transaction `set_config`", "variant", "ops_save,no_set_config", ()),
    ("floor: the two rows in 1 autocommit statement", "floor", "", ()),
    ("floor, HOT", "floor", "", (_NO_UPDATED_INDEX,)),
)


def variants(url: str, steps: int, writer_counts: tuple[int, ...]) -> str:
    rows = []
    for writers in writer_counts:
        for label, kind, variant, ddl in VARIANTS:
            rate, raw_rate, server, client = _variant(url, writers, steps, kind, variant, ddl=ddl)
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
    url: str, writers: int, steps: int, kind: str, variant: str, *, ddl: tuple[str, ...]
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
                {"name": "save", "kind": kind, "variant": variant, "index": i} | common,
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
