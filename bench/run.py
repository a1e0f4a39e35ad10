"""Run the benchmark sections and write the Markdown report.

    .venv/bin/python bench/run.py --out docs/benchmarks.md   # what `make bench` runs
    .venv/bin/python bench/run.py --quick                    # smoke test, ~2 minutes
    .venv/bin/python bench/run.py --no-postgres              # the SQLite sections only

Sections are separate modules (workload, raw SQLite, safepoint, LangGraph,
report); later backends add a module and a call here. The PostgreSQL section
(``postgres_section``) needs a server (``--pg-url``); when none answers, the
report says so and the run goes on.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import agent_workload
import langgraph_sqlite
import machine
import pg_server
import postgres_section
import report
import sqlite_store
from common import StoreRun

BENCH_DIR = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    steps = args.steps or (200 if args.quick else 1000)
    reps = args.reps or (1 if args.quick else 5)
    probes = tuple(sorted({p for p in (10, 100, steps) if p <= steps}))
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    began = time.perf_counter()
    described = machine.describe(workdir)  # now: it names the code this process imported
    workload = agent_workload.build(steps)
    _log(f"workload: {steps} steps, {workload.content_json_bytes():,} content bytes (JSON)")

    safepoint_runs: list[StoreRun] = []
    for rep in range(1, reps + 1):
        run = sqlite_store.run(workload, workdir, str(rep), probes)
        safepoint_runs.append(run)
        _log(
            f"safepoint rep {rep}: {run.rate:,.0f} saves/s (raw alongside: {run.raw_rate:,.0f}/s), "
            f"{run.disk.total:,} bytes"
        )

    langgraph_runs: list[StoreRun] = []
    for rep in range(1, (0 if args.no_langgraph else args.langgraph_reps) + 1):
        run = langgraph_sqlite.run(workload, workdir, str(rep), probes)
        langgraph_runs.append(run)
        _log(
            f"LangGraph rep {rep}: {run.rate:,.1f} steps/s (raw alongside: {run.raw_rate:,.0f}/s), "
            f"{run.disk.total:,} bytes"
        )

    postgres = None
    if not args.no_postgres:
        postgres = postgres_section.run(
            args.pg_url,
            steps=steps,
            reps=args.pg_reps or (1 if args.quick else 3),
            langgraph_steps=50 if args.quick else 200,
            langgraph_steps_8=50 if args.quick else 100,
            claim_runs=400 if args.quick else 2000,
            langgraph=not args.no_langgraph,
        )

    given = sys.argv[1:] if argv is None else argv
    command = (
        "make bench"
        if given == ["--out", "docs/benchmarks.md"]
        else " ".join([".venv/bin/python bench/run.py", *given])
    )
    results = report.Results(
        command=command,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=described,
        steps=steps,
        probes=probes,
        content_json_bytes=workload.content_json_bytes(),
        content_text_bytes=workload.content_text_bytes(),
        safepoint=safepoint_runs,
        langgraph=langgraph_runs,
        seconds=time.perf_counter() - began,
        postgres=postgres,
    )
    text = report.render(results)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        _log(f"wrote {args.out}")
    if not args.keep_workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    parser.add_argument("--quick", action="store_true", help="200 steps, 1 repetition each")
    parser.add_argument("--steps", type=int, help="agent steps per run (default 1000)")
    parser.add_argument("--reps", type=int, help="safepoint repetitions (default 5)")
    parser.add_argument("--langgraph-reps", type=int, default=1)
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph sections")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL section")
    parser.add_argument(
        "--pg-url", default=pg_server.DEFAULT_URL, help="PostgreSQL server (scratch schemas, dropped after)"
    )
    parser.add_argument("--pg-reps", type=int, help="PostgreSQL 1-writer repetitions (default 3)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=BENCH_DIR / "out" / "work",
        help="where database files go (same filesystem as the repo; deleted afterwards)",
    )
    parser.add_argument("--keep-workdir", action="store_true")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 10:
        parser.error("--steps must be at least 10")
    return args


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
