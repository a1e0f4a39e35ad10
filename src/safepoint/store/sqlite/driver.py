"""The SQLite driver: one connection, explicit transactions, DDL revisions.

Durability settings (DESIGN invariant 1): WAL with ``synchronous=FULL``, so a
commit has reached the disk when ``save`` returns. Writes take the write lock
up front with ``BEGIN IMMEDIATE``; ``busy_timeout`` makes a second process
wait for it instead of failing. Several processes may share one file.

``memory://`` is served by this driver too, on a private in-memory database:
same SQL, same behaviour, nothing on disk (for tests).

``read_only=True`` opens an existing file to look at it (DESIGN invariant
10): no folder made, no DDL, writes refused before they start; a folder
without write access makes it an immutable snapshot (``SnapshotWarning``).

The driver is cut at its seams: ``connect`` (the pragmas, read-only and
immutable opens, the checks of an existing file), ``transactions`` (one
operation in one transaction, its named queries reported to a query hook,
and group commit) and ``ddl`` (the schema and its revisions). Here: the
driver, and its one connection per process (``OwnConnection``).

The connection across ``os.fork`` (see store/forking.py for the whole story):
a forked child must never use, nor close, the connection it inherited:
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
from pathlib import Path
from typing import Any, TypeVar

from safepoint.errors import StoreClosed, StoreReadOnly
from safepoint.observe import QueryHook
from safepoint.store import forking
from safepoint.store.query import Op

from .connect import Settings, check_file, check_store, connect
from .ddl import upgrade
from .errors import translate
from .transactions import CAPABILITIES, Member, Queue, commit_batch, transact

T = TypeVar("T")
READ_ONLY_WRITE = "this store was opened with read_only=True: it writes nothing"


class OwnConnection:
    """The connection this process may use, and the lock every use holds (``lock``)."""

    def __init__(self, settings: Settings, *, on_fork: Callable[[], None] | None = None) -> None:
        self.settings = settings
        # What else the driver resets in a forked child (its queue of joined saves).
        self._on_fork = on_fork
        # snapshot: a read-only open had to take the file as immutable (see connect.py).
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


class SQLiteDriver:
    """Runs store operations on one SQLite connection, one at a time."""

    dialect = "sqlite"
    capabilities = CAPABILITIES  # none: see transactions.CAPABILITIES

    def __init__(
        self,
        path: str | None,
        *,
        busy_timeout: float = 30.0,
        trace: Callable[[str], None] | None = None,
        wal_autocheckpoint: int = 256,
        read_only: bool = False,
        group_commit: bool = True,
    ) -> None:
        self.path = path
        self.read_only = read_only
        # Saves of concurrent runs share a transaction (transactions.py); off: each commits alone.
        self.group_commit = group_commit
        self._joining = Queue()
        # The observer's query hook (``safepoint.observe.QueryObserver``); open_store sets it.
        self.on_query: QueryHook | None = None
        if path is not None and read_only:
            check_file(path)
        if path is not None and not read_only:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._own = OwnConnection(
            Settings(path, busy_timeout, wal_autocheckpoint, trace, read_only), on_fork=self._joining.reset
        )
        if read_only:
            self._check_existing()
        else:
            self.setup()

    @property
    def snapshot(self) -> bool:
        """True when a read-only open had to take the file as immutable (see ``connect``)."""
        return self._own.snapshot

    def _check_existing(self) -> None:
        assert self.path is not None
        with self._own.lock:
            try:
                check_store(self._own.get(), self.path, snapshot=self.snapshot)
            except BaseException:
                self.close()
                raise

    def run(self, op: Op[T], *, write: bool) -> T:
        """Drive ``op`` inside one transaction; commit on return, roll back on error."""
        if write and self.read_only:
            raise StoreReadOnly(READ_ONLY_WRITE)
        with self._own.lock:
            return transact(self._own.get(), op, write=write, path=self.path, on_query=self.on_query)

    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """Drive the save ``op``, in a transaction it may share with other threads' saves (transactions.py).

        ``rebuild`` makes the operation again, should the shared transaction
        fail as a whole; ``weight`` (its new bytes) bounds a batch.
        """
        if self.read_only:
            raise StoreReadOnly(READ_ONLY_WRITE)
        if not self.group_commit:
            return self.run(op, write=True)
        lock = self._own.lock
        # The usual save: the connection free and no save queued. It runs at once,
        # alone, as commit_batch runs a batch of one, without a queue entry.
        if lock.acquire(blocking=False):
            try:
                if self._joining.empty():
                    return transact(self._own.get(), op, write=True, path=self.path, on_query=self.on_query)
            finally:
                lock.release()
        member = Member(op, rebuild, weight)
        self.commit_joined([member])
        return member.outcome()  # type: ignore[no-any-return]

    def commit_joined(self, members: list[Member]) -> None:
        """Queue ``members`` and commit until each is settled; never raises.

        The thread that gets the connection commits every save queued so far,
        its own and other threads' (the async driver hands a whole batch).
        """
        for member in members:
            self._joining.put(member)
        with self._own.lock:
            while not all(member.done for member in members):
                self._commit_next()

    def _commit_next(self) -> None:
        batch = self._joining.take()
        try:
            conn = self._own.get()
        except BaseException as exc:  # closed, or unusable after a fork: every save of the batch says so
            for member in batch:
                member.settle(error=exc)
            return
        commit_batch(conn, batch, path=self.path, on_query=self.on_query)

    def setup(self) -> list[int]:
        """Bring safepoint's tables up to date; returns the revisions applied now (see ``ddl.upgrade``)."""
        if self.read_only:
            raise StoreReadOnly(READ_ONLY_WRITE)
        with self._own.lock:
            try:
                return upgrade(self._own.get())
            except sqlite3.Error as exc:  # busy past the timeout, a full disk …: a typed error
                raise translate(exc, "bringing safepoint's tables up to date", self.path) from exc

    def execute_raw(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement outside the named queries (tests and benchmarks only)."""
        with self._own.lock:
            return self._own.get().execute(sql, params).fetchall()

    def close(self) -> None:
        self._own.close()
