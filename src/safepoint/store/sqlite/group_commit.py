"""Group commit: saves of many runs sharing one SQLite transaction and one fsync.

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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from safepoint.observe import QueryHook
from safepoint.store.query import Op

from .errors import translate
from .transactions import control, drive, transact

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
