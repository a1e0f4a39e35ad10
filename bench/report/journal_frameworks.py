"""The call journal's cost per turn in each framework (issue 33), from ``sections.journal_frameworks``."""

from __future__ import annotations

from sections.journal_frameworks import TURNS, WARM, Result, Row

from report.fmt import table


def render(result: Result, *, command: str) -> str:
    rows = [_row(row) for row in result.rows]
    return "\n".join(
        [
            "## The call journal's cost per turn, by framework (issue 33)",
            "",
            f"`{command}` (`bench/sections/journal_frameworks.py`, {result.seconds:.0f} s): one "
            "conversation turn of the same shape in each framework — a ~200-byte user message, a "
            "model call answering ~500 bytes and two tool calls (`lookup`, idempotent; `charge`, "
            "non-idempotent), each tool returning ~2 KB, a second model call answering ~4 KB — "
            "on offline models, with the framework's safepoint adapter on SQLite (WAL, "
            "`synchronous=FULL`), without the journal and with its one line. The two apps take "
            f"turns in one process; medians over {TURNS} turns after {WARM} untimed ones. CPU is "
            "`time.process_time` (every thread); instructions are callgrind's, every thread's, "
            f"counted over {result.ir_turns} turns each way (dumps around them). *Entries* are "
            "the journal rows a turn wrote (a turn's start and end markers count, where the "
            "integration writes them).",
            "",
            table(
                [
                    "framework",
                    "CPU ms/turn without",
                    "with",
                    "ratio",
                    "instructions/turn without",
                    "with",
                    "ratio",
                    "wall ms/turn without",
                    "with",
                    "entries/turn",
                ],
                rows,
            ),
            "",
        ]
    )


def _row(row: Row) -> list[str]:
    if row.skipped is not None:
        return [row.framework, f"not measured: {row.skipped}", *[""] * 8]
    cpu = (row.ms("without"), row.ms("with"))
    wall = (row.ms("without", "wall"), row.ms("with", "wall"))
    if isinstance(row.ir, dict) and len(row.ir) == 2:
        ir = [f"{row.ir['without'] / 1e6:.1f} M", f"{row.ir['with'] / 1e6:.1f} M"]
        ir.append(f"{row.ir['with'] / row.ir['without']:.2f}x")
    else:
        ir = [str(row.ir), "", ""]
    return [
        row.framework,
        f"{cpu[0]:.1f}",
        f"{cpu[1]:.1f}",
        f"{cpu[1] / cpu[0]:.2f}x",
        *ir,
        f"{wall[0]:.1f}",
        f"{wall[1]:.1f}",
        f"{row.entries:.1f}",
    ]
