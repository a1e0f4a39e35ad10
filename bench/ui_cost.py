"""The inspector's cost view and runs-page searches over many runs (``sections.ui_cost``), printed.

    .venv/bin/python bench/ui_cost.py [--runs 10000] [--repeat 5] [--postgres DSN]

SQLite plain and encrypted, and with ``--postgres DSN`` PostgreSQL plain and
encrypted too (scratch schemas, dropped afterwards). Wall time on a shared
machine: the figures vary with its load. ``make bench`` puts the same
measurement in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sections import ui_cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=ui_cost.RUNS)
    parser.add_argument("--repeat", type=int, default=ui_cost.REPS)
    parser.add_argument("--postgres", metavar="DSN", default=None)
    args = parser.parse_args()
    said = lambda line: print(line, file=sys.stderr)  # noqa: E731
    results = ui_cost.run(args.postgres, args.runs, args.repeat, log=said)
    for result in results:
        before, after = result.load
        saved = f"{args.runs:,} runs saved in {result.fill_s:.1f} s"
        print(f"{result.store}: {saved}; load average {before:.1f} -> {after:.1f}")
        for row, ms in result.pages.items():
            shown = "-" if ms is None else f"median {ms[0]:.0f} ms, fastest {ms[1]:.0f} ms"
            print(f"  {row}: {shown}")


if __name__ == "__main__":
    main()
