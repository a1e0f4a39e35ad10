"""An exclusive ``Run``'s hold on its run: the lease once taken, its heartbeat, its release.

``Holding`` serves ``Run`` (a daemon thread renews the lease every third of
its period), ``AsyncHolding`` serves ``AsyncRun`` (an asyncio task does).
The heartbeat and the release are written once, as flows of ``Hold``
(``safepoint.twins``): the thread runs the heartbeat blocking, the task
awaiting; ``release`` is a blocking method of the one, a coroutine method of
the other.
The hold ends at ``close``, at a commit that leaves the run not running,
and when the ``Run`` is garbage-collected (``weakref.finalize``).

A ``Run`` whose last reference is dropped is finalized right there, in the
code that dropped it — never inside a store call, which holds no ``Run`` —
so it lets go at once, synchronously: code that never closes its ``Run``
and goes on to claim or open the run finds it free. The cyclic collector,
though, may strike anywhere, in the middle of a store call of the same
thread too; a ``Run`` it collects (one a reference cycle kept) hands its
release to its heartbeat thread instead (``_collecting`` tells the two
apart). An ``AsyncRun`` cannot await in a finalizer: its release is a task
on its loop, shortly after. At interpreter exit the holds still open are
released in turn (``atexit``). A forked child inherits none: each hold
belongs to the process that took it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import os
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

from safepoint import owner as owners
from safepoint.errors import LeaseLost, SafepointError, StoreUnavailable
from safepoint.records import Lease
from safepoint.store import AsyncStore, Store
from safepoint.twins import Awaiting, Blocking, Flow, Invoke, Sleep, awaiting, blocking, entry

from . import exclusive
from .exclusive import Terms

_releasing: set[asyncio.Task[None]] = set()  # AsyncRun releases a finalizer started: kept till done
_collecting = threading.local()  # .now: this thread is inside a cyclic garbage collection


def _on_gc(phase: str, info: dict[str, int]) -> None:
    _collecting.now = phase == "start"


gc.callbacks.append(_on_gc)


class Hold:
    """A ``Run``'s hold, either flavour: its owner id, its lease once taken, what its ``Run`` is
    doing now — and, written once as flows, its heartbeat and its release."""

    _pause: Callable[[float], Any]  # how ``exclusive.acquire`` waits between looks: the flavour's sleep

    def __init__(self, store: Store | AsyncStore, terms: Terms) -> None:
        self.store = store
        self.terms = terms
        self.owner = owners.new_owner()
        self.lease: Lease | None = None
        self.busy = 0  # calls of the Run in progress (a flow being driven)
        self.thread = threading.get_ident()  # the thread (and task) that used the Run last
        task = exclusive.current_task()
        self.task: weakref.ref[asyncio.Task[Any]] | None = None if task is None else weakref.ref(task)
        self.pid = os.getpid()
        self.lost = False  # another owner took the run: this hold fences nothing any more
        self.ended = False
        self._run: weakref.ref[object] | None = None
        self._wake = threading.Event()
        self._hand_over = False  # the heartbeat thread is to release (the Run was collected)

    # -- the Run's side ----------------------------------------------------------------

    def attach(self, run: object) -> None:
        """Let go when ``run`` is garbage-collected. Known to this process's openers from now on,
        before the hold is taken: one that finds it holding the run judges it, never a stranger."""
        self._run = weakref.ref(run)
        exclusive.register(self)
        weakref.finalize(run, self._collected).atexit = False  # exit has its own hook below

    def alive(self) -> bool:
        """Whether the ``Run`` still exists and holds (for a same-process opener's judgement)."""
        return not (self.ended or self.lost) and self._run is not None and self._run() is not None

    def enter(self) -> None:
        self.busy += 1
        self.thread = threading.get_ident()
        task = exclusive.current_task()
        self.task = None if task is None else weakref.ref(task)

    def leave(self) -> None:
        self.busy -= 1

    def superseded(self) -> None:
        """A newer ``Run`` of this thread takes the run over: stop renewing."""
        self.lost = True
        self._stop()

    def flows(self) -> tuple[Any, Any]:
        """``(take, pause)`` for ``exclusive.acquire``."""
        return self.store.hold_run, self._pause

    def held(self, lease: Lease) -> None:
        self.lease = lease
        self._start()

    # -- written once: the heartbeat and the release ----------------------------------------

    def beating(self) -> Flow[None]:
        """Renew the lease every third of its period until the hold ends or is lost. A thread
        wakes from its wait when the hold ends; a task is cancelled, and lets go on its way out."""
        try:
            while not (yield Sleep(self.terms.hold / 3, self._wake)):
                lease = self.lease
                if lease is None or self.ended:
                    return
                try:
                    self.lease = yield Invoke(self.store.heartbeat, (lease,))
                except StoreUnavailable:
                    continue  # the next beat tries again; a save finds out if the lease is gone
                except LeaseLost:
                    self.lost = True
                    self._stop()
                    return
                except Exception:  # the store was closed, or worse: the lease runs out by itself
                    return
        except asyncio.CancelledError:
            if not self.ended:  # the loop is shutting down (asyncio.run's end): let go if we can
                yield from self.releasing()
            raise
        if self._hand_over:
            yield from self.releasing()

    def releasing(self) -> Flow[None]:
        """The release (``release``), as a flow."""
        if self.ended or os.getpid() != self.pid:
            return
        self.ended = True
        self._stop()
        lease = self.lease
        if lease is not None and not self.lost:
            with contextlib.suppress(SafepointError):  # lost, closed, unavailable: it expires
                yield Invoke(self.store.release_hold, (lease,))

    @entry
    def release(self) -> Flow[None]:
        """Give the run back (once; quietly: a lost lease or a closed store leaves nothing to do)."""
        return self.releasing()

    # -- the flavour's own: how the heartbeat runs, stops, and a collected Run lets go ---------

    def _start(self) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _collected(self) -> None:
        raise NotImplementedError


class Holding(Hold, Blocking):
    """A ``Run``'s hold: a daemon thread renews the lease, releases block."""

    _pause = staticmethod(time.sleep)

    def _start(self) -> None:
        beat = partial(blocking, self.beating())
        threading.Thread(target=beat, name="safepoint-run-heartbeat", daemon=True).start()

    def _stop(self) -> None:
        exclusive.unregister(self)
        self._wake.set()

    def _collected(self) -> None:
        if self.lease is None or self.ended:  # never held (or already let go): only forget it
            exclusive.unregister(self)
        elif getattr(_collecting, "now", False):  # maybe inside a store call: not here
            self._hand_over = True
            self._wake.set()
        else:
            self.release()


class AsyncHolding(Hold, Awaiting):
    """An ``AsyncRun``'s hold: an asyncio task renews the lease, releases are awaited."""

    _pause = staticmethod(asyncio.sleep)

    def __init__(self, store: AsyncStore, terms: Terms) -> None:
        super().__init__(store, terms)
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(awaiting(self.beating()), name="safepoint-run-heartbeat")

    def _stop(self) -> None:
        exclusive.unregister(self)
        task, loop = self._task, self._loop
        # Not the beat task itself (releasing as the loop shuts it down): its release would be cancelled.
        if task is not None and loop is not None and not task.done() and task is not exclusive.current_task():
            with contextlib.suppress(RuntimeError):  # the loop is closed: so is the task
                loop.call_soon_threadsafe(task.cancel)

    def _collected(self) -> None:
        loop = self._loop
        if loop is None or self.ended:  # never held (or already let go): only forget it
            exclusive.unregister(self)
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: the lease expires instead
            loop.call_soon_threadsafe(self._release_later)

    def _release_later(self) -> None:
        task = asyncio.get_running_loop().create_task(self.release())
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)


@atexit.register
def _release_at_exit() -> None:
    """The holds still open when the interpreter exits (``Run`` objects never closed) let go."""
    for holding in exclusive.registered():
        if type(holding) is Holding:
            holding.release()
