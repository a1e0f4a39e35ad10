"""What recording a SQLite run's head on its run row would cost each save (docs/operations.md).

On SQLite a run's head is its highest checkpoint key; the run row is written
only when the status or labels change. Recording the head there too (so that
a head row deleted by hand could be told from saves that never happened)
makes every save write the run row. This measures that page: the benchmark
agent's saves on a fresh store as it is (``derived``), and with a trigger that
writes the new head's step and digest to the run row in the save's own
transaction (``run_row``) — the same write a ``head_step``/``head_digest``
column set by the save would make. Per save: WAL frames (autocheckpoint off,
counted from the -wal file's size), native CPU (``synchronous=FULL`` as the
store sets it) and, with ``--instructions``, instructions counted by valgrind.

    .venv/bin/python bench/head_on_run_row.py [--saves 400] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

TRIGGER = """
CREATE TRIGGER head_on_run_row AFTER INSERT ON safepoint_checkpoints BEGIN
    UPDATE safepoint_runs SET parent_step = NEW.step, last_error = hex(NEW.digest) WHERE id = NEW.run_ref;
END"""  # two existing columns stand in for head_step and head_digest: the same row, the same page
WARMUP = 50


def measure(path: str, mode: str, saves: int) -> tuple[float, float]:
    """(WAL frames per save, CPU seconds per save) over ``saves`` saves after ``WARMUP``."""
    from workloads.agent import build  # noqa: PLC0415

    import safepoint  # noqa: PLC0415  # the child's import, after sys.path is set

    workload = build(WARMUP + saves)
    with safepoint.open_store(f"sqlite:///{path}", blobs="database") as store:
        driver = store.driver
        driver.execute_raw("PRAGMA wal_autocheckpoint = 0")  # type: ignore[attr-defined]
        if mode == "run_row":
            driver.execute_raw(TRIGGER)  # type: ignore[attr-defined]
        cp = safepoint.Checkpoint(run_id="bench")
        for n, step in enumerate(workload.steps):
            if n == WARMUP:
                wal_before = os.path.getsize(path + "-wal")
                cpu_before = time.process_time()
            step.apply(cp)
            store.save(cp)
            cp = cp.next()
        cpu = time.process_time() - cpu_before
        wal = os.path.getsize(path + "-wal") - wal_before
        page = driver.execute_raw("PRAGMA page_size")[0][0]  # type: ignore[attr-defined]
    return wal / (page + 24) / saves, cpu / saves


def instructions(mode: str, saves: int) -> float:
    """Instructions per save under callgrind: a run of WARMUP saves subtracted from one of WARMUP + saves."""
    counts = []
    with tempfile.TemporaryDirectory(prefix="safepoint-head-ir-") as tmp:
        for n in (0, saves):
            script = (
                f"import sys; sys.path.insert(0, {str(BENCH_DIR)!r}); import head_on_run_row as h;"
                f" h.measure({tmp + f'/{n}.db'!r}, {mode!r}, {max(n, 1)})"
            )
            command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
            done = subprocess.run(
                [*command, sys.executable, "-c", script], capture_output=True, text=True, check=True
            )
            counts.append(
                next(int(x.rsplit(":", 1)[1]) for x in done.stderr.splitlines() if "Collected :" in x)
            )
    return (counts[1] - counts[0]) / (saves - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=400)
    parser.add_argument(
        "--rounds", type=int, default=5, help="alternating rounds of each mode (CPU: the median)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind; slow)"
    )
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"derived": [], "run_row": []}
    with tempfile.TemporaryDirectory(prefix="safepoint-head-") as tmp:
        for r in range(args.rounds):
            for mode, runs in results.items():
                runs.append(measure(f"{tmp}/{mode}-{r}.db", mode, args.saves))
    print(
        f"{args.saves} saves of the benchmark agent, SQLite, synchronous=FULL, median of {args.rounds} rounds"
    )
    print(
        f"{'head':<10} {'WAL frames/save':>16} {'CPU us/save':>12}"
        + ("  instructions/save" if args.instructions else "")
    )
    for mode, runs in results.items():
        frames = sorted(f for f, _ in runs)[len(runs) // 2]
        cpu = sorted(c for _, c in runs)[len(runs) // 2] * 1e6
        line = f"{mode:<10} {frames:>16.2f} {cpu:>12.1f}"
        if args.instructions:
            if shutil.which("valgrind") is None:
                raise SystemExit("--instructions needs valgrind")
            line += f"  {instructions(mode, min(args.saves, 200)):>17,.0f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
