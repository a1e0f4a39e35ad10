"""The OpenTelemetry section of docs/benchmarks.md (issue 14), from ``sections.otel``'s results."""

from __future__ import annotations

from sections.otel import BLOCK, PROCESSOR, SAMPLED, TARGET, WARMUP, OtelResult

from report import templating


def render(results: list[OtelResult], *, command: str, heading: bool = True) -> str:
    """The Markdown section: the table, then where the difference goes."""
    return templating.render(
        "otel/otel.md.j2",
        heading=heading,
        command=command,
        results=results,
        first=results[0],
        BLOCK=BLOCK,
        PROCESSOR=PROCESSOR,
        SAMPLED=SAMPLED,
        TARGET=TARGET,
    )


def render_instructions(counts: dict[str, float], saves: int) -> str:
    """Instructions per save of each configuration (``sections.otel.instructions``)."""
    return templating.render(
        "otel/instructions.md.j2", counts=counts, off=counts["off"], saves=saves, WARMUP=WARMUP
    )
