"""The call journal's section: this run's counts beside the run published before a journal write
stopped reading its entry back (issue 32's per-call target)."""

from __future__ import annotations

from sections.journal import Backend

from report.fmt import table

# The run published before a journal write stopped reading its entry back (src of commit 3c833c5,
# 2026-12-07 06:43 UTC on an AMD EPYC host, the same probes): instructions and statements per call.
# Instructions hardly move between runs of the same code (< 0.5 %), nor between hosts: that code
# re-counted on an Intel Xeon host matched these within 0.1 %, so they compare across runs.
BEFORE_COMMIT = "3c833c5"
BEFORE_IR = {
    "tool": 1_511_793,
    "model": 2_493_476,
    "model_intent": 2_995_955,
    "model_flow": 3_334_103,
    "read_tool": 388_412,
    "read_model": 671_244,
}
BEFORE_STATEMENTS = {
    "tool": 11,
    "model": 6,
    "model_intent": 11,
    "model_flow": 14,
    "read_tool": 3,
    "read_model": 3,
}
BEFORE_WALL_MS = {"tool": 1.558, "model": 1.372, "model_intent": 2.001, "model_flow": 2.144}
BEFORE_FLOOR_MS = 0.345


def render(lite: Backend, labels: dict[str, str]) -> list[str]:
    """This run's counts beside the run published before the write path was cut."""
    if not isinstance(lite.ir, dict):
        return []
    rows = []
    for name, before in BEFORE_IR.items():
        after = lite.ir.get(name)
        if after is None:
            continue
        statements = lite.counts.get(name, {}).get("statements")
        wall = lite.series.get(name)
        rows.append(
            [
                labels[name],
                f"{before:,}",
                f"{after:,.0f}",
                f"{after / before - 1:+.0%}",
                f"{BEFORE_STATEMENTS[name]}",
                "—" if statements is None else f"{statements:g}",
                "—" if name not in BEFORE_WALL_MS else f"{BEFORE_WALL_MS[name]:.3f} ms",
                "—" if wall is None or name not in BEFORE_WALL_MS else f"{wall.ms():.3f} ms",
            ]
        )
    floor = lite.series.get("floor")
    head = [
        "Recorded call (SQLite)",
        f"instructions, {BEFORE_COMMIT}",
        "instructions, this run",
        "change",
        f"statements, {BEFORE_COMMIT}",
        "statements, this run",
        f"wall, {BEFORE_COMMIT}",
        "wall, this run",
    ]
    return [
        "### Before and after: a journal write that reads nothing back (SQLite)",
        "",
        f"Instructions and statements per recorded call in this run against the run published before "
        f"the write path was cut (src of commit {BEFORE_COMMIT}, the same probes; that code's counts, "
        "taken on an AMD EPYC host, re-counted on an Intel Xeon host within 0.1 %). Wall times "
        f"are shown for completeness only: they move with the shared disk (that run's floor was "
        f"{BEFORE_FLOOR_MS:.3f} ms"
        + ("" if floor is None else f", this run's {floor.ms():.3f} ms")
        + "); instructions do not.",
        "",
        table(head, rows),
        "",
    ]
