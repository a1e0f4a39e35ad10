"""A worker process whose handler drives ``Run`` under the job's lease — the documented way.

    python tests/helpers/run_worker.py STORE_URL LEDGER WORKER_ID STEPS LEASE MAX_ATTEMPTS [STEP_DELAY]

Each run does STEPS steps: step k adds k*k to ``state["total"]`` and appends
one message; the last step finishes the run. Finishing is the run's side
effect: the process appends ``done <run_id>`` to LEDGER right after
``run.finish()`` returns, so a run done twice shows up twice. A run whose
``state["poison"]`` is set raises in its handler every time (a poison run).
Store options (a PostgreSQL schema, ``prepare_threshold``) come as JSON in
``SAFEPOINT_TEST_STORE_OPTIONS``; with ``SAFEPOINT_TEST_MIGRATE`` set the store
lifts version-1 checkpoints to 2, and a run whose state is ``unmigratable``
fails to load (its migration raises). The worker stops when idle, or on SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

import safepoint
from safepoint import Job, MigrationChain, Run, Status, Worker, retrying


def lift(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2; a run marked ``unmigratable`` cannot be lifted (an unloadable run)."""
    if checkpoint["state"].get("unmigratable"):
        raise ValueError("this checkpoint cannot be lifted to version 2")
    return checkpoint


def main() -> None:
    url, ledger_path, worker_id, steps, lease, max_attempts = sys.argv[1:7]
    step_delay = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    total = int(steps)
    logging.basicConfig(level=logging.ERROR)
    ledger = open(ledger_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115  # lives as long as the process

    def handler(job: Job) -> Status | None:
        run = Run.open(job.store, job.run_id, lease=job.lease)
        while run.active:
            if job.stopping:
                return None
            if run.state.get("poison"):
                raise RuntimeError("this handler always fails on a poison run")
            k = int(run.state.get("k", 0)) + 1
            run.state["k"] = k
            run.state["total"] = int(run.state.get("total", 0)) + k * k
            run.append({"role": "assistant", "content": f"step {k}"})
            time.sleep(step_delay)
            if k >= total:
                run.finish()
                ledger.write(f"done\t{job.run_id}\t{worker_id}\n")
            else:
                run.commit()
        return run.status

    options = json.loads(os.environ.get("SAFEPOINT_TEST_STORE_OPTIONS", "{}"))
    if os.environ.get("SAFEPOINT_TEST_MIGRATE"):
        options["migrations"] = MigrationChain(current=2, migrations={1: lift})
    # A worker may start in the middle of an outage: opening the store raises
    # StoreUnavailable then, and the documented answer is to retry it.
    store = retrying.call("open", lambda: safepoint.open_store(url, **options))
    worker = Worker(
        store,
        handler,
        worker_id=worker_id,
        lease=float(lease),
        poll=0.05,
        max_attempts=int(max_attempts),
        backoff=0.05,
    )
    worker.install_signal_handlers()
    worker.run(stop_when_idle=True)
    ledger.write(f"exit\t{worker_id}\n")
    store.close()


if __name__ == "__main__":
    main()
