"""How many rooms a save walks through: counted by a profiler hook, so later changes are held to it.

A reader who follows a default SQLite save should open few files and jump
between them rarely. ``sys.setprofile`` sees every Python function call; we
count the distinct source files of ``src/safepoint`` whose code runs during
one save, and the calls whose caller is in another ``src/safepoint`` file
(a file boundary crossed). Both are counted for a checkpoint changed in
place (the usual loop) and for a fresh one built each step (the store's
memory of the run gives its delta), on the step after the first, with a
few messages, counters, cursors and state — the work of a real agent step.

Bounds: what the save walks today (25 files, 111 crossings, from 34 and 143
at the start of issue 31), so it cannot grow unnoticed. Issue 31 asks for 20
and 60; the rest is open work (docs/architecture.md, "Walking a save"). A
change that needs more should say why there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint

SRC = str(Path(safepoint.__file__).resolve().parent)
MAX_FILES = 25
MAX_CROSSINGS = 111


def _step(cp: Checkpoint, step: int) -> Checkpoint:
    cp.step = step
    cp.messages.append({"role": "user", "content": f"what is in batch {step}?"})
    cp.messages.append({"role": "assistant", "content": f"batch {step} holds 3 items", "tool_calls": []})
    cp.counters["tokens_in"] = cp.counters.get("tokens_in", 0) + 120
    cp.counters["spend"] = 0.01 * (step + 1)
    cp.cursors["batch"] = {"done": step, "of": 10}
    cp.state["notes"] = [f"note {i}" for i in range(step + 1)]
    return cp


def _walk(save: Any) -> tuple[set[str], int]:
    files: set[str] = set()
    crossings = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal crossings
        if event != "call":
            return
        here = frame.f_code.co_filename
        if not here.startswith(SRC):
            return
        files.add(here[len(SRC) + 1 :])
        caller = frame.f_back
        if (
            caller is not None
            and caller.f_code.co_filename.startswith(SRC)
            and caller.f_code.co_filename != here
        ):
            crossings += 1

    sys.setprofile(hook)
    try:
        save()
    finally:
        sys.setprofile(None)
    return files, crossings


@pytest.mark.parametrize("fresh", [False, True], ids=["changed-in-place", "fresh-each-step"])
def test_a_default_sqlite_save_walks_few_rooms(tmp_path: Path, fresh: bool) -> None:
    with safepoint.open_store(f"sqlite:///{tmp_path}/state.db") as store:
        cp = _step(Checkpoint(run_id="walk"), 0)
        store.save(cp)
        cp = _step(cp, 1)
        store.save(cp)
        nxt = _step(cp, 2)
        if fresh:
            nxt = Checkpoint.from_dict(nxt.to_dict() | {"created_at": None, "digest": None})
        files, crossings = _walk(lambda: store.save(nxt))
        assert store.load("walk").step == 2
    kind = "fresh" if fresh else "in place"
    print(f"\na default SQLite save ({kind}): {len(files)} files, {crossings} crossings")
    for name in sorted(files):
        print("  ", name)
    assert len(files) <= MAX_FILES, sorted(files)
    assert crossings <= MAX_CROSSINGS
