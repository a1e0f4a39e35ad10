"""Issue 34's PostgreSQL targets, before and after: two ``bench/sections/floor_pg.py --json`` outputs.

    .venv/bin/python bench/report/floor_pg.py BEFORE.json AFTER.json

Prints one Markdown table per measure (rows: route and message size;
columns: before, after, target), each a ratio to the same run's raw side.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

X = chr(215)
# (title, how to compute the ratio from one result, target)
MEASURES = (
    (
        "server CPU per save / raw commit (stat; schedstat)",
        lambda r: (
            f"{r['save']['server_cpu_stat_us'] / r['raw']['server_cpu_stat_us']:.2f}{X}; "
            f"{r['save']['server_cpu_sched_us'] / r['raw']['server_cpu_sched_us']:.2f}{X} "
            f"({r['save']['server_cpu_sched_us']:.0f} µs)"
        ),
        f"≤ 1.3{X}",
    ),
    (
        "bytes sent per save / content",
        lambda r: f"{r['save']['bytes_sent'] / r['content_bytes']:.2f}{X} ({r['save']['bytes_sent']:,.0f} B)",
        f"≤ 1.3{X}",
    ),
    (
        "WAL per save / raw commit",
        lambda r: (
            f"{r['save']['wal_bytes'] / r['raw']['wal_bytes']:.2f}{X} ({r['save']['wal_bytes']:,.0f} B)"
        ),
        f"≤ 2.5{X}",
    ),
    (
        "client instructions per save / raw prepared INSERT",
        lambda r: (
            f"{r['instructions']['save_instructions'] / r['instructions']['raw_instructions']:.2f}{X} "
            f"({r['instructions']['save_instructions'] / 1e6:.2f} M)"
            if r.get("instructions", {}).get("raw_instructions")
            else "—"
        ),
        f"≤ 3{X}",
    ),
)


def render(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    keyed = {(r["route"], r["size"]): r for r in before if "route" in r}
    after = [r for r in after if "route" in r]
    lines = []
    for title, ratio, target in MEASURES:
        lines += [
            f"**{title}**",
            "",
            "| route | messages | before | after | target |",
            "|---|---:|---:|---:|---|",
        ]
        for r in after:
            old = keyed.get((r["route"], r["size"]))
            shown = ratio(old) if old else "—"
            lines.append(f"| {r['route']} | {r['size']:,} B | {shown} | {ratio(r)} | {target} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = (json.loads(Path(name).read_text()) for name in argv)
    print(render(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
