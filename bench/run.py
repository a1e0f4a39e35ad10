"""Run the benchmark sections and write the Markdown report.

    .venv/bin/python bench/run.py --out docs/benchmarks.md   # what `make bench` runs
    .venv/bin/python bench/run.py --quick                    # smoke test, a few minutes
    .venv/bin/python bench/run.py --no-postgres              # the SQLite sections only
    .venv/bin/python bench/run.py --adapter-only --steps 300 # the LangGraph adapter section alone
    .venv/bin/python bench/run.py --scale-only               # 10,000 runs, 32 worker processes alone
    .venv/bin/python bench/run.py --otel-only                # OpenTelemetry's CPU per save alone
    .venv/bin/python bench/run.py --section fresh            # fresh checkpoints, rewrites, loads alone
    .venv/bin/python bench/run.py --section encryption       # encrypted against plain, and rekey, alone
    .venv/bin/python bench/run.py --section frameworks       # bytes per turn on the framework adapters, alone
    .venv/bin/python bench/run.py --section journal          # what a recorded call costs (the journal), alone
    .venv/bin/python bench/run.py --section floor            # issue 34's SQLite targets against their floors
    .venv/bin/python bench/run.py --section tenants          # issue 38: fair claims, fairness, RLS on/off

Three packages: ``workloads`` (what is saved: the simulated agent, and the
one with large tool outputs), ``contenders`` (what saves it besides the
store: raw commits, LangGraph's savers and graph, the PostgreSQL writer
processes) and ``sections`` (each measurement), apart from ``report``, which
renders the results through Jinja2 templates (``report/templates``).
Sections run in this order: the store on SQLite (``sections.sqlite_store``,
with the default options and the variants in ``VARIANTS``), LangGraph on
SQLite (``sections.langgraph_sqlite``: ``SqliteSaver``, then
``SafepointSaver`` for the adapter section), the scrubber
(``sections.scrub``), large tool outputs (``sections.blobs``) and PostgreSQL
(``sections.postgres``), which needs a server (``--pg-url``); when none
answers, the report says so and the run goes on. ``report.document``
renders them; the scale section (``sections.scale``: queued runs, worker
processes, one PostgreSQL, direct and through PgBouncer) and the
OpenTelemetry section (``sections.otel``: client CPU per save with the
observer on and off), the fresh-checkpoint, concurrency and encryption
sections (``sections.encryption``: CPU per save and load, encrypted against
plain, and rekey's pace), the inspector section and the framework adapters'
(``sections.frameworks``: bytes stored per turn on Pydantic AI, Google ADK and
the Agent Framework, next to their own stores; ``sections.journal_frameworks``:
the call journal's cost per turn in each of the five frameworks) and the call journal's
(``sections.journal``: a recorded call's time, instructions, fsyncs and
bytes on SQLite and PostgreSQL, and a LangGraph turn with and without it) and
the floor section's (``sections.floor``: issue 34's SQLite targets, each against
its raw floor, in instructions and native CPU), rendered by their ``report``
modules, are appended last in that order.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import machine
import pg_server
from common import StoreRun
from report import adapter as report_adapter
from report import concurrency as concurrency_report
from report import document as report
from report import encryption as encryption_report
from report import floor as floor_report
from report import frameworks as frameworks_report
from report import fresh as fresh_report
from report import journal as journal_report
from report import journal_frameworks as journal_frameworks_report
from report import otel as otel_report
from report import redact as redact_report
from report import scale as scale_report
from report import ui as ui_report
from report import ui_cost as ui_cost_report
from sections import blobs as blob_section
from sections import concurrency as concurrency_section
from sections import encryption as encryption_section
from sections import floor as floor_section
from sections import frameworks as frameworks_section
from sections import fresh as fresh_section
from sections import house as house_section
from sections import journal as journal_section
from sections import journal_frameworks as journal_frameworks_section
from sections import langgraph_sqlite, save_breakdown, sqlite_store
from sections import otel as otel_section
from sections import postgres as postgres_section
from sections import redact as redact_section
from sections import scale as scale_section
from sections import scrub as scrub_section
from sections import tenants as tenants_section
from sections import ui as ui_section
from sections import ui_cost as ui_cost_section
from workloads import agent as agent_workload

BENCH_DIR = Path(__file__).resolve().parent
# The store section's other configurations, run as often as the default one and
# interleaved with it: what the scrubber costs, and what the whole pipeline costs.
# make bench SECTION=name: the sections that run alone, by the flag that runs them.
SECTIONS = {
    "adapter": "adapter_only",
    "scale": "scale_only",
    "otel": "otel_only",
    "fresh": "fresh_only",
    "concurrency": "concurrency_only",
    "encryption": "encryption_only",
    "ui": "ui_only",
    "frameworks": "frameworks_only",
    "house": "house_only",
    "journal": "journal_only",
    "floor": "floor_only",
    "redact": "redact_only",
    "tenants": "tenants_only",
}
VARIANTS: tuple[dict[str, Any], ...] = ({"scrubber": False}, {"scrubber": False, "blobs": False})


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    steps = args.steps or (200 if args.quick else 1000)
    reps = args.reps or (1 if args.quick else 5)
    probes = tuple(sorted({p for p in (10, 100, steps) if p <= steps}))
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    # The sections that run alone build their own workloads (some in their own processes).
    alone = {
        # Before and after a refactor: two trees of safepoint in one run (sections/house.py).
        "house_only": house_section.run,
        "scale_only": lambda: _scale(args),
        "otel_only": lambda: _otel(args),
        "fresh_only": lambda: _fresh(args, workdir),
        "concurrency_only": lambda: _concurrency(args, workdir),
        "encryption_only": lambda: _encryption(args),
        "ui_only": lambda: _ui(args),
        "frameworks_only": _frameworks,
        "journal_only": lambda: _journal(args, workdir),
        "floor_only": lambda: _floor(args, workdir),
        "redact_only": lambda: _redact(args),
        "tenants_only": lambda: _tenants(args),
    }
    for flag, section in alone.items():
        if getattr(args, flag, False):  # set by its --X-only flag, or by --section
            return _finish(section(), args, workdir)
    began = time.perf_counter()
    described = machine.describe(workdir)  # now: it names the code this process imported
    workload = agent_workload.build(steps)
    _log(f"workload: {steps} steps, {workload.content_json_bytes():,} content bytes (JSON)")
    if args.adapter_only:
        return _adapter_only(args, workload, workdir, probes)

    safepoint_runs: list[StoreRun] = []
    variants: dict[str, list[StoreRun]] = {}
    configurations: list[dict[str, Any]] = [{}, *VARIANTS]
    for rep in range(1, reps + 1):
        # Rotate the order so no configuration always runs first (or on a warmer disk).
        shift = (rep - 1) % len(configurations)
        for options in configurations[shift:] + configurations[:shift]:
            run = sqlite_store.run(workload, workdir, str(rep), probes, options)
            (safepoint_runs if not options else variants.setdefault(run.options, [])).append(run)
            _log(
                f"safepoint ({run.options}) rep {rep}: {run.rate:,.0f} saves/s "
                f"(raw alongside: {run.raw_rate:,.0f}/s), {run.disk.total:,} bytes"
            )

    breakdown = save_breakdown.run(workload, workdir)
    _log(f"save breakdown: {len(breakdown.saves)} saves timed phase by phase")

    langgraph_runs: list[StoreRun] = []
    adapter_runs: list[StoreRun] = []
    if not args.no_langgraph:
        for rep in range(1, args.langgraph_reps + 1):
            run = langgraph_sqlite.run(workload, workdir, str(rep), probes, "sqlite")
            langgraph_runs.append(run)
            _log(f"SqliteSaver rep {rep}: {run.rate:,.1f} steps/s, {run.disk.total:,} bytes")
        adapter_runs = _safepoint_saver_runs(args, workload, workdir, probes)

    scrub = scrub_section.run(total_bytes=args.scrub_bytes, repeat=3 if args.quick else 5)
    _log("scrubber: " + ", ".join(f"{p.label} {p.rate(scrub.total_bytes):.1f} MB/s" for p in scrub.passes))

    blobs = blob_section.run(
        workdir,
        steps=args.blob_steps or (100 if args.quick else 300),
        langgraph_steps=60 if args.quick else 100,
        reps=1 if args.quick else 5,
        langgraph=not args.no_langgraph,
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
            adapter_turns=args.adapter_turns or steps,
            blob_steps=20 if args.quick else 50,
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
        variants=variants,
        adapter=adapter_runs,
        scrub=scrub,
        blobs=blobs,
        load=machine.load_average(),
        content_at={p: workload.prefix_json_bytes(p) for p in probes},
        breakdown=breakdown,
    )
    scale = "" if args.no_postgres or args.no_scale else "\n" + _scale(args)
    otel = "" if args.no_otel else "\n" + _otel(args)
    fresh = "" if args.no_fresh else "\n" + _fresh(args, workdir)
    concurrency = "" if args.no_concurrency else "\n" + _concurrency(args, workdir)
    encryption = "" if args.no_encryption else "\n" + _encryption(args)
    inspector = "" if args.no_ui else "\n" + _ui(args)
    frameworks = "" if args.no_frameworks else "\n" + _frameworks()
    journal = "" if args.no_journal else "\n" + _journal(args, workdir)
    floor = "" if args.no_floor else "\n" + _floor(args, workdir)
    redaction = "" if args.no_redact else "\n" + _redact(args)
    tenants = "" if args.no_postgres or args.no_tenants else "\n" + _tenants(args)
    body = (
        report.render(results)
        + scale
        + otel
        + fresh
        + concurrency
        + encryption
        + inspector
        + frameworks
        + journal
        + floor
        + redaction
        + tenants
    )
    return _finish(body, args, workdir)


def _scale(args: argparse.Namespace) -> str:
    """The scale section (direct, then through PgBouncer), rendered."""
    runs = args.scale_runs or (2000 if args.quick else 10_000)
    result = scale_section.run(
        args.pg_url,
        runs=runs,
        workers=args.scale_workers,
        steps=args.scale_steps,
        through_pgbouncer=not args.scale_no_pgbouncer,
        bouncer_pool=args.scale_bouncer_pool,
    )
    command = _command()
    return scale_report.render(result, command=command) + "\n"


def _otel(args: argparse.Namespace) -> str:
    """The OpenTelemetry section (CPU per save, observer on vs off, SQLite), rendered."""
    saves = args.otel_saves or (500 if args.quick else 2000)
    reps = args.otel_reps or (1 if args.quick else 5)
    results = otel_section.run(saves=saves, reps=reps)
    _log(f"otel: on/off {results[0].ratio:.3f}x over {reps} processes of {saves} saves")
    command = _command()
    return otel_report.render(results, command=command)


def _fresh(args: argparse.Namespace, workdir: Path) -> str:
    """The fresh-checkpoint, rewrite and load section (SQLite), rendered."""
    result = fresh_section.run(
        workdir,
        steps=200 if args.quick else 1000,
        reps=1 if args.quick else 3,
        langgraph_steps=200 if args.quick else 1000,
        load_sizes=(1000,) if args.quick else (1000, 10_000),
        big=10_000_000 if args.quick else 100_000_000,
        langgraph=not args.no_langgraph,
    )
    _log("fresh: " + ", ".join(f"{t.measure} {t.measured}" for t in fresh_report.targets(result)[:3]))
    command = _command()
    return fresh_report.render(result, command=command)


def _concurrency(args: argparse.Namespace, workdir: Path) -> str:
    """Many runs saving at once (group commit on and off, the LangGraph savers, raw commits), rendered."""
    result = concurrency_section.run(
        workdir,
        reps=1 if args.quick else 3,
        langgraph=not args.no_langgraph,
        pg_url=None if args.no_postgres else args.pg_url,
        log=_log,
    )
    _log("concurrency: " + ", ".join(f"{t.measure} {t.measured}" for t in concurrency_report.targets(result)))
    command = _command()
    return concurrency_report.render(result, command=command)


def _encryption(args: argparse.Namespace) -> str:
    """Encryption at rest: CPU per save and load, encrypted against plain, and rekey (SQLite), rendered."""
    result = encryption_section.run(reps=args.encryption_reps or (1 if args.quick else 3))
    _log(f"encryption: save {result.save_ratio}, load {result.load_ratio} (encrypted / plain)")
    return encryption_report.render(result, command=_command())


def _ui(args: argparse.Namespace) -> str:
    """The inspector's render time on a 10,000-step run and a 2,000-message step, then the cost
    view and the runs page's searches over 10,000 runs, every store."""
    results = ui_section.run(None if args.no_postgres else args.pg_url)
    _log("ui: " + ", ".join(f"{r.store} {r.run_page_ms:.0f}/{r.step_page_ms:.0f} ms" for r in results))
    many = ui_cost_section.run(None if args.no_postgres else args.pg_url, log=_log)  # issue 36
    return ui_report.render(results, command=_command()) + ui_cost_report.render(many, command=_command())


def _redact(args: argparse.Namespace) -> str:
    """Store.redact's pace over 1,000 runs in every configuration, against Scrubber.scrub."""
    results = redact_section.run(None if args.no_postgres else args.pg_url)
    _log("redact: " + ", ".join(f"{r.store} {r.ratio:.2f}x" for r in results))
    return redact_report.render(results, command=_command())


def _tenants(args: argparse.Namespace) -> str:
    """Tenants on PostgreSQL (issue 38): the fair claim against one tenant's, fairness with
    5,000 and 20 queued runs, and the store's figures with row-level security on and off."""
    result = tenants_section.run(args.pg_url, log=_log)
    return tenants_section.render(result, command=_command())


def _frameworks() -> str:
    """Bytes per turn on the Pydantic AI, Google ADK and Agent Framework adapters, and their own
    stores; then the call journal's cost per turn in each of the five frameworks."""
    results = frameworks_section.run()
    for r in results:
        _log(f"{r.framework}: safepoint growth {r.ours.growth:.2f} ({r.seconds:.0f} s)")
    journal = journal_frameworks_section.run(log=_log)
    return (
        frameworks_report.render(results, command=_command())
        + "\n"
        + journal_frameworks_report.render(journal, command=_command())
    )


def _journal(args: argparse.Namespace, workdir: Path) -> str:
    """The call journal: per recorded call on SQLite and PostgreSQL, bytes per call, a LangGraph turn."""
    result = journal_section.run(workdir, None if args.no_postgres else args.pg_url, log=_log)
    return journal_report.render(result, command=_command())


def _floor(args: argparse.Namespace, workdir: Path) -> str:
    """Issue 34's SQLite targets against their raw floors: instructions (callgrind) and native CPU."""
    result = floor_section.run(workdir, cpu_reps=1 if args.quick else floor_section.CPU_REPS, log=_log)
    return floor_report.render(result, command=_command())


def _command() -> str:
    """How this report was made, as a reader would type it."""
    given = sys.argv[1:]
    if given == ["--out", "docs/benchmarks.md"]:
        return "make bench"
    if len(given) == 2 and given[0] == "--section":  # what make bench SECTION=name runs
        return f"make bench SECTION={given[1]}"
    return " ".join(["bench/run.py", *given])


def _adapter_only(args: argparse.Namespace, workload: Any, workdir: Path, probes: tuple[int, ...]) -> int:
    """The LangGraph adapter section alone (SqliteSaver, then SafepointSaver with the floor), printed."""
    theirs = langgraph_sqlite.run(workload, workdir, "1", probes, "sqlite")
    _log(f"SqliteSaver: {theirs.rate:,.1f} steps/s, {theirs.disk.total:,} bytes")
    ours = _safepoint_saver_runs(args, workload, workdir, probes)
    content_at = {p: workload.prefix_json_bytes(p) for p in probes}
    return _finish(report_adapter.render(ours, theirs, probes, content_at, None) + "\n", args, workdir)


def _safepoint_saver_runs(
    args: argparse.Namespace, workload: Any, workdir: Path, probes: tuple[int, ...]
) -> list[StoreRun]:
    """SafepointSaver (with the floor taking turns beside it), ``--adapter-reps`` times."""
    runs = []
    reps = args.adapter_reps or (1 if args.quick else 3)
    for rep in range(1, reps + 1):
        run = langgraph_sqlite.run(workload, workdir, str(rep), probes, "safepoint")
        runs.append(run)
        _log(f"SafepointSaver rep {rep}: {run.rate:,.1f} steps/s, {run.disk.total:,} bytes")
    return runs


def _finish(text: str, args: argparse.Namespace, workdir: Path) -> int:
    """Print the report, write it to ``--out`` if given, clear the work directory."""
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
    parser.add_argument("--quick", action="store_true", help="200 steps, 1 repetition of most things")
    parser.add_argument("--steps", type=int, help="agent steps per run (default 1000)")
    parser.add_argument("--reps", type=int, help="safepoint repetitions (default 5)")
    parser.add_argument("--langgraph-reps", type=int, default=1)
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph sections")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL section")
    parser.add_argument(
        "--adapter-only",
        action="store_true",
        help="run and print only the LangGraph adapter section (SQLite)",
    )
    parser.add_argument("--scale-only", action="store_true", help="run and print only the scale section")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale section")
    parser.add_argument(
        "--otel-only", action="store_true", help="run and print only the OpenTelemetry section"
    )
    parser.add_argument("--no-otel", action="store_true", help="skip the OpenTelemetry section")
    parser.add_argument(
        "--fresh-only", action="store_true", help="run and print only the fresh-checkpoint and load section"
    )
    parser.add_argument("--no-fresh", action="store_true", help="skip the fresh-checkpoint and load section")
    parser.add_argument(
        "--concurrency-only", action="store_true", help="run and print only the many-runs-at-once section"
    )
    parser.add_argument("--no-concurrency", action="store_true", help="skip the many-runs-at-once section")
    parser.add_argument(
        "--encryption-only", action="store_true", help="run and print only the encryption section"
    )
    parser.add_argument("--no-encryption", action="store_true", help="skip the encryption section")
    parser.add_argument("--encryption-reps", type=int, help="encryption processes (default 3)")
    parser.add_argument("--ui-only", action="store_true", help="run and print only the inspector section")
    parser.add_argument(
        "--house-only", action="store_true", help="run and print only the before/after section (house.py)"
    )
    parser.add_argument("--no-ui", action="store_true", help="skip the inspector section")
    parser.add_argument(
        "--frameworks-only", action="store_true", help="run and print only the framework adapters' section"
    )
    parser.add_argument("--no-frameworks", action="store_true", help="skip the framework adapters' section")
    parser.add_argument(
        "--journal-only", action="store_true", help="run and print only the call journal's section"
    )
    parser.add_argument("--no-journal", action="store_true", help="skip the call journal's section")
    parser.add_argument("--floor-only", action="store_true", help="run and print only the floor section")
    for name in ("floor", "redact", "tenants"):
        parser.add_argument(f"--no-{name}", action="store_true", help=f"skip the {name} section")
    parser.add_argument(
        "--section",
        choices=sorted(SECTIONS),
        help="run and print one section alone (make bench SECTION=...): " + ", ".join(sorted(SECTIONS)),
    )
    parser.add_argument("--otel-saves", type=int, help="saves per OpenTelemetry process (default 2,000)")
    parser.add_argument("--otel-reps", type=int, help="OpenTelemetry processes (default 5)")
    parser.add_argument("--scale-runs", type=int, help="queued runs (default 10,000; 2,000 with --quick)")
    parser.add_argument("--scale-workers", type=int, default=32, help="worker processes (default 32)")
    parser.add_argument("--scale-steps", type=int, default=2, help="steps each run saves (default 2)")
    parser.add_argument(
        "--scale-bouncer-pool", type=int, default=16, help="PgBouncer's server connections (default 16)"
    )
    parser.add_argument("--scale-no-pgbouncer", action="store_true", help="only the direct pass")
    parser.add_argument(
        "--pg-url", default=pg_server.DEFAULT_URL, help="PostgreSQL server (scratch schemas, dropped after)"
    )
    parser.add_argument("--pg-reps", type=int, help="PostgreSQL 1-writer repetitions (default 3)")
    parser.add_argument(
        "--adapter-reps", type=int, help="SafepointSaver (and floor) repetitions on SQLite (default 3)"
    )
    parser.add_argument(
        "--adapter-turns", type=int, help="SafepointSaver turns on PostgreSQL (default: --steps)"
    )
    parser.add_argument(
        "--scrub-bytes", type=int, default=5_000_000, help="agent traffic the scrubber cleans (default 5 MB)"
    )
    parser.add_argument(
        "--blob-steps", type=int, help="steps of the large-output agent (default 300, 100 with --quick)"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=BENCH_DIR / "out" / "work",
        help="where database files go (same filesystem as the repo; deleted afterwards)",
    )
    parser.add_argument("--keep-workdir", action="store_true")
    args = parser.parse_args(argv)
    if args.section is not None:
        setattr(args, SECTIONS[args.section], True)
    if args.steps is not None and args.steps < 10:
        parser.error("--steps must be at least 10")
    return args


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
