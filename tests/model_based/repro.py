"""Replaying a list of steps against a fresh store: a shrunk failure or a named regression.

A regression script (``regressions/*.py``, written by ``make soak``) holds
``CONFIG`` (the settings, a dict of ``configurations.Config``'s fields) and
``STEPS`` (a list of ``(operation, args)``). Replay one by hand with
``PYTHONPATH=src:tests python -m model_based.repro tests/model_based/regressions/NAME.py``;
``tests/test_model_based.py`` replays every one.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from .configurations import BY_NAME, Config
from .machine import machine_for


def replay(config: str | dict[str, str], steps: list[tuple[str, dict[str, Any]]]) -> None:
    """Take ``steps`` in order on a fresh store of ``config`` (a row's name or its settings),
    checking every invariant after each."""
    row = BY_NAME[config] if isinstance(config, str) else Config(**config)
    machine = machine_for(row)()
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


def script(config: Config, steps: list[tuple[str, dict[str, Any]]], finding: str) -> str:
    """The text of a regression script for ``steps`` (the repr of plain data is Python)."""
    first = finding.splitlines()[0] if finding else "?"
    lines = [
        "# ruff: noqa: E501  (generated: the steps are data, one per line)",
        '"""A disagreement make soak found; replayed by tests/test_model_based.py."""',
        "",
        f"FINDING = {first!r}",
        f"CONFIG = {vars(config)!r}",
        "STEPS = [",
        *(f"    ({name!r}, {args!r})," for name, args in steps),
        "]",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    replay_file(sys.argv[1])
    print("replayed without a disagreement")
