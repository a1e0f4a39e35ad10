"""Formatting shared by every part of the report: times, ratios, sizes, tables, targets."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

TIMES = "\N{MULTIPLICATION SIGN}"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def x(ratio: float) -> str:
    return f"{ratio:.3g}{TIMES}" if ratio < 0.1 else f"{ratio:.2f}{TIMES}"


def size(n: float) -> str:
    return f"{n:,.0f} B ({n / 2**20:.2f} MiB)"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "**MISS**"


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def p95(values: Sequence[float]) -> float:
    """The 95th percentile (inclusive method: within the observed range)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


@dataclass(frozen=True, slots=True)
class Target:
    """One target of an issue, as measured in this run."""

    issue: str  # e.g. "#4"
    measure: str
    measured: str
    target: str
    ok: bool
    section: str = ""  # anchor of the section with the details

    def row(self, *, with_issue: bool) -> list[str]:
        measure = f"[{self.measure}](#{self.section})" if with_issue and self.section else self.measure
        cells = [measure, self.measured, self.target, verdict(self.ok)]
        return [self.issue, *cells] if with_issue else cells


def targets_table(targets: Sequence[Target], *, with_issue: bool = False) -> str:
    head = ["Measure", "Measured", "Target", "Result"]
    return table(["Issue", *head] if with_issue else head, [t.row(with_issue=with_issue) for t in targets])
