"""The inspector-over-many-runs part of docs/benchmarks.md (issue 36), from ``sections.ui_cost``'s results."""

from __future__ import annotations

from sections.ui_cost import REPS, RUNS, TARGET_MS, CostResult

from report import templating


def render(results: list[CostResult], *, command: str) -> str:
    rows = list(results[0].pages) if results else []
    measured = [ms[0] for r in results for ms in r.pages.values() if ms is not None]
    return templating.render(
        "ui/ui_cost.md.j2",
        command=command,
        results=results,
        rows=rows,
        RUNS=RUNS,
        REPS=results[0].reps if results else REPS,
        TARGET_MS=TARGET_MS,
        met=all(ms < TARGET_MS for ms in measured),
        loads=[r.load for r in results],
    )
