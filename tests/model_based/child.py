"""The writer the machine SIGKILLs: saves a run's steps, records a call after each (the call
journal), and notes each acknowledged step in a ledger.

Forked by ``ops_store.act_sigkill_writer`` (or run as ``python -m model_based.child
SPEC_JSON`` with tests/ and src/ on the path). The spec holds the store's opening
spec (``World.spec``), the run id, the checkpoints to save in order and the
ledger's path. A line goes to the ledger (flushed and fsynced, outside the
database) only after ``save`` and the step's ``record_call`` returned, so every
line is an acknowledged save and entry; the save (and entry) after the last
line may or may not have committed when the kill lands.
"""

from __future__ import annotations

import json
import os
import sys

import safepoint
from safepoint import Checkpoint, ParentRef

from .world import options_of


def build(run_id: str, step: int, content: dict) -> Checkpoint:  # type: ignore[type-arg]
    """A fresh checkpoint of ``content`` (the model's form) at ``step``, as a user builds one each step."""
    values = {k: v for k, v in content.items() if k not in ("parent", "status")}
    parent = content["parent"]
    return Checkpoint(
        run_id=run_id,
        step=step,
        status=content["status"],
        parent=None if parent is None else ParentRef(parent["run_id"], parent["step"]),
        **values,
    )


def main(path: str) -> None:
    with open(path) as file:
        spec = json.load(file)
    store = safepoint.open_store(spec["store"]["url"], **options_of(spec["store"]))
    with open(spec["ledger"], "a") as ledger:
        for step, content in enumerate(spec["steps"]):
            store.save(build(spec["run_id"], step, content))
            # The call the next step makes, recorded before the step's line: an acknowledged
            # step's entry is there; the one in flight may be without it.
            store.record_call(spec["run_id"], f"child#{step}", spec["results"][step])
            ledger.write(f"{step}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
    store.close()


if __name__ == "__main__":
    main(sys.argv[1])
