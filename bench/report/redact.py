"""The redaction section of docs/benchmarks.md (issue 37), from ``sections.redact``'s results."""

from __future__ import annotations

from sections.redact import EVERY, REPS, RUNS, STEPS, RedactResult

from report import templating


def render(results: list[RedactResult], *, command: str) -> str:
    return templating.render(
        "redact/redact.md.j2",
        command=command,
        results=results,
        RUNS=RUNS,
        STEPS=STEPS,
        EVERY=EVERY,
        REPS=REPS,
    )
