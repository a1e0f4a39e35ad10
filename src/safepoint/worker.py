"""``Worker``: claim queued runs, keep their leases alive, hand them to a handler.

A worker loops: ``claim`` a run (one statement; ``SKIP LOCKED`` on
PostgreSQL), load its latest checkpoint, call ``handler(job)`` while a
background thread heartbeats the lease, then ``release`` the run. Any number
of workers in any number of processes and machines can share one store: the
lease epoch fences off a worker that stalled past its lease (GC pause, SIGSTOP,
network partition) — its next save raises ``LeaseLost`` and changes nothing.

The handler does steps and saves each one with ``job.save(cp)``; it should
check ``job.stopping`` between steps. Its return value decides what happens
to the run: a ``Status`` (e.g. ``Status.DONE``) releases it with that status;
``None`` (stopped early, e.g. on SIGTERM) puts it back in the queue.

Store errors (a database restart, a dropped connection) are retried with
backoff; a save whose commit was interrupted is checked against the store
before being retried, so no acknowledged checkpoint is lost or written twice.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TypeVar

from safepoint.errors import LeaseLost, StoreError
from safepoint.model import Checkpoint, CheckpointInfo, Lease, Status
from safepoint.store import Store
from safepoint.visible import ID_LEN, VisibleTracebacks, visible

log = logging.getLogger("safepoint.worker")
# A handler's exception can quote a tool's output: its text reaches log handlers escaped.
log.addFilter(VisibleTracebacks())
T = TypeVar("T")


@dataclass
class Job:
    """One claimed run, as the handler sees it."""

    store: Store
    lease: Lease
    checkpoint: Checkpoint
    _stop: threading.Event
    lost: threading.Event = field(default_factory=threading.Event)
    retry_for: float = 60.0

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to stop or the lease was lost: finish the step and return."""
        return self._stop.is_set() or self.lost.is_set()

    def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        """Save under this job's lease; ``LeaseLost`` if another worker took the run over.

        If the store fails mid-save, the save is retried after checking
        whether its commit in fact landed (then it is not written again).
        """
        deadline = time.monotonic() + self.retry_for
        delay = 0.05
        while True:
            try:
                return self.store.save(checkpoint, lease=self.lease)
            except StoreError:
                if time.monotonic() > deadline:
                    raise
                log.warning(
                    "save of run %s step %s failed; retrying",
                    visible(checkpoint.run_id, max_len=ID_LEN),
                    visible(str(checkpoint.step), max_len=ID_LEN),
                )
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                landed = self._landed(checkpoint)
                if landed is not None:
                    return landed

    def _landed(self, checkpoint: Checkpoint) -> CheckpointInfo | None:
        """The stored header of ``checkpoint`` if an interrupted save did commit it."""
        try:
            head = self.store.run(checkpoint.run_id)
            if head.head_step < checkpoint.step:
                return None
            # Only this lease's holder can have written the step; make sure it still is us.
            self.lease = self.store.heartbeat(self.lease)
            return self.store.history(checkpoint.run_id)[-1]
        except StoreError:
            return None


Handler = Callable[[Job], Status | None]


class Worker:
    """Claims queued runs from ``store`` and runs ``handler`` on each.

    ``lease`` is the lease duration in seconds; the lease is renewed every
    ``heartbeat`` seconds (default a third of it). ``poll`` is how long to wait
    when nothing is queued.
    """

    def __init__(
        self,
        store: Store,
        handler: Handler,
        *,
        worker_id: str | None = None,
        lease: float = 30.0,
        heartbeat: float | None = None,
        poll: float = 0.5,
        retry_for: float = 60.0,
    ) -> None:
        self.store = store
        self.handler = handler
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_seconds = lease
        self.heartbeat_seconds = heartbeat if heartbeat is not None else lease / 3
        self.poll = poll
        self.retry_for = retry_for
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the worker to stop: the handler finishes its step, saves, and the run is released."""
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """Stop gracefully on SIGTERM and SIGINT (call from the main thread)."""

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %s: stopping after the current step", signum)
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def run(self, *, max_runs: int | None = None, stop_when_idle: bool = False) -> int:
        """Work until stopped (or idle, or ``max_runs`` handled); returns runs handled."""
        handled = 0
        while not self._stop.is_set() and (max_runs is None or handled < max_runs):
            lease = self._retrying(lambda: self.store.claim(self.worker_id, lease=self.lease_seconds))
            if lease is None:
                if stop_when_idle:
                    break
                self._stop.wait(self.poll)
                continue
            self._handle(lease)
            handled += 1
        return handled

    def _handle(self, lease: Lease) -> None:
        checkpoint = self._retrying(lambda: self.store.load(lease.run_id))
        job = Job(self.store, lease, checkpoint, self._stop, retry_for=self.retry_for)
        beating = threading.Event()
        beater = threading.Thread(target=self._beat, args=(job, beating), daemon=True)
        beater.start()
        outcome: Status | None
        try:
            outcome = self.handler(job)
        except LeaseLost:
            log.warning(
                "lost the lease on run %s; leaving it to its new owner", visible(lease.run_id, max_len=ID_LEN)
            )
            return
        except Exception:
            log.exception("handler failed on run %s", visible(lease.run_id, max_len=ID_LEN))
            outcome = Status.FAILED
        finally:
            beating.set()
            beater.join()
        if job.lost.is_set():
            return
        try:
            self._retrying(lambda: self.store.release(job.lease, status=outcome, requeue=outcome is None))
        except LeaseLost:
            log.warning("lease on run %s expired before release", visible(lease.run_id, max_len=ID_LEN))

    def _beat(self, job: Job, done: threading.Event) -> None:
        while not done.wait(self.heartbeat_seconds):
            try:
                job.lease = self.store.heartbeat(job.lease)
            except LeaseLost:
                job.lost.set()
                return
            except StoreError:
                log.warning("heartbeat for run %s failed; retrying", visible(job.run_id, max_len=ID_LEN))

    def _retrying(self, action: Callable[[], T]) -> T:
        """Run ``action``, retrying store errors with backoff for up to ``retry_for`` seconds."""
        deadline = time.monotonic() + self.retry_for
        delay = 0.05
        while True:
            try:
                return action()
            except StoreError:
                if time.monotonic() > deadline:
                    raise
                log.warning("store unavailable; retrying in %.2fs", delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
