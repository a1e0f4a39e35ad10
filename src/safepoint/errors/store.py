"""What the store answers when it will not or cannot do a call: no such run,
not the next step, a lost lease, and the backend's own failures (the driver's
exception chained as ``__cause__``).

See ``safepoint.errors`` for the whole tree.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .base import SafepointError


class NotFound(SafepointError, LookupError):
    """The run, or the requested step of it, does not exist."""

    def __init__(self, run_id: str, step: int | None = None) -> None:
        self.run_id = run_id
        self.step = step
        where = f"run {run_id!r}" if step is None else f"run {run_id!r} step {step}"
        super().__init__(f"{where} not found")


class StoreNotFound(NotFound):
    """``open_store(url, read_only=True)`` found no safepoint store there; nothing was created.

    Nothing at the URL (no file, no database, no schema), or a SQLite file or
    PostgreSQL schema without safepoint's tables. ``url`` is the URL as shown
    (a PostgreSQL password masked); ``run_id`` and ``step`` are None.
    """

    def __init__(self, url: str, detail: str | None = None) -> None:
        self.url = url
        self.run_id = None  # type: ignore[assignment]
        self.step = None
        SafepointError.__init__(self, f"no safepoint store at {url}" + (f": {detail}" if detail else ""))


class Conflict(SafepointError):
    """The save is not the next step of the run; nothing was written.

    Raised when another writer got there first, when a step is skipped or
    repeated, or when a new run's first checkpoint is not step 0.
    """

    def __init__(self, run_id: str, step: int, head: int | None, detail: str | None = None) -> None:
        self.run_id = run_id
        self.step = step
        self.head = head
        if detail is not None:
            pass
        elif head is None:
            detail = "the run does not exist yet, so its first checkpoint must be step 0"
        else:
            detail = f"the run is at step {head}, so only step {head + 1} can be saved"
        super().__init__(f"cannot save run {run_id!r} step {step}: {detail}")


class RunHeld(Conflict):
    """Another live writer holds the run, and still did once the opener's wait was over.

    Raised by ``Run``/``AsyncRun`` ``open``, ``start``, ``resume``,
    ``resume_with`` and ``set_budget`` (and ``Store.hold_run``) while another
    writer's lease on the run is live: an open ``Run`` in another process or
    thread, or a ``Worker``. Nothing was loaded or written. ``until`` is when
    that lease runs out unless its holder renews it (a ``datetime`` in UTC);
    ``owner`` is the holder's id, kept off the message (ids are chosen by
    whoever runs a worker, and messages get logged). A ``Conflict``: the run
    is busy, try again later.
    """

    def __init__(self, run_id: str, until: datetime, owner: str | None = None) -> None:
        self.run_id = run_id
        self.step = None  # type: ignore[assignment]  # nothing was saved: no step was tried
        self.head = None
        self.until = until
        self.owner = owner
        shown = until.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        SafepointError.__init__(
            self,
            f"run {run_id!r} is held by another writer until {shown} UTC (renewed while it works);"
            " open it again later (inside a Worker's handler, open it with lease=job.lease)",
        )


class LeaseLost(SafepointError):
    """The caller's lease on a run is no longer current; nothing was written.

    Another worker claimed the run after this lease expired (a higher epoch),
    or the lease was released. The caller must stop working on the run.
    """

    def __init__(self, run_id: str, epoch: int, detail: str) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(f"lease on run {run_id!r} (epoch {epoch}) is lost: {detail}")


class StoreError(SafepointError):
    """The storage backend failed; the driver's exception is the ``__cause__``."""


class StoreUnavailable(StoreError):
    """The store is unavailable for now; the same call may well succeed later.

    The one transient error: raised only for a lost connection, a server
    restart or shutdown, a full disk, and a lock or statement timeout
    (SQLite busy or locked; PostgreSQL lock_not_available, serialization
    failure, deadlock), and a query a PostgreSQL hot standby cancelled for a
    conflict with recovery (the replica replayed a cleanup of rows the query
    might still need: retried, it reads a newer snapshot). Every other ``StoreError`` — ``StoreClosed``,
    ``BlobError``, ``BlobNotFound`` — is not transient: retrying it fails the
    same way. ``committing`` is True when the error came while the commit was
    on its way, so the write may have happened; ``digest`` is then the digest
    of the checkpoint being written, when the driver knew it (the retry
    policy in ``safepoint.retrying`` compares it with the stored one).
    """

    def __init__(self, message: str, *, committing: bool = False, digest: bytes | None = None) -> None:
        self.committing = committing
        self.digest = digest
        super().__init__(message)


class StoreReadOnly(StoreError):
    """The store takes no writes where the call reached it; nothing was written. Not transient.

    Raised by a write — a save, a claim or another lease call, a run's
    status change, ``open_store`` without ``read_only`` (which would create
    or upgrade the tables) — on a store opened with ``read_only=True``, or on
    a PostgreSQL *hot standby* (a server in recovery, a replica: it refuses a
    read-write transaction with SQLSTATE 0A000, a write with 25006). Reads
    work there. ``standby`` says which: True when the server is a hot standby
    (PostgreSQL 14 and later report it on every connection), False for a
    read-only open or a transaction the server kept read-only.

    Not a ``StoreUnavailable``: the retry policy passes it on at once, so a
    ``Worker`` stops on it and a ``Run`` raises it. Waiting would not help:
    a standby leaves recovery only when it is promoted, and a writer whose
    URL may reach a standby should choose the primary itself (a multi-host
    URL with ``target_session_attrs=read-write``: libpq then skips a standby
    while connecting, and a failover is a connection error, which is
    retried). docs/operations.md, "Readers on a replica".
    """

    def __init__(self, message: str, *, standby: bool = False) -> None:
        self.standby = standby
        super().__init__(message)


class StoreClosed(StoreError):
    """The store was used after ``close()``."""


class StoreCorrupt(StoreError):
    """The database itself is damaged, below any one checkpoint; not transient.

    SQLite reports a corrupt page (``database disk image is malformed``) or a
    file that is not a database; PostgreSQL a ``data_corrupted`` or
    ``index_corrupted`` error. ``where`` names the file (or the PostgreSQL
    database), never stored text. What to do next: ``safepoint verify`` on a
    copy restored from backup, or fork the runs from their last good step
    (docs/operations.md, "Damaged data").
    """

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        super().__init__(f"the store at {where} is corrupt: {detail}")


class BlobError(StoreError):
    """The blob store failed; the underlying exception is the ``__cause__``."""


class BlobNotFound(BlobError, LookupError):
    """No blob with that digest exists in the blob store."""

    def __init__(self, digest: str, detail: str = "not in the blob store") -> None:
        self.digest = digest
        super().__init__(f"blob {digest}: {detail}")
