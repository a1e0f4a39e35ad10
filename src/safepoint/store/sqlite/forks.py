"""The SQLite driver's one connection across ``os.fork`` (see store/forking.py for the whole story).

A forked child must never use, nor close, the connection it inherited:
SQLite forbids using a connection across fork, and closing it would release
the parent's locks and may checkpoint or delete the WAL under the parent.
``OwnConnection`` notices the new process, keeps the inherited connection
referenced for good (``forking.inherit``) and opens the child its own, unless
the child's copy of libsqlite3 cannot be trusted (a transaction was in flight
at the fork) or the database lived only in the parent (``memory://``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable

from safepoint.errors import StoreClosed
from safepoint.store import forking

from .opening import Settings, connect


class OwnConnection:
    """The connection this process may use, and the lock every use holds (``lock``)."""

    def __init__(self, settings: Settings, *, on_fork: Callable[[], None] | None = None) -> None:
        self.settings = settings
        # What else the driver resets in a forked child (its queue of joined saves).
        self._on_fork = on_fork
        # snapshot: a read-only open had to take the file as immutable (see opening.py).
        self._conn: sqlite3.Connection | None
        self._conn, self.snapshot = connect(settings)
        # Reentrant, so that the fork hook of a thread forking from inside an
        # operation (a blob store's or trace callback) does not wait on itself.
        self.lock = threading.RLock()
        self._closed = False
        # The process that owns _conn, and why a forked child cannot reconnect (None: it can).
        self._pid = os.getpid()
        self._fork_problem: str | None = None
        self._held_for_fork = False
        forking.register(self)

    def get(self) -> sqlite3.Connection:
        """This process's connection (opened now in a forked child); call it holding ``lock``."""
        if self._pid != os.getpid():  # forked without Python's fork hooks
            self._discard_inherited(quiesced=False)
        if self._conn is None:
            if self._closed:
                raise StoreClosed("the store is closed")
            if self._fork_problem is not None:
                raise StoreClosed(self._fork_problem)
            # A forked child: a connection of its own, the parent's discarded.
            self._conn, self.snapshot = connect(self.settings, snapshot=self.snapshot)
        return self._conn

    def close(self) -> None:
        with self.lock:
            self._closed = True
            if self._pid != os.getpid():
                self._discard_inherited(quiesced=False)  # the parent's: never closed here
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- the hooks forking.register installs -------------------------------------

    def before_fork(self) -> None:
        """Wait for the operation in flight, so that the child inherits an idle libsqlite3.

        A thread inside a transaction at the instant of the fork leaves the
        child's copy of libsqlite3 believing this process holds file and WAL
        locks (and maybe a mutex) that no child thread will ever release; a
        new connection in the child would share that state. Bounded by the
        busy timeout (the longest a transaction waits for the file lock),
        so a fork never waits forever; the child of a fork that did not get
        the lock refuses to use the store.
        """
        self._held_for_fork = self.lock.acquire(timeout=self.settings.busy_timeout + 1)

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self.lock.release()

    def after_fork_in_child(self) -> None:
        quiesced = self._held_for_fork and not (self._conn is not None and self._conn.in_transaction)
        self._held_for_fork = False
        self.lock = threading.RLock()  # the parent's may be held by a thread the child lacks
        if self._on_fork is not None:
            self._on_fork()
        self._discard_inherited(quiesced=quiesced)

    def _discard_inherited(self, *, quiesced: bool) -> None:
        """Drop the parent's connection without closing it; the next operation opens one (if it can)."""
        self._pid = os.getpid()
        if self._conn is None:
            return  # closed, or already discarded
        forking.inherit(self._conn)
        self._conn = None
        if self.settings.path is None:
            self._fork_problem = (
                "a memory:// store lives in the process that opened it and cannot be used"
                " after os.fork(); open a store in the child"
            )
        elif not quiesced:
            self._fork_problem = (
                "the process forked while this SQLite store was inside a transaction;"
                " its state cannot be trusted in the child: open the store after forking"
            )
