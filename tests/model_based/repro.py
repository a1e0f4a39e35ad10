"""Replaying a list of steps against a fresh store: a shrunk failure or a named regression.

A regression script (``regressions/*.py``, written by ``make soak``) holds
``CONFIG`` (a row name of ``configurations.ROWS``) and ``STEPS`` (a list of
``(operation, args)``). Replay one by hand with
``PYTHONPATH=src:tests python -m model_based.repro tests/model_based/regressions/NAME.py``;
``tests/test_model_based.py`` replays every one.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from .machine import MACHINES


def replay(config: str, steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Take ``steps`` in order on a fresh store of row ``config``, checking every invariant after each."""
    machine = MACHINES[config]()
    try:
        machine.store_agrees_with_model()
        for name, args in steps:
            machine.step(name, args)
            machine.store_agrees_with_model()
    finally:
        machine.teardown()


def replay_file(path: str) -> None:
    script = runpy.run_path(path)
    replay(script["CONFIG"], script["STEPS"])


def script(config: str, steps: list[tuple[str, dict[str, Any]]], finding: str) -> str:
    """The text of a regression script for ``steps`` (the repr of plain data is Python)."""
    lines = [
        f'"""A disagreement make soak found: {finding.splitlines()[0] if finding else "?"}"""',
        "",
        f"CONFIG = {config!r}",
        "STEPS = [",
        *(f"    ({name!r}, {args!r})," for name, args in steps),
        "]",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    replay_file(sys.argv[1])
    print("replayed without a disagreement")
