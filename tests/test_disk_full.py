"""A full disk is a fault, not a failure: saves raise StoreUnavailable, retried until space returns.

Two ways to fill it: SQLite's ``PRAGMA max_page_count`` (the database may
not grow), and a real file system — a small tmpfs the test mounts and fills
with a filler file, so the kernel refuses the WAL's writes with ENOSPC. In
both the retry window outlasts the full period.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
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


# -- a real full file system --------------------------------------------------

# Marker text in every message saved: no error or log line may quote it.
MARKER = "stored-value-never-quoted-"
FULL_FOR = 1.0  # seconds the disk stays full with the worker running: well inside retry_for
RETRY_FOR = 30.0


@contextlib.contextmanager
def small_tmpfs(directory: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted on ``directory``; skipped where it cannot be mounted, failed under CI."""
    directory.mkdir()
    problem = None
    if os.geteuid() != 0:
        problem = "mounting a tmpfs needs root"
    elif shutil.which("mount") is None:
        problem = "no mount command"
    else:
        mount = ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(directory)]
        done = subprocess.run(mount, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            problem = f"mount -t tmpfs failed: {done.stderr.strip()}"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    try:
        yield directory
    finally:
        unmount = subprocess.run(["umount", str(directory)], capture_output=True, timeout=30, check=False)
        if unmount.returncode != 0:  # something still holds a file there: detach it anyway
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30, check=True)


def fill(filler: Path) -> None:
    """Write ``filler`` until the file system has no byte left (ENOSPC)."""
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while True:
            os.write(fd, chunk)  # a short write takes the last bytes; the next one raises
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def verified(store: safepoint.Store, run_ids: list[str]) -> dict[str, list[str]]:
    """Every run's digests, step by step, after loading each step (``safepoint verify``'s check)."""
    digests = {}
    for run_id in run_ids:
        history = store.history(run_id)
        for info in history:
            assert store.load(run_id, info.step).step == info.step  # digest checked on load
        digests[run_id] = [info.digest for info in history]
    return digests


def test_saves_on_a_full_tmpfs_wait_for_space_and_no_run_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ENOSPC on a mounted tmpfs: saves are StoreUnavailable, nothing stored is lost, every run finishes."""
    run_ids = [f"full-{i}" for i in range(5)]
    with small_tmpfs(tmp_path / "mnt") as mnt, safepoint.open_store(f"sqlite:///{mnt / 'q.db'}") as store:
        driver = store.driver
        assert isinstance(driver, SQLiteDriver)
        for run_id in run_ids:
            store.save(Checkpoint(run_id=run_id, messages=[{"role": "user", "content": MARKER}]))
            store.enqueue(run_id)
        before = verified(store, run_ids)
        filler = mnt / "filler"
        fill(filler)

        probe = store.load(run_ids[0]).next()
        probe.messages.append({"role": "tool", "content": MARKER * 2_000})
        with pytest.raises(StoreUnavailable) as caught:
            store.save(probe)
        # What the kernel's ENOSPC becomes: SQLITE_FULL from the WAL write at
        # COMMIT (an I/O error code, SQLITE_IOERR_*, is classified the same).
        cause = caught.value.__cause__
        assert isinstance(cause, sqlite3.Error)
        assert cause.sqlite_errorname == "SQLITE_FULL" or cause.sqlite_errorname.startswith("SQLITE_IOERR")
        assert MARKER not in str(caught.value)
        assert verified(store, run_ids) == before  # the previous heads, whole
        assert driver.execute_raw("PRAGMA integrity_check") == [("ok",)]

        calls: collections.Counter[str] = collections.Counter()
        mid_run, refilled = threading.Event(), threading.Event()

        def handler(job: Job) -> Status:
            calls[job.checkpoint.run_id] += 1
            cp = job.checkpoint
            for step in range(1, 4):
                cp = cp.next()
                cp.messages.append({"role": "tool", "content": MARKER * 1_000})
                job.save(cp)
                if step == 1 and not mid_run.is_set():  # the first run: let the disk fill mid-run
                    mid_run.set()
                    assert refilled.wait(30)
            return Status.DONE

        def retried(operation: str) -> None:
            """Wait until the worker has retried ``operation`` on the full disk."""
            deadline = time.monotonic() + 10
            while not any(
                r.getMessage().startswith(f"{operation}: ") and "disk is full" in r.getMessage()
                for r in caplog.records
            ):
                assert time.monotonic() < deadline, f"the worker's {operation} never met the full disk"
                time.sleep(0.02)

        worker = Worker(store, handler, lease=30, poll=0.01, retry_for=RETRY_FOR)
        thread = threading.Thread(target=worker.run, kwargs={"stop_when_idle": True})
        with caplog.at_level(logging.WARNING, logger="safepoint.retrying"):
            thread.start()
            try:
                retried("claim")  # started on a full disk: claiming is a write too
                filler.unlink()  # space is back: the first run starts
                assert mid_run.wait(30)
                fill(filler)  # and is gone again mid-run
                refilled.set()
                retried("save")
                time.sleep(FULL_FOR)  # the disk stays full a while; the worker retries
                assert {info.status for info in store.runs()} == {Status.RUNNING}  # none failed, none done
            finally:
                refilled.set()
                filler.unlink(missing_ok=True)  # space is back for good
                thread.join(timeout=60)
        assert not thread.is_alive()
        assert MARKER not in caplog.text

        infos = {info.run_id: info for info in store.runs()}
        assert {run_id: info.status for run_id, info in infos.items()} == dict.fromkeys(run_ids, Status.DONE)
        assert all(info.last_error is None and info.head_step == 3 for info in infos.values())
        # No attempt was given up (counted at claim, reset by DONE), none is waiting to retry.
        assert all(info.attempts == 0 and info.retry_at is None for info in infos.values())
        assert calls == dict.fromkeys(run_ids, 1)  # ridden out by retries: no attempt was given up
        after = verified(store, run_ids)
        assert all(after[run_id][0] == before[run_id][0] for run_id in run_ids)
        assert driver.execute_raw("PRAGMA integrity_check") == [("ok",)]
