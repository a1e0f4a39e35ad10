"""Save a checkpoint with a large value, then SIGKILL inside the next save, after its blob
is written and before its row commits: ``python blob_crash.py STORE_URL``."""

from __future__ import annotations

import os
import signal
import sys

import safepoint
from safepoint import Checkpoint

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from test_offload import output

armed = False


def trace(statement: str) -> None:
    # The save's blob is durable by the time its checkpoint row is inserted.
    if armed and statement.lstrip().startswith("INSERT INTO safepoint_checkpoints"):
        os.kill(os.getpid(), signal.SIGKILL)


store = safepoint.open_store(sys.argv[1], trace=trace)
cp = Checkpoint(run_id="crash", state={"out": output(0, 100_000)})
store.save(cp)
cp = cp.next()
cp.state["out"] = output(1, 100_000)
armed = True
store.save(cp)
raise SystemExit("the save was not killed")
