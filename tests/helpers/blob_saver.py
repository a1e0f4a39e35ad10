"""One of the processes saving while garbage collection runs in a loop:
``python blob_saver.py STORE_URL N STOP_AT JOURNAL``.

It saves runs whose state holds large values — new ones, ones repeated from
earlier steps, and ones shared with the other processes — tries a stale step
now and then (refused with Conflict, writing nothing), and deletes every third
run it finished, which leaves its blobs unreferenced for the collector — while
the other processes may be saving the shared ones again, the race the blob
guard exists for. Every accepted save is appended to the journal as
``run_id step`` and every deletion as ``deleted run_id``.
"""

from __future__ import annotations

import hashlib
import sys
import time

import safepoint
from safepoint import Checkpoint


def value(seed: str, size: int = 70_000) -> str:
    block = hashlib.sha256(seed.encode()).hexdigest()
    return (block * (size // len(block) + 1))[:size]


def expected_state(run_id: str, step: int) -> dict[str, str]:
    return {
        "new": value(f"{run_id}/{step}"),  # unique to this checkpoint
        "repeat": value(f"{run_id}/{step // 5}"),  # the same for five steps
        "shared": value(f"shared/{step % 3}"),  # the same across processes
    }


def main() -> None:
    url, n, stop_at, journal_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    store = safepoint.open_store(url)
    with open(journal_path, "a") as journal:
        run = 0
        while time.time() < stop_at:
            run_id = f"p{n}-r{run}"
            cp = Checkpoint(run_id=run_id)
            for step in range(8):
                cp.state = expected_state(run_id, step)
                store.save(cp)
                journal.write(f"{run_id} {step}\n")
                journal.flush()
                if step == 4:
                    stale = Checkpoint(run_id=run_id, step=step, state={"orphan": value(f"orphan/{run_id}")})
                    try:
                        store.save(stale)
                    except safepoint.Conflict:
                        pass
                    else:
                        raise SystemExit("a stale save was accepted")
                cp = cp.next()
            if run % 3 == 2:
                store.delete_run(run_id)
                journal.write(f"deleted {run_id}\n")
                journal.flush()
            run += 1
    store.close()


if __name__ == "__main__":
    main()
