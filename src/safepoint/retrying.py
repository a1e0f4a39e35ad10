"""The one retry-and-check policy: what a worker, or a reader, does when the store is unavailable.

``StoreUnavailable`` (a lost connection, a restarting server, a full disk, a
lock timeout) is the only error retried; everything else passes through at
once. Retries back off exponentially with jitter — so a fleet that lost its
server does not come back in lockstep — until a deadline, after which the
last ``StoreUnavailable`` is raised for the caller to give the run back.

Both are written once, as flows (``safepoint.twins``): :func:`retried`
tries again with a ``Sleep`` between tries, and :func:`saving` saves, adding
the check a retried write needs. A worker's claims, heartbeats, releases and
``Job.save`` run them blocking (:func:`call`, :func:`save`); ``Run`` and
``AsyncRun`` under a lease run them inside their own flows, blocking or
awaiting (``harness/leased.py``); a read-only store's readers through
:func:`reading`. The check: when the error came while the
commit was on its way, the write may have happened. Before saving again, it reads the stored
digest of that step and compares it with the digest the failed save
computed: equal, the save landed and is not written twice; different,
another writer stored that step (``Conflict``); absent, it is saved again.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from safepoint.errors import Conflict, NotFound, StoreUnavailable
from safepoint.model import Checkpoint
from safepoint.observe import NO_OBSERVER, Observer
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import AsyncStore, Store
from safepoint.twins import Flow, Invoke, Sleep, ask, blocking

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
    """One retried operation's budget: how long to wait before the next try, or give up."""

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


def retried(
    operation: str,
    attempt: Callable[[], Flow[T]],
    *,
    observer: Observer = NO_OBSERVER,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
    stop: threading.Event | None = None,
) -> Flow[T]:
    """The flow ``attempt()`` makes, made again while it raises ``StoreUnavailable``, under
    ``policy`` (counted as ``safepoint.retries``), with a ``Sleep`` between tries.

    ``deadline`` (a ``time.monotonic()`` instant) cuts the policy's window
    short, e.g. to a lease's expiry; a set ``stop`` event cuts a blocking wait short too.
    """
    window = _Window(operation, observer, policy, deadline)
    while True:
        try:
            return (yield from attempt())
        except StoreUnavailable as exc:
            yield Sleep(window.wait_after(exc), stop)


def saving(
    store: Store | AsyncStore,
    checkpoint: Checkpoint,
    lease: Lease | None,
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> Flow[CheckpointInfo]:
    """A flow saving ``checkpoint`` on ``store`` (under ``lease``), retried, checking an ambiguous
    commit first. ``store`` is either kind: its calls are ``Invoke`` requests."""
    unsure: list[bytes | None] = []  # the digest of a save whose commit may have landed

    def attempt() -> Flow[CheckpointInfo]:
        if unsure:
            try:
                history: list[CheckpointInfo] = yield Invoke(store.history, (checkpoint.run_id,))
            except NotFound:
                history = []  # step 0 of a new run that did not land
            landed = _landed(history, checkpoint, unsure[-1])
            # How each doubt was settled is worth a line (a failover or a restart shows up
            # as these); the wording is stable, for whoever counts them.
            if landed is not None:
                log.info("save: an interrupted save had landed; not saved again")
                return landed
            log.info("save: an interrupted save did not land; saving it again")
            unsure.clear()
        try:
            info: CheckpointInfo = yield Invoke(store.save, (checkpoint,), {"lease": lease})
        except StoreUnavailable as exc:
            if exc.committing:
                unsure.append(exc.digest)
            raise
        return info

    return (yield from retried("save", attempt, observer=store.observer, policy=policy))


def call(
    operation: str,
    fn: Callable[[], T],
    *,
    observer: Observer = NO_OBSERVER,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``fn()``, retried as :func:`retried` says, blocking."""
    attempt: Callable[[], Flow[T]] = partial(ask, Invoke(fn))
    return blocking(
        retried(operation, attempt, observer=observer, policy=policy, deadline=deadline, stop=stop)
    )


def reading(store: Store, *, policy: RetryPolicy = DEFAULT_POLICY) -> Store:
    """``store``, opened with ``read_only=True``, with each of its calls retried as :func:`call`
    says: the readers' door to the policy (the CLI's read commands and ``safepoint ui`` read
    through it).

    A reader meets ``StoreUnavailable`` where a writer would (a lost connection, a restart) and
    once more on a PostgreSQL hot standby: a query the standby cancels because the primary's
    cleanup, replayed, removes rows the query might still see (SQLSTATE 40001, after
    ``max_standby_streaming_delay``). A read changes nothing, so it is simply asked again, in a
    new transaction with a newer snapshot. Each call is retried alone: a long walk over the
    store (``safepoint verify``) loses one call's work to a conflict, not the walk's.

    Only for a read-only store: a write retried this way would skip the check an interrupted
    save needs (:func:`save` makes it). The view closes the store on leaving a ``with``.
    """
    return cast(Store, _Reading(store, policy))


class _Reading:
    """The view :func:`reading` makes: attributes as the store's, its methods retried."""

    def __init__(self, store: Store, policy: RetryPolicy) -> None:
        self._store = store
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name.startswith("_") or not callable(value):
            return value
        store, policy = self._store, self._policy

        @functools.wraps(value)
        def retried_call(*args: Any, **kwargs: Any) -> Any:
            return call(name, partial(value, *args, **kwargs), observer=store.observer, policy=policy)

        return retried_call

    def __enter__(self) -> _Reading:
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.close()

    def __repr__(self) -> str:
        return repr(self._store)


def save(
    store: Store, checkpoint: Checkpoint, lease: Lease | None, *, policy: RetryPolicy = DEFAULT_POLICY
) -> CheckpointInfo:
    """``store.save(checkpoint, lease=lease)``, retried, an ambiguous commit checked first
    (:func:`saving`)."""
    return blocking(saving(store, checkpoint, lease, policy=policy))


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
