"""The framework adapters' section of docs/benchmarks.md (issue 20), from ``sections.frameworks``."""

from __future__ import annotations

from sections.frameworks import LINEAR, TURNS, FrameworkResult

from report import templating


def render(results: list[FrameworkResult], *, command: str) -> str:
    return templating.render(
        "frameworks/frameworks.md.j2",
        command=command,
        results=results,
        TURNS=TURNS,
        LINEAR=LINEAR,
        met=all(r.ours.linear for r in results),
    )
