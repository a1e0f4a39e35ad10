"""psycopg errors -> safepoint errors, at the driver boundary (``Transaction``, ``translate``).

Messages name what the store was doing (the query, "committing") and the
SQLSTATE, never the server's message text for data errors: PostgreSQL quotes
offending values there ('invalid input syntax for type json ... Token "…"'),
and a checkpoint's values must not reach a log line. The psycopg error stays
reachable as ``__cause__`` for whoever needs the detail.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from safepoint.errors import (
    Conflict,
    InvalidArgument,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)

from .statements import Statements

T = TypeVar("T")

# Unique violations that can only mean "another writer got there first". The
# locked run row makes them unreachable in practice; this is the safety net.
_RACE_CONSTRAINTS = frozenset({"safepoint_checkpoints_pkey", "safepoint_messages_pkey"})

# SQLSTATEs that pass: the same statement succeeds once the server has space,
# connections or the lock again. Class 08 (connection) and 57P (shutdown,
# crash, restart) are connection losses, handled apart.
_TRANSIENT = frozenset(
    {
        "53100",  # disk_full
        "53300",  # too_many_connections
        "55P03",  # lock_not_available (lock_timeout)
        "40001",  # serialization_failure; on a hot standby also a read cancelled by recovery
        "40P01",  # deadlock_detected
        "57014",  # query_canceled: statement_timeout, mostly spent waiting for a lock
        "25P03",  # idle_in_transaction_session_timeout: the session is gone, a new one works
    }
)

# A write refused because the server takes none (StoreReadOnly, not transient):
# read_only_sql_transaction, and what a hot standby answers a BEGIN READ WRITE
# with, feature_not_supported ("cannot set transaction read-write mode during
# recovery"). 0A000 means that only on a standby; elsewhere it stays a StoreError.
_READ_ONLY = "25006"
_NOT_ON_STANDBY = "0A000"

# Damaged storage (class XX): not transient, reported as StoreCorrupt.
_CORRUPTION = frozenset({"XX001", "XX002"})  # data_corrupted, index_corrupted


def translate(
    exc: Exception,
    *,
    doing: str,
    committing: bool = False,
    run_id: str | None = None,
    step: int | None = None,
    digest: bytes | None = None,
    standby: bool = False,
) -> Exception:
    """The safepoint error for ``exc``, raised while ``doing``; other exceptions pass through.

    ``standby``: the connection's server said it is a hot standby (in
    recovery). A write refused there is ``StoreReadOnly``; a read cancelled
    there by a conflict with recovery (40001: the standby replayed a change
    that removes rows the read might still see) is ``StoreUnavailable``, as
    every 40001 is, and the reader's retry finds a newer snapshot.

    ``UnicodeEncodeError`` comes from psycopg encoding a parameter: text
    PostgreSQL cannot hold (a lone surrogate) that no validation caught; it is
    refused as ``InvalidArgument`` before anything reaches the server.

    ``committing``: the COMMIT was sent, so a lost connection leaves its outcome unknown;
    ``digest`` (of the checkpoint being written, if any) then travels on the
    ``StoreUnavailable`` for the retry policy's "did it commit?" check.
    """
    if isinstance(exc, UnicodeEncodeError):
        return InvalidArgument(
            f"text sent while {doing} cannot be encoded as {exc.encoding} ({exc.reason}):"
            " PostgreSQL stores valid Unicode text only"
        )
    if not isinstance(exc, psycopg.Error):
        return exc
    if isinstance(exc, PoolClosed):
        return StoreClosed("the store is closed")
    if isinstance(exc, PoolTimeout | TooManyRequests):
        return StoreUnavailable(
            f"no PostgreSQL connection became free in time ({type(exc).__name__}): "
            "raise the store's max_size or timeout, or hold fewer connections"
        )
    if (
        isinstance(exc, pg_errors.UniqueViolation)
        and exc.diag.constraint_name in _RACE_CONSTRAINTS
        and run_id is not None
        and step is not None
    ):
        return Conflict(run_id, step, None, detail="another writer stored this step first")
    sqlstate = exc.sqlstate
    connection_lost = sqlstate is None or sqlstate.startswith(("08", "57P")) or sqlstate == "25P03"
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and connection_lost:
        # Connection-level failures (refused, reset, server shut down) carry
        # no stored values; libpq's first line is what an operator needs.
        lines = str(exc).strip().splitlines()
        reason = lines[0] if lines else type(exc).__name__
        outcome = "; the commit may or may not have happened" if committing else ""
        return StoreUnavailable(
            f"PostgreSQL connection failed while {doing}{outcome}: {reason}",
            committing=committing,
            digest=digest if committing else None,
        )
    code = "" if sqlstate is None else f" (SQLSTATE {sqlstate})"
    if sqlstate in _CORRUPTION:
        # The server's text names relations and blocks, but it is not ours to vouch for.
        return StoreCorrupt("the PostgreSQL database", f"{type(exc).__name__}{code} while {doing}")
    if sqlstate == _READ_ONLY or (standby and sqlstate == _NOT_ON_STANDBY):
        where = (
            "the server is a hot standby (in recovery), which takes no writes: point writers at the primary"
            if standby
            else "the server keeps the transaction read-only"
        )
        return StoreReadOnly(
            f"PostgreSQL refused a write while {doing}: {where} ({type(exc).__name__}{code})", standby=standby
        )
    if sqlstate in _TRANSIENT:
        # An error reply: the server answered, so the transaction did not commit.
        cause = " (a query on a hot standby cancelled by a conflict with recovery)" if standby else ""
        return StoreUnavailable(f"PostgreSQL unavailable while {doing}: {type(exc).__name__}{code}{cause}")
    return StoreError(f"PostgreSQL failed while {doing}: {type(exc).__name__}{code}")


class Transaction(Generic[T]):
    """Passes ``steps`` to a driver, remembering where the transaction stands.

    That memory is what turns a psycopg error into a useful safepoint one:
    which statements may have failed (in a pipeline, any sent since the last
    wait), whether the commit had started, and which run and step a unique
    violation was about.
    """

    def __init__(self, steps: Statements[T]) -> None:
        self._inner = steps
        self._unconfirmed: list[str] = []  # sent since the last statement whose rows came back
        self._committing = False
        self._run_id: str | None = None
        self._step: int | None = None
        self._digest: bytes | None = None  # of the checkpoint a save writes (errors.translate)
        # Whether the server said it is a hot standby, noted where the error met the connection.
        self.standby = False

    def steps(self) -> Statements[T]:
        inner = self._inner
        try:
            statement = next(inner)
            while True:
                self._unconfirmed.append(statement.name)
                for params in (statement.params or {}, *(statement.many or ())[:1]):
                    self._run_id = params.get("run_id", self._run_id)
                    self._step = params.get("step", self._step)
                    self._digest = params.get("digest", self._digest)
                self._committing = statement.final  # its COMMIT goes with it
                rows = yield statement
                if statement.fetch or statement.final:  # its rows came back: all before it succeeded
                    self._unconfirmed.clear()
                self._committing = False  # a final statement's commit succeeded too
                statement = inner.send(rows)
        except StopIteration as stop:
            self._committing = True
            return stop.value  # type: ignore[no-any-return]
        finally:
            inner.close()

    @property
    def doing(self) -> str:
        """What the transaction was doing, for error messages."""
        sent = " or ".join(repr(name) for name in self._unconfirmed)
        if self._committing:
            return f"committing (after {sent})" if sent else "committing"
        return f"running {sent}" if sent else "getting a connection"

    def error(self, exc: Exception) -> Exception:
        """The safepoint error to raise for ``exc`` (chained by the caller with ``from exc``)."""
        return translate(
            exc,
            doing=self.doing,
            committing=self._committing,
            run_id=self._run_id,
            step=self._step,
            digest=self._digest,
            standby=self.standby,
        )
