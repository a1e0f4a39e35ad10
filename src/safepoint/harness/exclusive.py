"""One live writer per run: how an exclusive ``Run`` takes its run's lease, as a flow.

Every ``Run``/``AsyncRun`` entry that can take an action (``start``,
``resume``, ``open``, ``resume_with``; ``set_budget`` too) holds the run's
lease (``Store.hold_run``) before it loads anything, and keeps it until
``close``, the end of its ``with`` block, a commit that leaves the run not
running, or its garbage collection (``holders.py``). Under a worker's lease
(``lease=job.lease``) none of this runs: the worker's lease is the one.

When another owner holds the run, ``judge`` decides, from its owner id
(``safepoint.owner``):

- a holder on this host whose process is gone (SIGKILLed, crashed): taken
  over at once, no waiting for its lease to expire;
- a ``Run`` of this process that no longer exists (collected, or closed
  without reaching the store): taken over at once;
- a ``Run`` of this process that still exists and was last used by this
  same thread (and, for ``AsyncRun``, this same task or one that has
  ended), and is not in the middle of a call: taken over at once. One thread
  runs one thing at a time, so opening the run again there means the old
  object was left behind (``run = Run.open(...)`` twice, the first never
  closed); the old object is fenced off: its next save raises ``LeaseLost``.
  From inside that ``Run``'s own call (a tool that opens its own run),
  waiting could never end: ``RunHeld`` at once;
- a ``Run`` of this process used by another thread or task: the garbage
  collector runs once (an object only a reference cycle keeps is then
  collected and lets go), and if it still exists, it is waited for;
- anything else (a live process, another host, a worker): waited for, up to
  ``wait`` seconds, polling; then ``RunHeld`` with the holder's expiry.

The flow asks for the lease and for pauses as ``Invoke`` requests of the
holder's own functions (``Store.hold_run`` and ``time.sleep``, or their
awaited twins), so ``Run`` and ``AsyncRun`` drive the same code.
"""

from __future__ import annotations

import asyncio
import gc
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from functools import partial
from typing import Any, Protocol

from safepoint import owner as owners
from safepoint.errors import InvalidArgument, RunHeld
from safepoint.flow import Flow, Invoke
from safepoint.owner import Owner
from safepoint.records import Lease

DEFAULT_HOLD = 30.0  # seconds: a Run's lease period, as a worker's default lease
FIRST_POLL = 0.01  # seconds before the first look again at a held run; doubling up to:
MAX_POLL = 0.1
MAX_SECONDS = 365 * 86_400.0


def seconds(value: Any, name: str, *, zero: bool) -> float:
    """``value`` (seconds or a ``timedelta``) as seconds: finite, above 0 (or from 0 with ``zero``)."""
    given = value.total_seconds() if isinstance(value, timedelta) else value
    if type(given) not in (int, float) or not math.isfinite(given) or not (0 <= given <= MAX_SECONDS):
        given = -1.0
    if given < 0 or (given == 0 and not zero):
        kind = "non-negative" if zero else "positive"
        raise InvalidArgument(f"{name} must be a {kind} number of seconds or a timedelta, at most 365 days")
    return float(given)


@dataclass(frozen=True, slots=True)
class Terms:
    """How a ``Run`` holds its run: the lease period (renewed every third of it) and how long
    an opener waits for another holder (default: one lease period)."""

    hold: float
    wait: float

    @classmethod
    def of(cls, hold: float | timedelta, wait: float | timedelta | None) -> Terms:
        period = seconds(hold, "hold", zero=False)
        return cls(period, period if wait is None else seconds(wait, "wait", zero=True))


class Holding(Protocol):
    """What judging and taking a hold reads of a ``Run``'s hold (``holders.Holding``)."""

    owner: Owner
    terms: Terms
    lease: Lease | None
    busy: int  # calls of the Run in progress
    thread: int  # the thread (and task) that used the Run last
    task: weakref.ref[asyncio.Task[Any]] | None

    def alive(self) -> bool: ...

    def superseded(self) -> None: ...

    def flows(self) -> tuple[Any, Any]: ...

    def held(self, lease: Lease) -> None: ...


# -- this process's holders ------------------------------------------------------------

_holders: dict[str, Holding] = {}  # owner id -> the holding of a Run of this process
_lock = threading.Lock()


def register(holding: Holding) -> None:
    with _lock:
        _holders[holding.owner.id] = holding


def unregister(holding: Holding) -> None:
    with _lock:
        if _holders.get(holding.owner.id) is holding:
            del _holders[holding.owner.id]


def registered() -> list[Holding]:
    with _lock:
        return list(_holders.values())


def current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        return None


class Verdict(Enum):
    TAKE = "take over at once"
    COLLECT = "collect garbage, then judge again"
    WAIT = "wait for it"
    REFUSE = "refuse at once"


def judge(holder: str | None, collected: bool) -> Verdict:
    """What to do about the run's holder ``holder`` (see the module's docstring)."""
    parsed = owners.parse(holder)
    if parsed is None:
        return Verdict.WAIT
    if not owners.mine(parsed):
        return Verdict.TAKE if owners.gone(parsed) else Verdict.WAIT
    with _lock:
        holding = _holders.get(parsed.id)
    if holding is None or not holding.alive():
        return Verdict.TAKE
    if holding.thread == threading.get_ident():
        if holding.busy:
            return Verdict.REFUSE
        task = None if holding.task is None else holding.task()
        if task is None or task.done() or task is current_task():
            holding.superseded()
            return Verdict.TAKE
    return Verdict.WAIT if collected else Verdict.COLLECT


def acquire(
    run_id: str,
    holding: Holding,
    take: Callable[..., Any],
    pause: Callable[[float], Any],
) -> Flow[Lease]:
    """Take the lease on ``run_id`` for ``holding`` (``take`` is ``Store.hold_run`` or its
    awaited twin, ``pause`` a sleep), judging and waiting as the module's docstring says."""
    terms = holding.terms
    deadline = time.monotonic() + terms.wait
    delay, take_from, collected = FIRST_POLL, None, False
    while True:
        fn = partial(take, lease=terms.hold, take_from=take_from)
        try:
            lease: Lease = yield Invoke(fn, (run_id, holding.owner.id))
            return lease
        except RunHeld as held:
            verdict = judge(held.owner, collected)
            if verdict is Verdict.REFUSE:
                raise
            if verdict is Verdict.TAKE and held.owner != take_from:
                take_from = held.owner
                continue
            if verdict is Verdict.COLLECT:
                gc.collect()  # a Run only a reference cycle keeps is collected, and lets go
                collected = True
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            take_from = None
            yield Invoke(pause, (min(delay, left),))
            delay = min(delay * 2, MAX_POLL)


def hold(holding: Holding | None, run_id: str) -> Flow[None]:
    """Hold ``run_id`` for ``holding`` before the flow reads it (nothing under a worker's lease,
    none when ``holding`` is None, or when it holds already)."""
    if holding is None or holding.lease is not None:
        return
    take, pause = holding.flows()
    lease = yield from acquire(run_id, holding, take, pause)
    holding.held(lease)
