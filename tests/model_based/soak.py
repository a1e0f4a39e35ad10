"""``make soak``: the machine with fresh seeds for as long as asked; each failure a named regression.

Environment: ``SOAK_MINUTES`` (default 30), ``SOAK_BACKENDS`` (e.g. ``sqlite,postgres``;
default every backend), ``SOAK_ENCRYPTION`` (``on`` or ``off``: every chosen row with
encryption so; default as the rows say), ``SOAK_EXAMPLES`` and ``SOAK_STEPS`` (per round,
default 20 x 30). Rows of the covering array take turns. Prints the operations run and the
disagreements; each disagreement's shrunk steps go to ``regressions/<row>_<finding>.py``,
which the test suite replays. Exits 1 if any was found.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from . import machine
from .configurations import ROWS, Config
from .repro import script

REGRESSIONS = Path(__file__).parent / "regressions"


def rows() -> list[Config]:
    backends = os.environ.get("SOAK_BACKENDS", "memory,sqlite,postgres").split(",")
    encryption = os.environ.get("SOAK_ENCRYPTION")
    chosen = []
    for row in ROWS:
        if row.backend not in backends:
            continue
        if encryption in ("on", "off") and row.encryption != encryption:
            name = re.sub(r"_enc(on|off)$", f"_enc{encryption}", row.name)
            chosen.append(dataclasses.replace(row, name=name, encryption=encryption))
        else:
            chosen.append(row)
    return chosen


def errors_of(exc: BaseException) -> list[BaseException]:
    """The failures hypothesis reported: one, or each of an ExceptionGroup's."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in errors_of(sub)]
    return [exc]


def main() -> int:
    deadline = time.monotonic() + float(os.environ.get("SOAK_MINUTES", "30")) * 60
    profile = settings(
        max_examples=int(os.environ.get("SOAK_EXAMPLES", "20")),
        stateful_step_count=int(os.environ.get("SOAK_STEPS", "30")),
        derandomize=False,  # a fresh seed every round
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    chosen = rows()
    disagreements = raw = rounds = 0
    while time.monotonic() < deadline:
        row = chosen[rounds % len(chosen)]
        rounds += 1
        try:
            run_state_machine_as_test(machine.machine_for(row), settings=profile)
        except Exception as exc:  # a disagreement: keep its shrunk steps as a regression
            # Hypothesis replays each shrunk failure last, in the order it raises them: the
            # steps recorded now are those of the last one (the others show in its report).
            steps = list(machine.LAST_STEPS)
            errors = errors_of(exc)
            disagreements += len(errors)
            raw += sum("not a SafepointError" in str(error) for error in errors)
            for error in errors[-1:]:
                text = str(error)
                slug = re.sub(r"[^a-z0-9]+", "_", text.lower())[:48].strip("_")
                digest = hashlib.sha256(repr(steps).encode()).hexdigest()[:8]
                path = REGRESSIONS / f"{row.name}_{slug}_{digest}.py"
                path.write_text(script(row, steps, text))
                ruff = Path(sys.executable).with_name("ruff")  # the lint's format, where the venv has it
                if ruff.exists():
                    subprocess.run([str(ruff), "format", "--quiet", str(path)], check=False)
                print(f"disagreement on {row.name}: {text.splitlines()[0]}\n  -> {path}", flush=True)
        print(
            f"round {rounds} ({row.name}): {machine.COUNTS['operations']} operations, "
            f"{disagreements} disagreements, {raw} raw exceptions",
            flush=True,
        )
    total = machine.COUNTS["operations"]
    print(f"soak: {total} operations, {disagreements} disagreements, {raw} raw exceptions")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
