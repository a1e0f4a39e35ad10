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

The driver is cut at its seams: ``opening`` (the pragmas, read-only and
immutable opens, the checks of an existing file), ``transactions`` (one
operation in one transaction, its named queries reported to a query hook),
``forks`` (the connection across ``os.fork``) and ``ddl`` (the schema and
its revisions).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from safepoint.errors import StoreError
from safepoint.observe import QueryHook
from safepoint.store.query import Op

from .ddl import upgrade
from .errors import translate
from .forks import OwnConnection
from .group_commit import Member, Queue, commit_batch
from .opening import Settings, check_file, check_store
from .transactions import CAPABILITIES, transact

T = TypeVar("T")
READ_ONLY_WRITE = "this store was opened with read_only=True: it writes nothing"


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
        # Saves of concurrent runs share a transaction (group_commit.py); off: each commits alone.
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
        """True when a read-only open had to take the file as immutable (see ``opening``)."""
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
            raise StoreError(READ_ONLY_WRITE)
        with self._own.lock:
            return transact(self._own.get(), op, write=write, path=self.path, on_query=self.on_query)

    def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        """Drive the save ``op``, in a transaction it may share with other threads' saves (group_commit.py).

        ``rebuild`` makes the operation again, should the shared transaction
        fail as a whole; ``weight`` (its new bytes) bounds a batch.
        """
        if self.read_only:
            raise StoreError(READ_ONLY_WRITE)
        if not self.group_commit:
            return self.run(op, write=True)
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
            raise StoreError(READ_ONLY_WRITE)
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
