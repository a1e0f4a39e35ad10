"""An agent written at one schema version: ``python schema_agent.py URL RUN_ID VERSION STEPS [KILL_AT]``.

It starts the run, or resumes it (loading through its version's chain),
and works until the run has ``STEPS`` checkpoints, one message per step in
its version's message format. With ``KILL_AT`` it SIGKILLs itself right after
saving that step, as a crash would. ``URL`` may carry ``#schema=NAME`` for a
PostgreSQL schema.
"""

from __future__ import annotations

import os
import signal
import sys

import safepoint
from safepoint import Checkpoint

sys.path.insert(0, os.path.dirname(__file__))
from schema_chains import CHAINS


def open_target(url: str, version: int) -> safepoint.Store:
    base, _, fragment = url.partition("#")
    options = dict(part.split("=", 1) for part in fragment.split("&") if part)
    return safepoint.open_store(base, migrations=CHAINS[version], **options)


def main() -> None:
    url, run_id, version, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    kill_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    store = open_target(url, version)
    counter = "count" if version >= 4 else "n"
    text = "content" if version >= 3 else "text"
    try:
        cp = store.load(run_id).next()
    except safepoint.NotFound:
        state: dict[str, object] = {counter: 0}
        if version >= 2:
            state["tags"] = []
        cp = Checkpoint(run_id=run_id, schema_version=version, state=state)
    while cp.step < steps:
        cp.messages.append({"role": "user", text: f"step {cp.step} at v{version}"})
        cp.state[counter] += 1
        store.save(cp)
        if cp.step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        cp = cp.next()
    store.close()


if __name__ == "__main__":
    main()
