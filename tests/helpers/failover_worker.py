"""A worker process for the failover tests: ``Run`` under a ``Worker``, with a ledger of every
save the store acknowledged.

    python tests/helpers/failover_worker.py STORE_URL LEDGER WORKER_ID STEPS LEASE

Each run does STEPS steps: step k adds k*k to ``state["total"]`` and appends
one message; the last step finishes the run. The ledger (one tab-separated
line each, appended outside the database, flushed per line) holds:

* ``ack RUN STEP DIGEST WORKER TIME`` right after ``run.commit()`` or
  ``run.finish()`` returned: a save the store acknowledged (TIME is
  ``time.time()``, so the test can tell saves before a kill from those after);
* ``done RUN WORKER`` right after ``run.finish()``: the run's side effect, so a
  run done twice shows up twice;
* ``landed`` / ``resaved`` for each save whose commit was in doubt (the
  connection dropped while it committed) and whose retry settled it, as
  ``safepoint.retrying`` logs it: the stored digest equal (it had landed), or
  absent (it is saved again);
* ``exit WORKER`` when the worker drained the queue.

The store is opened as a user opens it: the URL alone, the retry policy the
``Worker``'s default (``retry_for``). The worker stops when idle, or on SIGTERM.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

import safepoint
from safepoint import Job, Run, Status, Worker, retrying

# safepoint.retrying's lines for an in-doubt save that a retry settled (stable wording).
OUTCOMES = {
    "an interrupted save had landed": "landed",
    "an interrupted save did not land": "resaved",
}


class Outcomes(logging.Handler):
    """Writes each settled in-doubt save the retry policy logs to the ledger."""

    def __init__(self, ledger: TextIO, worker_id: str) -> None:
        super().__init__(logging.INFO)
        self.ledger = ledger
        self.worker_id = worker_id

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for phrase, kind in OUTCOMES.items():
            if phrase in message:
                self.ledger.write(f"{kind}\t{self.worker_id}\t{time.time():.6f}\n")


def main() -> None:
    url, ledger_path, worker_id, steps, lease = sys.argv[1:6]
    total = int(steps)
    # Warnings and errors (retries, lost leases, failed attempts) to stderr, which the test keeps.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ledger = open(ledger_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115  # lives as long as the process
    retry_log = logging.getLogger("safepoint.retrying")
    retry_log.setLevel(logging.INFO)
    retry_log.addHandler(Outcomes(ledger, worker_id))

    def acknowledged(info: safepoint.CheckpointInfo) -> None:
        ledger.write(f"ack\t{info.run_id}\t{info.step}\t{info.digest}\t{worker_id}\t{time.time():.6f}\n")

    def handler(job: Job) -> Status | None:
        run = Run.open(job.store, job.run_id, lease=job.lease)
        while run.active:
            if job.stopping:
                return None
            k = int(run.state.get("k", 0)) + 1
            run.state["k"] = k
            run.state["total"] = int(run.state.get("total", 0)) + k * k
            run.append({"role": "assistant", "content": f"step {k}"})
            if k >= total:
                acknowledged(run.finish())
                ledger.write(f"done\t{job.run_id}\t{worker_id}\n")
            else:
                acknowledged(run.commit())
        return run.status

    # A worker may start in the middle of an outage: opening the store raises
    # StoreUnavailable then, and the documented answer is to retry it.
    store = retrying.call("open", lambda: safepoint.open_store(url))
    worker = Worker(store, handler, worker_id=worker_id, lease=float(lease), poll=0.05, backoff=0.05)
    worker.install_signal_handlers()
    worker.run(stop_when_idle=True)
    ledger.write(f"exit\t{worker_id}\n")
    store.close()


if __name__ == "__main__":
    main()
