"""One live writer per turn: the session run's lease, taken, renewed and given back — and how the
journal's flows reach the store.

A turn holds its session's run (``Store.hold_run``) from before it reads
which turn it is until its end marker is written, so a second process
resuming the same session waits (bounded) instead of running the turn's
calls beside it. The session's own saves and every journal entry go under
that lease: a writer that lost it writes nothing. A holder whose process is
gone (SIGKILLed on this host) is taken over at once; any other is waited
for, up to ``wait`` seconds, then ``RunHeld``.

The turn's flows are written once (``safepoint.flow``'s journal requests,
``Invoke`` of the SDK's async calls) and served here: ``serve`` awaits them on
the SDK's event loop — a sync ``Store``'s calls in a worker thread, so the
loop never waits on a commit — and ``drive`` blocks on a sync ``Store`` (the
turn's opening and closing around ``run_sync``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from safepoint import AsyncStore, InvalidArgument, RunHeld, Store
from safepoint import owner as owners
from safepoint.flow import bound
from safepoint.records import Lease
from safepoint.twins import Flow, Invoke, Offload, Sleep, awaiting, blocking, translate

T = TypeVar("T")
FIRST_POLL = 0.01  # seconds before looking at a held run again; doubling up to:
MAX_POLL = 0.2


async def serve(store: Store | AsyncStore, flow: Flow[T]) -> T:
    """Run ``flow`` on the running loop: its store requests calls of ``store`` (a sync store's in
    a worker thread), its ``Invoke`` of user code awaited when it gives an awaitable."""
    lowered = bound(store, flow)
    if isinstance(store, Store):
        lowered = translate(lowered, partial(_offloaded, store))
    return await awaiting(lowered)


def drive(store: Store | AsyncStore, flow: Flow[T]) -> T:
    """Run ``flow`` blocking on a sync ``store`` (an ``AsyncStore`` needs ``serve``)."""
    if not isinstance(store, Store):
        flow.close()
        raise InvalidArgument("run_sync needs a session on a sync Store; with an AsyncStore, await run()")
    return blocking(bound(store, flow))


def _offloaded(store: Store, request: Any) -> Any:
    if type(request) is Invoke and getattr(request.fn, "__self__", None) is store:
        return Offload(partial(request.fn, **(request.kwargs or {})), request.args)
    return request


@dataclass(frozen=True, slots=True)
class Terms:
    """How a turn holds its session: the lease period (renewed every third of it) and how long
    a second writer waits for the holder to finish before ``RunHeld``."""

    hold: float = 30.0
    wait: float = 30.0


def acquire(store: Store | AsyncStore, run_id: str, owner: str, terms: Terms) -> Flow[Lease]:
    """The run's lease for ``owner``: at once when free or when its holder's process is gone,
    else after its holder lets go — polling, up to ``terms.wait`` seconds."""
    deadline = time.monotonic() + terms.wait
    delay, take_from = FIRST_POLL, None
    while True:
        try:
            lease: Lease = yield Invoke(
                store.hold_run, (run_id, owner), {"lease": terms.hold, "take_from": take_from}
            )
            return lease
        except RunHeld as held:
            holder = owners.parse(held.owner)
            gone = holder is not None and not owners.mine(holder) and owners.gone(holder)
            if gone and take_from != held.owner:
                take_from = held.owner  # SIGKILLed or crashed: its turn is ours to resume
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            take_from = None
            yield Sleep(min(delay, left))
            delay = min(delay * 2, MAX_POLL)


def beating(store: Store | AsyncStore, holder: Any, terms: Terms, wake: threading.Event | None) -> Flow[None]:
    """Renew ``holder.lease`` every third of its period until woken (a thread) or cancelled (a
    task). A renewal that fails leaves the lease to run out: the next write finds out."""
    while not (yield Sleep(terms.hold / 3, wake)):
        lease = holder.lease
        if lease is None:
            return
        try:
            holder.lease = yield Invoke(store.heartbeat, (lease,))
        except Exception:  # lost, unavailable, closed: the turn's next write says which
            return


class Beat:
    """The heartbeat of one turn's lease: a task on the SDK's loop, or a thread for ``run_sync``."""

    def __init__(self, store: Store | AsyncStore, holder: Any, terms: Terms, *, thread: bool) -> None:
        self._wake = threading.Event() if thread else None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        flow = beating(store, holder, terms, self._wake)
        if thread:
            self._thread = threading.Thread(target=drive, args=(store, flow), daemon=True)
            self._thread.start()
        else:
            self._task = asyncio.get_running_loop().create_task(serve(store, flow))

    def stop(self) -> None:
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            self._task.cancel()


def release(store: Store | AsyncStore, lease: Lease | None) -> Flow[None]:
    """Give the turn's lease back; a lease already lost or a closed store leaves nothing to do."""
    if lease is None:
        return
    with contextlib.suppress(Exception):  # lost or unreachable: the lease runs out by itself
        yield Invoke(store.release_hold, (lease,))


def new_owner() -> str:
    """An owner id for one turn: this process (so a SIGKILLed holder is known gone) and a serial."""
    return owners.new_owner().id
