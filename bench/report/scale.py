"""The scale section of docs/benchmarks.md (issue 14), from ``sections.scale.Result``."""

from __future__ import annotations

from sections.scale import TARGET, WINDOW, Pass, Result, quantile

from report import templating
from report.fmt import TIMES


def render(result: Result | str, *, command: str) -> str:
    """The Markdown section: one column per pass (direct, through PgBouncer)."""
    if isinstance(result, str):
        return templating.render("scale/not_run.md.j2", why=result)
    first = result.passes[0]
    size = min(WINDOW, len(first.claims) // 2)
    return templating.render(
        "scale/scale.md.j2",
        command=command,
        result=result,
        first=first,
        rows=_rows(result.passes, size),
    )


def _rows(passes: list[Pass], size: int) -> list[tuple[str, list[str]]]:
    """Each row of the table: its name and one cell per pass."""

    def ms(values: list[float], q: float) -> str:
        return f"{quantile(values, q) * 1000:.2f} ms"

    def cpu(p: Pass) -> str:
        bouncer = "—" if p.bouncer_cpu is None else f"{p.bouncer_cpu / p.runs * 1000:.2f}"
        return f"{p.server_cpu / p.runs * 1000:.2f} / {p.worker_cpu / p.runs * 1000:.2f} / {bouncer} ms"

    def each(show: object) -> list[str]:
        return [show(p) for p in passes]  # type: ignore[operator]

    return [
        ("wall time (barrier → last run done)", each(lambda p: f"{p.seconds:.1f} s")),
        ("runs/s", each(lambda p: f"{p.runs / p.seconds:,.0f}")),
        ("saves/s (job.save)", each(lambda p: f"{len(p.saves) / p.seconds:,.0f}")),
        ("claims/s (that took a run)", each(lambda p: f"{len(p.claims) / p.seconds:,.0f}")),
        (
            "transactions/s (claim + load + saves + release)",
            each(lambda p: f"{(len(p.claims) * 3 + len(p.saves) + p.empty_claims) / p.seconds:,.0f}"),
        ),
        (f"claim p50, first {size:,}", each(lambda p: ms(p.window(False), 0.5))),
        (f"claim p99, first {size:,}", each(lambda p: ms(p.window(False), 0.99))),
        (f"claim p50, last {size:,}", each(lambda p: ms(p.window(True), 0.5))),
        (f"claim p99, last {size:,}", each(lambda p: ms(p.window(True), 0.99))),
        (
            f"p99 last / first (target ≤ {TARGET}{TIMES})",
            each(lambda p: f"{p.ratio:.2f}{TIMES} {'PASS' if p.ratio <= TARGET else '**FAIL**'}"),
        ),
        ("save p50 / p99", each(lambda p: f"{ms(p.saves, 0.5)} / {ms(p.saves, 0.99)}")),
        (
            "pages the claim's index scan reads: at the barrier / at the end",
            each(lambda p: f"{p.claim_pages[0]} / {p.claim_pages[1]}"),
        ),
        ("claims that found nothing (end of queue)", each(lambda p: f"{p.empty_claims:,}")),
        (
            "claimed twice (lease unexpired; must be 0)",
            each(lambda p: f"{p.claimed_twice} {'PASS' if p.claimed_twice == 0 else '**FAIL**'}"),
        ),
        ("reclaimed after an expired lease", each(lambda p: str(p.reclaimed_after_expiry))),
        ("done twice / not done at the end (must be 0)", each(lambda p: f"{p.done_twice} / {p.not_done}")),
        ("CPU per run: server backends / workers / PgBouncer", each(cpu)),
        (
            "machine: busy / all core-seconds (this pass's share)",
            each(
                lambda p: f"{p.machine.busy:.0f} / {p.machine.busy + p.machine.idle:.0f} s ({_share(p):.0%})"
            ),
        ),
        ("result", each(lambda p: "PASS" if p.passed else "**FAIL**")),
    ]


def _share(p: Pass) -> float:
    """This pass's processes' CPU as a share of the machine's busy time (the rest: other work)."""
    ours = p.server_cpu + p.worker_cpu + (p.bouncer_cpu or 0.0)
    return ours / p.machine.busy if p.machine.busy else 0.0
