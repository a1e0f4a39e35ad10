"""The one retry-and-check policy: what a worker does when the store is unavailable.

``StoreUnavailable`` (a lost connection, a restarting server, a full disk, a
lock timeout) is the only error retried; everything else passes through at
once. Retries back off exponentially with jitter — so a fleet that lost its
server does not come back in lockstep — until a deadline, after which the
last ``StoreUnavailable`` is raised for the caller to give the run back.

Claims, heartbeats, releases, ``Job.save``, ``Run`` and ``AsyncRun`` under a
lease all go through :func:`call` (:func:`call_async`); saves through
:func:`save` (:func:`save_async`), which adds the check a
retried write needs: when the error came while the commit was on its way,
the write may have happened. Before saving again, it reads the stored
digest of that step and compares it with the digest the failed save
computed: equal, the save landed and is not written twice; different,
another writer stored that step (``Conflict``); absent, it is saved again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from safepoint.errors import Conflict, NotFound, StoreUnavailable
from safepoint.model import Checkpoint
from safepoint.observe import NO_OBSERVER, Observer
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import AsyncStore, Store

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


class _Window:
    """One retried operation's budget: how long to wait before the next try, or give up.

    The sync and async forms share it, so both back off, count and log alike.
    """

    def __init__(
        self, operation: str, observer: Observer, policy: RetryPolicy, deadline: float | None
    ) -> None:
        self.operation = operation
        self.observer = observer
        self.delays = policy.delays()
        self.give_up = time.monotonic() + policy.deadline
        if deadline is not None:
            self.give_up = min(self.give_up, deadline)

    def wait_after(self, exc: StoreUnavailable) -> float:
        """The delay before trying again; re-raises ``exc`` once the window is spent."""
        delay = next(self.delays)
        if time.monotonic() + delay > self.give_up:
            raise exc
        self.observer.add("safepoint.retries", 1, {"safepoint.operation": self.operation})
        # The error's text is the driver's summary: it names no stored value.
        log.warning("%s: %s; retrying in %.2fs", self.operation, exc, delay)
        return delay


def call(
    operation: str,
    fn: Callable[[], T],
    *,
    observer: Observer = NO_OBSERVER,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``fn()``, retrying ``StoreUnavailable`` under ``policy`` (counted as ``safepoint.retries``).

    ``deadline`` (a ``time.monotonic()`` instant) cuts the policy's window
    short, e.g. to a lease's expiry; a set ``stop`` event cuts the wait short too.
    """
    window = _Window(operation, observer, policy, deadline)
    while True:
        try:
            return fn()
        except StoreUnavailable as exc:
            delay = window.wait_after(exc)
            if stop is not None:
                stop.wait(delay)
            else:
                time.sleep(delay)


async def call_async(
    operation: str,
    fn: Callable[[], Awaitable[T]],
    *,
    observer: Observer = NO_OBSERVER,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
) -> T:
    """:func:`call` for coroutines: ``await fn()``, retried, sleeping without blocking the loop."""
    window = _Window(operation, observer, policy, deadline)
    while True:
        try:
            return await fn()
        except StoreUnavailable as exc:
            await asyncio.sleep(window.wait_after(exc))


def save(
    store: Store, checkpoint: Checkpoint, lease: Lease | None, *, policy: RetryPolicy = DEFAULT_POLICY
) -> CheckpointInfo:
    """``store.save(checkpoint, lease=lease)``, retried, checking an ambiguous commit first."""
    unsure: list[bytes | None] = []  # the digest of a save whose commit may have landed

    def attempt() -> CheckpointInfo:
        if unsure:
            landed = _landed(_history(store, checkpoint.run_id), checkpoint, unsure[-1])
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


async def save_async(
    store: AsyncStore, checkpoint: Checkpoint, lease: Lease | None, *, policy: RetryPolicy = DEFAULT_POLICY
) -> CheckpointInfo:
    """:func:`save` on an ``AsyncStore``: the same retries, the same check of an ambiguous commit."""
    unsure: list[bytes | None] = []

    async def attempt() -> CheckpointInfo:
        if unsure:
            try:
                history = await store.history(checkpoint.run_id)
            except NotFound:
                history = []
            landed = _landed(history, checkpoint, unsure[-1])
            if landed is not None:
                return landed
            unsure.clear()
        try:
            return await store.save(checkpoint, lease=lease)
        except StoreUnavailable as exc:
            if exc.committing:
                unsure.append(exc.digest)
            raise

    return await call_async("save", attempt, observer=store.observer, policy=policy)


def _history(store: Store, run_id: str) -> list[CheckpointInfo]:
    try:
        return store.history(run_id)
    except NotFound:
        return []  # step 0 of a new run that did not land


def _landed(
    history: list[CheckpointInfo], checkpoint: Checkpoint, digest: bytes | None
) -> CheckpointInfo | None:
    """The stored header of ``checkpoint``'s step if the interrupted save wrote it; None if the
    step is not stored; ``Conflict`` if another writer stored it."""
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
