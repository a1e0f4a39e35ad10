"""The SQLite section of docs/benchmarks.md (issue 2): the store against raw commits and SqliteSaver."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from common import WINDOW, LoadProbe, StoreRun, window, window_mean, window_median
from contenders.raw_sqlite import BLOCK, ROW_BYTES, WARM_COMMITS
from workloads.agent import MESSAGE_BYTES, TOOL_EVERY, TOOL_OUTPUT_BYTES

from report import breakdown as report_breakdown
from report import templating
from report.fmt import TIMES, Target
from report.fmt import ms as _ms
from report.fmt import size as _bytes
from report.fmt import x as _x

if TYPE_CHECKING:  # the document holds every section's results, this one's among them
    from report.document import Results

ANCHOR = "the-checkpoint-store-on-sqlite-issue-2"
TARGET_GROWTH = 1.1
TARGET_BYTES = 1.3
TARGET_RATE = 0.7


def render(r: Results) -> str:
    """The section: its heading, targets, tables and method."""
    parts = {
        "targets": _targets(r),
        "how_to_read": _how_to_read(r),
        "save_times": _save_times(r),
        "disk": _disk(r),
        "loads": _loads(r),
        "throughput": _throughput(r),
        "breakdown": report_breakdown.render(r.breakdown) if r.breakdown is not None else "",
        "settings": _settings(r),
        "method": _method(r),
    }
    return templating.render("sqlite/section.md.j2", **{k: v.strip("\n") for k, v in parts.items()})


# -- helpers -----------------------------------------------------------------


def _series(runs: Sequence[StoreRun], key: str | None = None) -> list[list[float]]:
    return [run.step_seconds if key is None else run.extra_seconds[key] for run in runs]


def _rate_ratios(runs: Sequence[StoreRun]) -> list[float]:
    return [run.rate / run.raw_rate for run in runs]


def _load_median(runs: Sequence[StoreRun], method: str, step: int) -> LoadProbe:
    probes = [p for run in runs for p in run.loads[method] if p.step == step]
    seconds = [s for p in probes for s in p.seconds]
    counts = {(p.statements, p.selects) for p in probes}
    statements, selects = max(counts)
    return LoadProbe(step=step, seconds=seconds, statements=statements, selects=selects)


def _statement_counts(runs: Sequence[StoreRun], method: str) -> set[tuple[int, int]]:
    return {(p.statements, p.selects) for run in runs for p in run.loads[method]}


def _disk_total(runs: Sequence[StoreRun]) -> float:
    return statistics.median(run.disk.total for run in runs)


def _growth(runs: Sequence[StoreRun], r: Results, key: str | None = None) -> tuple[float, float]:
    series = _series(runs, key)
    first, last = r.probes[0], r.probes[-1]
    return (
        window_median(series, last) / window_median(series, first),
        window_mean(series, last) / window_mean(series, first),
    )


# -- parts ------------------------------------------------------------------


def targets(r: Results) -> list[Target]:
    median_growth, mean_growth = _growth(r.safepoint, r)
    bytes_ratio = _disk_total(r.safepoint) / r.content_json_bytes
    ratios = _rate_ratios(r.safepoint)
    rate_ratio = statistics.median(ratios)
    method = next(iter(r.safepoint[0].loads))
    counts = _statement_counts(r.safepoint, method)
    (statements, selects) = max(counts)
    first, last = r.probes[0], r.probes[-1]

    def target(measure: str, measured: str, goal: str, ok: bool) -> Target:
        return Target("#2", measure, measured, goal, ok, ANCHOR)

    return [
        target(
            f"Save time, step {last} / step {first} (window median)",
            _x(median_growth),
            f"≤ {TARGET_GROWTH}{TIMES}",
            median_growth <= TARGET_GROWTH,
        ),
        target(
            f"Save time, step {last} / step {first} (window mean)",
            _x(mean_growth),
            f"≤ {TARGET_GROWTH}{TIMES}",
            mean_growth <= TARGET_GROWTH,
        ),
        target(
            f"Bytes on disk after {r.steps} steps / content bytes",
            _x(bytes_ratio),
            f"≤ {TARGET_BYTES}{TIMES}",
            bytes_ratio <= TARGET_BYTES,
        ),
        target(
            "Saves/s / raw SQLite single-row commits/s, default store (median over repetitions)",
            f"{_x(rate_ratio)} (repetitions {_x(min(ratios))} to {_x(max(ratios))})",
            f"≥ {TARGET_RATE}{TIMES}",
            rate_ratio >= TARGET_RATE,
        ),
        target(
            f"SQL statements per load at steps {', '.join(map(str, r.probes))}",
            f"{statements} ({selects} SELECT)" if len(counts) == 1 else f"varies: {sorted(counts)}",
            "constant",
            len(counts) == 1,
        ),
    ]


def _targets(r: Results) -> str:
    rows = [t.row(with_issue=False) for t in targets(r)]
    for label, runs in r.variants.items():
        ratios = _rate_ratios(runs)
        rows.append(
            [
                f"Saves/s / raw SQLite commits/s with `{label}` (the pipeline's cost, for context)",
                f"{_x(statistics.median(ratios))} (repetitions {_x(min(ratios))} to {_x(max(ratios))})",
                "no target",
                "—",
            ]
        )
    variants = ", ".join(f"`{label}`" for label in r.variants) or "nothing else"
    return templating.render("sqlite/targets.md.j2", r=r, variants=variants, rows=rows)


def _how_to_read(r: Results) -> str:
    raw_median = statistics.median(t for run in r.safepoint for t in run.raw_commit_seconds)
    return templating.render(
        "sqlite/how_to_read.md.j2",
        WINDOW=WINDOW,
        r=r,
        BLOCK=BLOCK,
        WARM_COMMITS=WARM_COMMITS,
        raw_median=raw_median,
    )


def _save_times(r: Results) -> str:
    sp, lg = _series(r.safepoint), _series(r.langgraph)
    sp_cpu = _series(r.safepoint, "cpu")
    lg_put = _series(r.langgraph, "put") if r.langgraph else []
    rows = []
    for step in r.probes:
        steps = window(step, r.steps)
        row = [f"{step} (steps {steps.start}-{steps.stop - 1})"]
        row += [
            _ms(window_median(sp, step)),
            _ms(window_mean(sp, step)),
            _ms(window_median(sp_cpu, step)),
        ]
        if lg:
            row += [
                _ms(window_median(lg, step)),
                _ms(window_mean(lg, step)),
                _ms(window_median(lg_put, step)),
                _x(window_median(lg, step) / window_median(sp, step)),
            ]
        rows.append(row)
    sp_growth = _growth(r.safepoint, r)
    cpu_growth = _growth(r.safepoint, r, "cpu")
    growth = ["growth (last / first)", _x(sp_growth[0]), _x(sp_growth[1]), _x(cpu_growth[0])]
    if lg:
        lg_growth = _growth(r.langgraph, r)
        put_growth = _growth(r.langgraph, r, "put")
        growth += [_x(lg_growth[0]), _x(lg_growth[1]), _x(put_growth[0]), ""]
    rows.append(growth)
    head = ["Step", "safepoint `save` median", "safepoint mean", "safepoint CPU median"]
    puts = ""
    if lg:
        head += [
            "LangGraph `invoke` median",
            "LangGraph mean",
            "LangGraph `put` median",
            "LangGraph / safepoint (median)",
        ]
        puts = r.langgraph[0].facts.get("checkpoint puts per step", "?")
    return templating.render("sqlite/save_times.md.j2", puts=puts, head=head, rows=rows)


def _disk(r: Results) -> str:
    def column(runs: Sequence[StoreRun]) -> list[float]:
        run = runs[0]
        total = _disk_total(runs)
        return [
            run.disk.db,
            run.disk.wal,
            run.disk.shm,
            total,
            total / r.content_json_bytes,
            total / r.content_text_bytes,
        ]

    labels = [
        "database file",
        "`-wal` file",
        "`-shm` file",
        "total on disk",
        "total / content bytes (JSON)",
        "total / content bytes (text only)",
    ]
    sp = column(r.safepoint)
    lg = column(r.langgraph) if r.langgraph else None
    rows = []
    for i, label in enumerate(labels):
        fmt = _x if i >= 4 else _bytes
        row = [label, fmt(sp[i])]
        if lg is not None:
            ratio = _x(lg[i] / sp[i]) if sp[i] else "—"
            row += [fmt(lg[i]), ratio]
        rows.append(row)
    head = ["After all steps, store closed", "safepoint"]
    if lg is not None:
        head += ["LangGraph", "LangGraph / safepoint"]
    return templating.render("sqlite/disk.md.j2", r=r, head=head, rows=rows)


def _loads(r: Results) -> str:
    methods = [(r.safepoint, m) for m in r.safepoint[0].loads]
    if r.langgraph:
        methods += [(r.langgraph, m) for m in r.langgraph[0].loads]
    rows = []
    for step in r.probes:
        row = [str(step)]
        for runs, method in methods:
            probe = _load_median(runs, method, step)
            row.append(f"{_ms(probe.median)} · {probe.statements} stmts ({probe.selects} SELECT)")
        rows.append(row)
    head = ["Latest checkpoint after step", *(f"`{m}`" for _runs, m in methods)]
    return templating.render("sqlite/loads.md.j2", head=head, rows=rows)


def _throughput(r: Results) -> str:
    rows = []

    def row(name: str, calls: Sequence[float], raw: Sequence[float], digits: int) -> list[str]:
        rate, raw_rate = len(calls) / sum(calls), len(raw) / sum(raw)
        mean, raw_mean = statistics.fmean(calls), statistics.fmean(raw)
        return [
            name,
            f"{rate:,.{digits}f}",
            f"{raw_rate:,.0f}",
            _x(rate / raw_rate),
            _ms(mean),
            _ms(raw_mean),
            _ms(mean - raw_mean),
        ]

    for i, run in enumerate(r.safepoint, 1):
        rows.append(row(f"safepoint rep {i}: `save`", run.step_seconds, run.raw_commit_seconds, 0))
    for label, runs in r.variants.items():
        for i, run in enumerate(runs, 1):
            name = f"safepoint `{label}` rep {i}: `save`"
            rows.append(row(name, run.step_seconds, run.raw_commit_seconds, 0))
    for i, run in enumerate(r.safepoint, 1):
        # step_seconds[k] is agent step k + 1; every TOOL_EVERY-th step carries a 50 KB output.
        small = [s for k, s in enumerate(run.step_seconds) if (k + 1) % TOOL_EVERY]
        rows.append(
            row(f"safepoint rep {i}: `save`, steps without a 50 KB output", small, run.raw_commit_seconds, 0)
        )
    for i, run in enumerate(r.langgraph, 1):
        rows.append(row(f"LangGraph rep {i}: `invoke`", run.step_seconds, run.raw_commit_seconds, 1))
        puts = run.extra_seconds["put"]
        rows.append(row(f"LangGraph rep {i}: `put` only", puts, run.raw_commit_seconds, 1))
    ratios = _rate_ratios(r.safepoint)
    head = [
        "Run",
        "steps/s",
        "raw commits/s (interleaved)",
        "ratio",
        "mean per step",
        "mean per raw commit",
        "difference",
    ]
    return templating.render(
        "sqlite/throughput.md.j2",
        r=r,
        ROW_BYTES=ROW_BYTES,
        WARM_COMMITS=WARM_COMMITS,
        BLOCK=BLOCK,
        ratios=ratios,
        TOOL_EVERY=TOOL_EVERY,
        head=head,
        rows=rows,
    )


def _settings(r: Results) -> str:
    rows = [[f"safepoint: {k}", v] for k, v in r.safepoint[0].facts.items()]
    if r.langgraph:
        rows += [[f"LangGraph: {k}", v] for k, v in r.langgraph[0].facts.items()]
    return templating.render("sqlite/settings.md.j2", rows=rows)


def _method(r: Results) -> str:
    return templating.render(
        "sqlite/method.md.j2",
        TOOL_EVERY=TOOL_EVERY,
        TOOL_OUTPUT_BYTES=TOOL_OUTPUT_BYTES,
        MESSAGE_BYTES=MESSAGE_BYTES,
        r=r,
    )
