"""Many runs saving at once in docs/benchmarks.md (issue 17, part 2): ``sections.concurrency``."""

from __future__ import annotations

from sections.concurrency import CONCURRENCY, STEPS, TOTAL, WAYS, ConcurrencyResult

from report import templating
from report.fmt import TIMES, Target, x

ISSUE = "#17"
SECTION = "many-runs-saving-at-once-group-commit-issue-17"


def targets(result: ConcurrencyResult) -> list[Target]:
    """Issue 17's group-commit targets, at the highest concurrency measured."""
    top = max(CONCURRENCY)
    out: list[Target] = []
    for kind in ("threads", "tasks"):
        ratio = result.rate(f"{kind}, group commit on", top) / result.rate(f"{kind}, group commit off", top)
        out.append(
            Target(
                ISSUE,
                f"{top} runs at once ({kind}): saves/s, group commit on / off",
                x(ratio),
                f">= 3{TIMES}",
                ratio >= 3,
                SECTION,
            )
        )
    if "AsyncSqliteSaver" in result.rates:
        ratio = result.rate("tasks, group commit on", top) / result.rate("AsyncSqliteSaver", top)
        out.append(
            Target(
                ISSUE,
                f"{top} runs at once (tasks): saves/s, safepoint / AsyncSqliteSaver",
                x(ratio),
                f">= 10{TIMES}",
                ratio >= 10,
                SECTION,
            )
        )
    return out


def render(result: ConcurrencyResult, *, command: str) -> str:
    return templating.render(
        "concurrency/concurrency.md.j2",
        command=command,
        result=result,
        targets=targets(result),
        WAYS=WAYS,
        CONCURRENCY=CONCURRENCY,
        STEPS=STEPS,
        TOTAL=TOTAL,
    )
