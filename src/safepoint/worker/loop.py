"""``Worker``: the loop that claims queued runs, keeps their leases alive and hands them to a handler.

What happens to a run that did not end cleanly is the attempt policy
(``attempts.py``); this module carries it out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from types import FrameType
from typing import Any

from safepoint import retrying
from safepoint.errors import InvalidArgument, LeaseLost, SchemaTooNew, StoreReadOnly, StoreUnavailable
from safepoint.model import Status
from safepoint.observe import NO_OBSERVER
from safepoint.records import Lease
from safepoint.retrying import RetryPolicy
from safepoint.store import Store
from safepoint.visible import ID_LEN, VisibleTracebacks, visible

from .attempts import GIVE_BACK, AttemptPolicy, Release, fault, finished, held, quarantined, recorded_error
from .fair import FairClaims
from .job import Handler, Job

log = logging.getLogger("safepoint.worker")
# A handler's exception can quote a tool's output: its text reaches log handlers escaped.
log.addFilter(VisibleTracebacks())


class Worker:
    """Claims queued runs from ``store`` and runs ``handler`` on each.

    ``lease`` is the lease duration in seconds; the lease is renewed every
    ``heartbeat`` seconds (default a third of it). ``poll`` is how long to wait
    when nothing is queued. ``retry_for`` is how long a store outage is
    ridden out before the run is given back. ``max_attempts`` claims of one
    run without a clean outcome quarantine it (kills and lost leases count:
    attempts are counted at claim); ``backoff`` seconds, doubling per
    attempt, pass between them. A store that takes no writes (``StoreReadOnly``:
    a hot standby, a read-only open) is no outage: ``run`` raises it from the
    claim rather than wait for a standby that will not turn writable.

    ``tenants`` (names, or names and integer weights): serve those tenants of
    ``store``, claiming from each in turn (``FairClaims``: a smooth weighted
    round robin over the tenants with claimable runs), each run worked on
    through its tenant's handle; ``tenant_limit`` caps the runs of one tenant
    leased at once, across workers. Without ``tenants`` the worker serves
    ``store``'s own tenant.
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
        max_attempts: int = 5,
        backoff: float = 1.0,
        tenants: Mapping[str, int] | Iterable[str] | None = None,
        tenant_limit: int | None = None,
    ) -> None:
        if type(max_attempts) is not int or max_attempts < 1:
            raise InvalidArgument("max_attempts must be an int of at least 1")
        self.store = store
        self.handler = handler
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_seconds = lease
        self.heartbeat_seconds = heartbeat if heartbeat is not None else lease / 3
        self.poll = poll
        self.retry = RetryPolicy(deadline=retry_for)
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.tenant_limit = tenant_limit
        self.fair = None if tenants is None else FairClaims(store, tenants, tenant_limit=tenant_limit)
        self._stop = threading.Event()
        self._next_gauge = 0.0  # time.monotonic() of the next queue-depth reading

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
        """Work until stopped (or idle, or ``max_runs`` handled); returns runs handled.

        ``stop_when_idle`` returns once nothing is claimable and no queued
        run becomes claimable within one lease period (a dead worker's lease
        expiring, a failed attempt's ``retry_at``); until then it sleeps to
        the earliest such moment and claims again.
        """
        handled = 0
        while not self._stop.is_set() and (max_runs is None or handled < max_runs):
            try:
                claimed = self._call("claim", self._claim)
                wait = None if claimed is not None else self._idle_wait(stop_when_idle)
            except StoreUnavailable:
                self._stop.wait(self.poll)  # outlasted the retries; the store may come back
                continue
            self._gauge_queue()
            if claimed is not None:
                self._handle(*claimed)
                handled += 1
            elif wait is None:
                break
            else:
                self._stop.wait(wait)
        return handled

    def _claim(self) -> tuple[Store, Lease] | None:
        """A run to work on and the handle of its tenant: the store's own, or the fair queue's turn."""
        if self.fair is not None:
            return self.fair.claim(self.worker_id, lease=self.lease_seconds)
        lease = self.store.claim(self.worker_id, lease=self.lease_seconds, tenant_limit=self.tenant_limit)
        return None if lease is None else (self.store, lease)

    def _gauge_queue(self) -> None:
        """``safepoint.queue.depth`` and ``safepoint.queue.too_new`` (queued runs newer than this
        worker, which it leaves alone), at most once a heartbeat, and only for an observed
        store (two count queries; an unobserved worker never pays them)."""
        observer = self.store.observer
        now = time.monotonic()
        if observer is NO_OBSERVER or now < self._next_gauge:
            return
        self._next_gauge = now + self.heartbeat_seconds
        with contextlib.suppress(StoreUnavailable):  # a gauge is not worth a retry: the next one will do
            observer.record("safepoint.queue.depth", self.store.queue_depth(), {})
            observer.record("safepoint.queue.too_new", self.store.queue_too_new(), {})

    def _idle_wait(self, stop_when_idle: bool) -> float | None:
        """How long to sleep before claiming again; None to stop."""
        if not stop_when_idle:
            return self.poll
        if self.fair is not None:  # every tenant was looked at just now and none had a run
            return None
        # Runs newer than this worker are not waited for: its claims leave them alone.
        until: timedelta | None = self._call("drain", self.store.claimable_in)
        if until is None or until > timedelta(seconds=self.lease_seconds):
            return None
        # Look again at least every heartbeat: the run may be released (or
        # finished) long before its lease would have expired.
        return max(min(until.total_seconds(), self.heartbeat_seconds), 0.01)

    # -- one run ------------------------------------------------------------------

    def _handle(self, store: Store, lease: Lease) -> None:
        try:
            self._work(store, lease)
        except Exception as exc:  # a last resort: nothing about one run ends the worker
            log.error("run %s: worker error %s", _shown(lease.run_id), self._describe(exc))

    def _work(self, store: Store, lease: Lease) -> None:
        expiry = _deadline(lease)
        try:
            checkpoint = self._call("load", lambda: store.load(lease.run_id), deadline=expiry)
        except LeaseLost:
            raise
        except Exception as exc:  # unloadable: corrupt, newer code's, a key it lacks, an outage …
            self._not_done(store, lease, exc)
            return
        job = Job(store, lease, checkpoint, self._stop, retry=self.retry)
        done = threading.Event()
        beater = threading.Thread(target=self._beat, args=(job, done), daemon=True)
        beater.start()
        outcome: Status | None = None
        failure: Exception | None = None
        try:
            outcome = self.handler(job)
        except LeaseLost:
            job.lost.set()
        except StoreUnavailable:
            outcome = None  # the store outlasted the retries: not the run's fault
        except Exception as exc:
            failure = exc
        finally:
            done.set()
            beater.join()
        if job.lost.is_set():
            # The store counted safepoint.leases.lost where it found out (the
            # fenced save or heartbeat): not counted again here.
            log.warning("lost the lease on run %s; leaving it to its new owner", _shown(lease.run_id))
        elif failure is not None:
            self._not_done(store, job.lease, failure)
        elif outcome is None:
            self._release(store, job.lease, GIVE_BACK)
        else:
            self._release(store, job.lease, finished(outcome))

    def _not_done(self, store: Store, lease: Lease, exc: Exception) -> None:
        """The run met ``exc``: released as whose fault it was says (``attempts.fault``)."""
        sealer = store.settings.sealer
        blame = fault(exc, lease.run_id, keys_checked=sealer is None or sealer.keys_checked)
        if blame == "store":
            self._release(store, lease, GIVE_BACK)
            return
        if blame == "attempt":
            self._failed_attempt(store, lease, exc)
            return
        error, kind = self._describe(exc), {"safepoint.error": type(exc).__name__}
        if blame == "row":  # reading it again reads the same damaged bytes
            self.store.observer.add("safepoint.runs.quarantined", 1, kind)
            log.error("run %s quarantined, its stored rows damaged: %s", _shown(lease.run_id), error)
            self._release(store, lease, quarantined(error))
            return
        # This worker cannot read it (newer code's, sealed under a key it lacks): left to one that can.
        too_new = isinstance(exc, SchemaTooNew)
        self.store.observer.add("safepoint.runs.too_new" if too_new else "safepoint.runs.unreadable", 1, kind)
        log.warning("run %s is not readable by this worker, held back: %s", _shown(lease.run_id), error)
        self._release(store, lease, held(self.lease_seconds, error))

    def _failed_attempt(self, store: Store, lease: Lease, exc: Exception) -> None:
        """Back to the queue after a backoff, or quarantined once out of attempts."""
        error = self._describe(exc)
        policy = AttemptPolicy(self.max_attempts, self.backoff)
        if policy.quarantines(lease):
            self.store.observer.add("safepoint.runs.quarantined", 1, {"safepoint.error": type(exc).__name__})
            log.error("run %s quarantined after %d attempts: %s", _shown(lease.run_id), lease.attempts, error)
        else:
            log.warning("run %s attempt %d failed: %s", _shown(lease.run_id), lease.attempts, error)
        self._release(store, lease, policy.failed(lease, error))

    def _release(self, store: Store, lease: Lease, release: Release) -> None:
        """Give the run back; if the store stays unavailable, the lease expires instead."""

        def run_release() -> None:
            store.release(
                lease,
                status=release.status,
                requeue=release.requeue,
                attempts=release.attempts,
                retry_at=release.retry_at,
                error=release.error,
            )

        try:
            self._call("release", run_release, deadline=_deadline(lease))
        except LeaseLost:
            log.warning("lease on run %s expired before release", _shown(lease.run_id))
        except StoreUnavailable:
            log.warning("could not release run %s; its lease will expire", _shown(lease.run_id))

    def _beat(self, job: Job, done: threading.Event) -> None:
        while not done.wait(self.heartbeat_seconds):
            try:
                job.lease = self._call(
                    "heartbeat",
                    lambda: job.store.heartbeat(job.lease),
                    deadline=_deadline(job.lease),
                    stop=done,
                )
            except LeaseLost:
                job.lost.set()
                return
            except (StoreUnavailable, StoreReadOnly):
                pass  # the next beat tries again; a save finds out if the lease is gone

    # -- helpers ------------------------------------------------------------------

    def _call(
        self, operation: str, fn: Callable[[], Any], *, deadline: float | None = None, stop: Any = None
    ) -> Any:
        observer = self.store.observer
        return retrying.call(
            operation, fn, observer=observer, policy=self.retry, deadline=deadline, stop=stop
        )

    def _describe(self, exc: Exception) -> str:
        """``Type: message`` — the exception's own words, scrubbed and truncated."""
        return recorded_error(exc, self.store.settings.scrubber)


def _deadline(lease: Lease) -> float:
    """The lease's expiry as a ``time.monotonic()`` instant."""
    return time.monotonic() + (lease.expires_at.timestamp() - time.time())


def _shown(run_id: str) -> str:
    return visible(run_id, max_len=ID_LEN)
