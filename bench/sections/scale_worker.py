"""One worker process of the scale benchmark (``sections.scale``): a ``safepoint.Worker`` timed per claim.

    python bench/sections/scale_worker.py SPEC_JSON

The spec names the store URL and options, the worker id, the steps per run,
the lease, and the file to write the results to. The process opens its store,
makes one round trip so its pool is connected, prints ``ready`` and waits for
a line on stdin (the parent's barrier: the clock starts once every worker is
connected). Then it works the queue with ``Worker.run(stop_when_idle=True)``:
the handler saves ``steps`` steps with ``job.save`` and returns ``DONE``. The
parent sends SIGTERM once every run is done, so the last workers do not sleep
out the drain (up to one lease) before they exit.

Claim latency is measured here, in the worker, around ``store.claim`` (the
method the ``Worker`` calls), on ``time.monotonic`` — one clock for every
process on the machine, so the parent can order all workers' claims.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import safepoint
from safepoint import Status
from safepoint.worker import Job


def main(spec: dict[str, Any]) -> None:
    store = safepoint.open_store(spec["url"], **spec["options"])
    # [started (monotonic), seconds, run_id, epoch, lease expiry (unix time), started (unix time)]
    claims: list[list[Any]] = []
    empty: list[float] = []  # seconds of claims that found nothing
    handled: list[str] = []
    saves: list[float] = []
    finished = [0.0]  # when the last run's handler returned (its release follows)
    steps = int(spec["steps"])
    claim = store.claim

    def timed_claim(worker_id: str, *, lease: float) -> safepoint.Lease | None:
        wall = time.time()
        started = time.monotonic()
        got = claim(worker_id, lease=lease)
        seconds = time.monotonic() - started
        if got is None:
            empty.append(seconds)
        else:
            claims.append([started, seconds, got.run_id, got.epoch, got.expires_at.timestamp(), wall])
        return got

    # The Worker's own calls, timed (an instance attribute shadows the method).
    store.claim = timed_claim  # type: ignore[method-assign]

    def handler(job: Job) -> Status:
        cp = job.checkpoint
        for _ in range(steps):
            cp = cp.next()
            cp.messages.append({"role": "assistant", "content": f"step {cp.step}: looked it up"})
            cp.counters["tokens_out"] = cp.counters.get("tokens_out", 0) + 40
            cp.cursors["steps"] = {"done": cp.step, "total": steps}
            started = time.monotonic()
            job.save(cp)
            saves.append(time.monotonic() - started)
        handled.append(job.run_id)
        finished[0] = time.monotonic()
        return Status.DONE

    worker = safepoint.Worker(store, handler, worker_id=spec["worker_id"], lease=spec["lease"], poll=0.05)
    worker.install_signal_handlers()  # the parent sends SIGTERM once every run is done
    store.runs(limit=1)  # one round trip: the pool is connected before the barrier
    print("ready", flush=True)
    sys.stdin.readline()
    began, cpu = time.monotonic(), time.process_time()
    worker.run(stop_when_idle=True)
    cpu = time.process_time() - cpu  # this process's CPU (all threads) while it worked
    # The parent's SIGTERM may come while this process exits, when Python has put back the
    # default handler (which would end it with -15): from here on, ignore it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    store.close()
    result = {
        "began": began,
        "cpu": cpu,
        "last_done": finished[0] or began,
        "claims": claims,
        "empty": empty,
        "handled": handled,
        "saves": saves,
    }
    Path(spec["out"]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
