"""The inspector section of docs/benchmarks.md (issue 19), from ``sections.ui``'s results."""

from __future__ import annotations

from sections.ui import MESSAGES, REPS, STEPS, TARGET_MS, UiResult

from report import templating


def render(results: list[UiResult], *, command: str) -> str:
    return templating.render(
        "ui/ui.md.j2",
        command=command,
        results=results,
        STEPS=STEPS,
        MESSAGES=MESSAGES,
        REPS=REPS,
        TARGET_MS=TARGET_MS,
        met=all(r.run_page_ms < TARGET_MS and r.step_page_ms < TARGET_MS for r in results),
    )
