"""One store operation in one SQLite transaction — alone, or with other runs' saves (group commit).

**One operation, one transaction**: BEGIN, its named queries, then COMMIT or
ROLLBACK (``transact``). With a query hook (``safepoint.observe.QueryObserver``,
set as the driver's ``on_query``), each statement is timed and reported: the
operation's named queries (``observe.queries``), and the transaction's
``BEGIN`` (``BEGIN IMMEDIATE`` for a write) and ``COMMIT``, which on SQLite
are statements of their own. Without one, a transaction costs three ``is
None`` tests more.

**Group commit**: saves of many runs sharing one SQLite transaction and one fsync.
A durable commit costs an fsync, and one connection commits one transaction
at a time: with many threads (or tasks) saving different runs through one
store, each save used to wait for every other save's fsync. Here a save
that finds the connection busy does not wait for its turn to commit alone;
it *joins*: it is queued (already validated, scrubbed and encoded — only
prepared saves join), and whichever save takes the connection next runs
every queued save in one transaction, each inside a savepoint of its own,
then commits once. Each save keeps

* its own atomicity: a save that raises (``Conflict``, ``LeaseLost``, a
  statement's error) is rolled back to its savepoint, and the others commit;
* its own outcome: the error or the result of its own operation, handed
  back to its caller only after the shared commit returned, so ``save``
  still returns once its checkpoint is durable;
* a bounded wait: a batch is what was queued when the connection came
  free, at most ``MAX_MEMBERS`` saves and ``MAX_BYTES`` of new bodies (one
  larger save goes alone); nothing waits for more saves to arrive.

When an error ends the shared transaction itself (SQLite rolls a
transaction back on a full disk or an I/O error) or the commit fails,
nothing of the batch was written: each of its saves is run again, alone,
from a fresh operation (``Member.rebuild``), and gets the outcome it would
have had without the batch.

A save that finds the connection free runs at once, alone, with no
savepoint: one run's save costs what it did before (see
docs/benchmarks.md). The sync driver's leader is the thread that gets the
connection lock (``SQLiteDriver.run_joined``); the async driver's is the
task whose save found no batch in flight (``asyncstore.SQLiteAsyncDriver``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from safepoint.observe import QueryHook
from safepoint.observe.queries import attributes, report, traced
from safepoint.store.query import UNSUPPORTED, Op, Query, Row
from safepoint.store.query_specs import DIALECTS, load_dialect

from .errors import translate

T = TypeVar("T")
# Each query's SQL and spec (its header in queries.sql): the rows go back to
# the operation as the spec's named rows.
QUERIES = load_dialect(*DIALECTS["sqlite"])
# The optional queries this dialect has: the file's housekeeping (vacuum,
# free pages, secure delete, WAL truncation), which only a file needs.
# ops.save's one-statement save (save_next) is PostgreSQL's, saving a round
# trip; on one local connection the general save costs none, so this driver
# answers UNSUPPORTED to it and ops.save goes on in the same transaction.
CAPABILITIES = frozenset(name for name, query in QUERIES.items() if query.spec.optional)
DIALECT = "sqlite"


def transact(
    conn: sqlite3.Connection, op: Op[T], *, write: bool, path: str | None, on_query: QueryHook | None
) -> T:
    """Drive ``op`` inside one transaction; commit on return, roll back on error."""
    try:
        control(conn, "BEGIN IMMEDIATE" if write else "BEGIN", on_query)
    except sqlite3.Error as exc:
        raise translate(exc, "starting a transaction", path) from exc
    try:
        result = drive(conn, op, path=path, on_query=on_query)
        try:
            control(conn, "COMMIT", on_query)
        except sqlite3.Error as exc:  # e.g. SQLITE_FULL: SQLite has rolled back
            raise translate(exc, "committing", path) from exc
    except BaseException:
        if conn.in_transaction:
            # The error that got us here is the one to report, not the rollback's.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result


def drive(conn: sqlite3.Connection, op: Op[T], *, path: str | None, on_query: QueryHook | None) -> T:
    """Answer each named query ``op`` asks for with its rows, until it returns."""
    if on_query is not None:
        op = traced(op, on_query, DIALECT, UNSUPPORTED)
    rows: list[Row] | None = None
    while True:
        try:
            query = op.send(rows)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if query.optional and query.name not in CAPABILITIES:
            rows = UNSUPPORTED
            continue
        try:
            rows = _execute(conn, query)
        except sqlite3.Error as exc:
            op.close()
            raise translate(exc, f"running {query.name!r}", path) from exc


def _execute(conn: sqlite3.Connection, query: Query) -> list[Row]:
    named = QUERIES[query.name]
    if query.many is not None:
        conn.executemany(named.sql, query.many)
        return []
    return list(map(named.spec.row, conn.execute(named.sql, query.params).fetchall()))


def control(conn: sqlite3.Connection, statement: str, on_query: QueryHook | None) -> None:
    """BEGIN or COMMIT, reported under its own text."""
    if on_query is None:
        conn.execute(statement)
        return
    start = time.perf_counter()
    conn.execute(statement)
    report(on_query, statement, time.perf_counter() - start, attributes(DIALECT, 0))


# -- group commit ------------------------------------------------------------

MAX_MEMBERS = 64
MAX_BYTES = 16 * 1024 * 1024


@dataclass(slots=True, eq=False)
class Member:
    """One save waiting to commit: its operation, how to build it again, and (once done) its outcome."""

    op: Op[Any]
    rebuild: Callable[[], Op[Any]]
    weight: int  # the new bodies' bytes, for bounding a batch
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    # Called once the outcome is set (the async driver wakes its task); runs in the committing thread.
    on_done: Callable[[Member], None] | None = None
    _ran: bool = field(default=False, repr=False)

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True
        if self.on_done is not None:
            self.on_done(self)

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Queue:
    """The saves waiting for the connection, in arrival order; safe across threads and forks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: deque[Member] = deque()

    def put(self, member: Member) -> None:
        with self._lock:
            self._waiting.append(member)

    def empty(self) -> bool:
        return not self._waiting

    def take(self) -> list[Member]:
        """The next batch: the oldest waiting saves, bounded in count and bytes (at least one)."""
        batch: list[Member] = []
        size = 0
        with self._lock:
            while self._waiting and len(batch) < MAX_MEMBERS:
                weight = self._waiting[0].weight
                if batch and size + weight > MAX_BYTES:
                    break
                batch.append(self._waiting.popleft())
                size += weight
        return batch

    def reset(self) -> None:
        """In a forked child: the parent's waiting saves belong to threads the child lacks."""
        self._lock = threading.Lock()
        self._waiting = deque()


def commit_batch(
    conn: sqlite3.Connection, batch: list[Member], *, path: str | None, on_query: QueryHook | None
) -> None:
    """Run ``batch`` in one transaction and settle every member; never raises."""
    try:
        if len(batch) == 1:  # alone: the plain transaction, no savepoint
            _alone(conn, batch[0], path=path, on_query=on_query)
            return
        if not _together(conn, batch, path=path, on_query=on_query):
            for member in batch:
                if not member.done:
                    _alone(conn, member, path=path, on_query=on_query)
    except BaseException as exc:  # an interrupt in the committing thread: every unsettled save learns of it
        for member in batch:
            if not member.done:
                member.settle(error=exc)


def _alone(conn: sqlite3.Connection, member: Member, *, path: str | None, on_query: QueryHook | None) -> None:
    op = member.rebuild() if member._ran else member.op
    member._ran = True
    try:
        result = transact(conn, op, write=True, path=path, on_query=on_query)
    except Exception as exc:
        member.settle(error=exc)
    else:
        member.settle(result)


def _together(
    conn: sqlite3.Connection, batch: list[Member], *, path: str | None, on_query: QueryHook | None
) -> bool:
    """One transaction for the batch; False (nothing written) when the transaction itself was lost."""
    try:
        control(conn, "BEGIN IMMEDIATE", on_query)
    except sqlite3.Error as exc:
        begun = translate(exc, "starting a transaction", path)
        for member in batch:
            member.settle(error=begun)
        return True
    results: list[tuple[Member, Any]] = []
    failed: list[tuple[Member, BaseException]] = []
    lost = False
    try:
        for member in batch:
            member._ran = True
            conn.execute("SAVEPOINT safepoint_member")
            try:
                results.append((member, drive(conn, member.op, path=path, on_query=on_query)))
            except Exception as exc:
                if not conn.in_transaction:  # SQLite rolled the whole transaction back
                    lost = True
                    break
                conn.execute("ROLLBACK TO safepoint_member")
                failed.append((member, exc))
            conn.execute("RELEASE safepoint_member")
        if not lost:
            try:
                control(conn, "COMMIT", on_query)
            except sqlite3.Error:
                lost = True
    except BaseException:
        _roll_back(conn)
        raise
    if lost:
        _roll_back(conn)
        return False
    # Committed: every outcome stands, the failures' included (theirs were rolled back to their savepoints).
    for member, result in results:
        member.settle(result)
    for member, error in failed:
        member.settle(error=error)
    return True


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # the error that got us here is the one to report
            conn.execute("ROLLBACK")
