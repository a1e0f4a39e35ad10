"""The one retry-and-check policy: what a worker does when the store is unavailable.

``StoreUnavailable`` (a lost connection, a restarting server, a full disk, a
lock timeout) is the only error retried; everything else passes through at
once. Retries back off exponentially with jitter — so a fleet that lost its
server does not come back in lockstep — until a deadline, after which the
last ``StoreUnavailable`` is raised for the caller to give the run back.

Claims, heartbeats, releases, ``Job.save`` and ``Run`` under a lease all go
through :func:`call`; saves through :func:`save`, which adds the check a
retried write needs: when the error came while the commit was on its way,
the write may have happened. Before saving again, it reads the stored
digest of that step and compares it with the digest the failed save
computed: equal, the save landed and is not written twice; different,
another writer stored that step (``Conflict``); absent, it is saved again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from safepoint.errors import Conflict, NotFound, StoreUnavailable
from safepoint.model import Checkpoint, CheckpointInfo, Lease
from safepoint.observe import Observer
from safepoint.store import Store

log = logging.getLogger("safepoint.retrying")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff between retries of ``StoreUnavailable``: ``initial`` seconds, doubling up to
    ``maximum``, each delay jittered to between half and all of it; given up after
    ``deadline`` seconds. The deadline must outlast the outages to ride out (a
    server restart takes seconds; a full disk as long as it takes to free space)."""

    deadline: float = 60.0
    initial: float = 0.05
    maximum: float = 2.0

    def delays(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay / 2 + random.uniform(0, delay / 2)  # jitter, not cryptography
            delay = min(delay * 2, self.maximum)


DEFAULT_POLICY = RetryPolicy()


def call(
    operation: str,
    fn: Callable[[], T],
    *,
    observer: Observer,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``fn()``, retrying ``StoreUnavailable`` under ``policy`` (counted as ``safepoint.retries``).

    ``deadline`` (a ``time.monotonic()`` instant) cuts the policy's window
    short, e.g. to a lease's expiry; a set ``stop`` event cuts the wait short too.
    """
    give_up = time.monotonic() + policy.deadline
    if deadline is not None:
        give_up = min(give_up, deadline)
    for delay in policy.delays():
        try:
            return fn()
        except StoreUnavailable as exc:
            if time.monotonic() + delay > give_up:
                raise
            observer.add("safepoint.retries", 1, {"operation": operation})
            # The error's text is the driver's summary: it names no stored value.
            log.warning("%s: %s; retrying in %.2fs", operation, exc, delay)
            if stop is not None:
                stop.wait(delay)
            else:
                time.sleep(delay)
    raise AssertionError("unreachable: delays() never ends")


def save(
    store: Store, checkpoint: Checkpoint, lease: Lease | None, *, policy: RetryPolicy = DEFAULT_POLICY
) -> CheckpointInfo:
    """``store.save(checkpoint, lease=lease)``, retried, checking an ambiguous commit first."""
    unsure: list[bytes | None] = []  # the digest of a save whose commit may have landed

    def attempt() -> CheckpointInfo:
        if unsure:
            landed = _landed(store, checkpoint, unsure[-1])
            if landed is not None:
                return landed
            unsure.clear()  # it did not land: save it again
        try:
            return store.save(checkpoint, lease=lease)
        except StoreUnavailable as exc:
            if exc.committing:
                unsure.append(exc.digest)
            raise

    return call("save", attempt, observer=store.observer, policy=policy)


def _landed(store: Store, checkpoint: Checkpoint, digest: bytes | None) -> CheckpointInfo | None:
    """The stored header of ``checkpoint``'s step if the interrupted save wrote it; None if the
    step is not stored; ``Conflict`` if another writer stored it."""
    try:
        history = store.history(checkpoint.run_id)
    except NotFound:
        return None  # step 0 of a new run that did not land
    for info in reversed(history):
        if info.step == checkpoint.step:
            if digest is not None and info.digest == digest.hex():
                return info
            # Without the digest (the driver did not know it) nothing proves the
            # stored step is this one: refuse rather than guess.
            raise Conflict(
                checkpoint.run_id,
                checkpoint.step,
                history[-1].step,
                detail="the step was stored while this save's commit was in doubt, by another save",
            )
        if info.step < checkpoint.step:
            break
    return None
