"""A full disk is a fault, not a failure: saves raise StoreUnavailable, retried until space returns.

Here the disk is filled with SQLite's ``PRAGMA max_page_count`` (the
database may not grow); the retry window outlasts the full period.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Job, Status, Worker
from safepoint.errors import StoreUnavailable
from safepoint.store.sqlite.driver import SQLiteDriver


def test_saves_on_a_full_database_wait_for_space_and_no_run_fails(tmp_path: Path) -> None:
    """max_page_count reached: a save is StoreUnavailable; workers ride it out and finish every run."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'q.db'}") as store:
        for i in range(5):
            store.save(Checkpoint(run_id=f"big-{i}"))
            store.enqueue(f"big-{i}")
        driver = store.driver
        assert isinstance(driver, SQLiteDriver)
        ((pages,),) = driver.execute_raw("PRAGMA page_count")
        driver.execute_raw(f"PRAGMA max_page_count = {int(pages)}")
        probe = store.load("big-0").next()
        probe.messages.append({"role": "tool", "content": "x" * 50_000})
        with pytest.raises(StoreUnavailable):
            store.save(probe)

        def handler(job: Job) -> Status:
            cp = job.checkpoint
            for _ in range(3):
                cp = cp.next()
                cp.messages.append({"role": "tool", "content": "y" * 20_000})
                job.save(cp)
            return Status.DONE

        worker = Worker(store, handler, lease=30, poll=0.01)
        thread = threading.Thread(target=worker.run, kwargs={"stop_when_idle": True})
        thread.start()
        time.sleep(1.0)  # the disk stays full a while; the worker retries
        driver.execute_raw("PRAGMA max_page_count = 1073741823")  # space is back
        thread.join(timeout=60)
        assert not thread.is_alive()
        statuses = {info.run_id: info.status for info in store.runs()}
        assert statuses == {f"big-{i}": Status.DONE for i in range(5)}
