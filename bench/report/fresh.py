"""Fresh checkpoints, rewritten histories and loads in docs/benchmarks.md (issue 17): ``sections.fresh``."""

from __future__ import annotations

from sections.fresh import PATTERNS, TOOL_EVERY, TOOL_OUTPUT, WINDOW, FreshResult

from report import templating
from report.fmt import TIMES, Target, x

ISSUE = "#17"
SECTION = "fresh-checkpoints-rewritten-histories-and-loads-issue-17"


def targets(result: FreshResult) -> list[Target]:
    """Issue 17's targets this section measures."""
    first, last = result.probes[0], result.probes[-1]
    out: list[Target] = []
    for tools in (False, True):
        suffix = f", {TOOL_OUTPUT // 1000} KB tool output every {TOOL_EVERY}th step" if tools else ""
        in_place = result.find("in place", tools)
        growth = in_place.growth(result.probes)
        out.append(
            Target(
                ISSUE,
                f"In-place save, step {last} / step {first}{suffix}",
                x(growth),
                f"<= 1.1{TIMES}",
                growth <= 1.1,
                SECTION,
            )
        )
        for pattern in ("fresh, list(conversation)", "fresh, deep copy"):
            series = result.find(pattern, tools)
            growth = series.growth(result.probes)
            out.append(
                Target(
                    ISSUE,
                    f"Save, {pattern}, step {last} / step {first}{suffix}",
                    x(growth),
                    f"<= 2{TIMES}",
                    growth <= 2,
                    SECTION,
                )
            )
            ratio = series.median(last) / in_place.median(last)
            out.append(
                Target(
                    ISSUE,
                    f"Save, {pattern} / in place at step {last}{suffix}",
                    x(ratio),
                    f"<= 3{TIMES}",
                    ratio <= 3,
                    SECTION,
                )
            )
    by = {(row.kind, row.steps): row for row in result.loads}
    sizes = sorted({row.steps for row in result.loads if row.kind == "rewriting"})
    small = min(sizes)
    appending_small = next(
        row
        for row in result.loads
        if row.kind == "appending" and row.messages == by[("rewriting", small)].messages
    )
    out.append(
        Target(
            ISSUE,
            f"Load latest / codec decode, {appending_small.messages:,}-message run",
            x(appending_small.ratio),
            f"<= 1.5{TIMES}",
            appending_small.ratio <= 1.5,
            SECTION,
        )
    )
    largest = max(sizes)
    rewriting = by[("rewriting", largest)]
    appending = next(
        row for row in result.loads if row.kind == "appending" and row.messages == rewriting.messages
    )
    ratio = rewriting.load / appending.load
    out.append(
        Target(
            ISSUE,
            f"Load latest, run rewriting its last message ({largest:,} steps) / appending run, same messages",
            x(ratio),
            f"<= 2{TIMES}",
            ratio <= 2,
            SECTION,
        )
    )
    out.append(
        Target(
            ISSUE,
            f"Peak memory of a load / its message bytes, {largest:,} steps",
            x(rewriting.memory),
            f"<= 3{TIMES}",
            rewriting.memory <= 3,
            SECTION,
        )
    )
    big = result.big_peak / result.big_size
    out.append(
        Target(
            ISSUE,
            f"Peak memory of saving one {result.big_size // 1_000_000} MB message / its size",
            x(big),
            f"<= 3{TIMES}",
            big <= 3,
            SECTION,
        )
    )
    return out


def render(result: FreshResult, *, command: str) -> str:
    return templating.render(
        "fresh/fresh.md.j2",
        command=command,
        result=result,
        targets=targets(result),
        PATTERNS=PATTERNS,
        WINDOW=WINDOW,
        TOOL_OUTPUT=TOOL_OUTPUT,
        TOOL_EVERY=TOOL_EVERY,
    )
