"""A worker process for the torture tests: works queued runs of a few steps each.

    python tests/helpers/torture_worker.py STORE_URL JOURNAL WORKER_ID STEPS LEASE [STEP_DELAY [naive]]

A "naive" handler never looks at ``job.stopping``: only a refused save stops
it, which is what the SIGSTOP test needs to prove fencing on the save itself.

Every save the store acknowledges is appended to JOURNAL as
``run_id, step, epoch, worker_id, digest`` — the test checks each against the
store afterwards. A save refused with LeaseLost is journalled as ``lost``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import safepoint
from safepoint import Job, Status, Worker


def main() -> None:
    url, journal_path, worker_id, steps, lease = sys.argv[1:6]
    step_delay = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    naive = len(sys.argv) > 7 and sys.argv[7] == "naive"
    total = int(steps)
    logging.basicConfig(level=logging.ERROR)
    journal = open(journal_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115  # lives as long as the process

    def handler(job: Job) -> Status | None:
        cp = job.checkpoint
        while cp.status is not Status.DONE:
            if job.stopping and not naive:
                return None
            nxt = cp.next()
            nxt.messages.append({"role": "assistant", "content": f"{worker_id} did step {nxt.step}"})
            nxt.state["writer"] = [worker_id, job.lease.epoch]
            nxt.counters["steps"] = nxt.step
            if nxt.step >= total:
                nxt.status = Status.DONE
            time.sleep(step_delay)
            try:
                info = job.save(nxt)
            except safepoint.LeaseLost:
                journal.write(f"lost\t{job.run_id}\t{nxt.step}\t{job.lease.epoch}\t{worker_id}\n")
                raise
            journal.write(f"saved\t{job.run_id}\t{nxt.step}\t{job.lease.epoch}\t{worker_id}\t{info.digest}\n")
            cp = nxt
        return Status.DONE

    # Store options (e.g. a PostgreSQL schema) come from the test, as JSON.
    store = safepoint.open_store(url, **json.loads(os.environ.get("SAFEPOINT_TEST_STORE_OPTIONS", "{}")))
    # Every SIGKILL a run receives costs it an attempt (counted at claim): never quarantine here.
    worker = Worker(store, handler, worker_id=worker_id, lease=float(lease), poll=0.05, max_attempts=1000)
    worker.install_signal_handlers()
    worker.run()
    store.close()


if __name__ == "__main__":
    main()
