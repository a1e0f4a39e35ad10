"""How many rooms a save walks through: counted by a profiler hook, so later changes are held to it.

A reader who follows a default SQLite save should open few files and jump
between them rarely. ``sys.setprofile`` sees every Python function call; we
count the distinct source files of ``src/safepoint`` whose code runs during
one save, and the calls whose caller is in another ``src/safepoint`` file
(a file boundary crossed). Both are counted for a checkpoint changed in
place (the usual loop) and for a fresh one built each step (the store's
memory of the run gives its delta), on a run's second step:

- a chat turn (the next step adding the assistant's reply): the default
  save issue 31 measured — 32 files and 99 crossings at its start, held to
  20 and 60;
- an agent step (two messages, counters named ``tokens_in``/``spend``,
  cursors and state): the token rules' keyword prefilter wakes on
  ``tokens_in``, so the header is walked by the scrubber (walk, marks, the
  rule engine) — 34 files and 143 crossings at the start, held to today's
  figures so they cannot grow unnoticed.

A change that needs more should say why in docs/architecture.md ("Walking a
save").
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint

SRC = str(Path(safepoint.__file__).resolve().parent)


def _chat_turn(cp: Checkpoint, step: int) -> Checkpoint:
    cp.step = step
    if step == 0:
        cp.messages.append({"role": "user", "content": "hi"})
    else:
        cp.messages.append({"role": "assistant", "content": f"reply {step}"})
    return cp


def _agent_step(cp: Checkpoint, step: int) -> Checkpoint:
    cp.step = step
    cp.messages.append({"role": "user", "content": f"what is in batch {step}?"})
    cp.messages.append({"role": "assistant", "content": f"batch {step} holds 3 items", "tool_calls": []})
    cp.counters["tokens_in"] = cp.counters.get("tokens_in", 0) + 120
    cp.counters["spend"] = 0.01 * (step + 1)
    cp.cursors["batch"] = {"done": step, "of": 10}
    cp.state["notes"] = [f"note {i}" for i in range(step + 1)]
    return cp


# (the step, the most files, the most crossings)
SAVES = {"chat turn": (_chat_turn, 20, 60), "agent step": (_agent_step, 22, 89)}


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

    # The collector stays out of the count: a collection during the save would run other
    # objects' finalizers and gc callbacks (a Run left by an earlier test lets go of its hold).
    gc.collect()
    gc.disable()
    sys.setprofile(hook)
    try:
        save()
    finally:
        sys.setprofile(None)
        gc.enable()
    return files, crossings


@pytest.mark.parametrize("fresh", [False, True], ids=["changed-in-place", "fresh-each-step"])
@pytest.mark.parametrize("kind", list(SAVES))
def test_a_default_sqlite_save_walks_few_rooms(tmp_path: Path, kind: str, fresh: bool) -> None:
    step, max_files, max_crossings = SAVES[kind]
    with safepoint.open_store(f"sqlite:///{tmp_path}/state.db") as store:
        cp = step(Checkpoint(run_id="walk"), 0)
        store.save(cp)
        nxt = step(cp, 1)
        if fresh:
            nxt = Checkpoint.from_dict(nxt.to_dict() | {"created_at": None, "digest": None})
        files, crossings = _walk(lambda: store.save(nxt))
        assert store.load("walk").step == 1
    shown = "fresh" if fresh else "in place"
    print(f"\na default SQLite save, {kind} ({shown}): {len(files)} files, {crossings} crossings")
    for name in sorted(files):
        print("  ", name)
    assert len(files) <= max_files, sorted(files)
    assert crossings <= max_crossings
