"""Read operations over runs: a run's history, its summary, and the paged listing.

These read columns outside any digest (a checkpoint row's status, version,
message count; the run row's labels, counters, times). A value no save
writes (an unknown status, a label column that is not JSON, a time that is
not a number) is ``CorruptCheckpoint`` naming the run and step, never a
traceback; whether the columns agree with the checkpoints they describe is
what ``safepoint verify`` checks (``safepoint.tamper``).

Listing is not loading: in ``list_runs`` a run whose row cannot be read (a
damaged column, a sealed value that does not open) is listed as unreadable
(``RunInfo.unreadable``), and the rest of the page stands. ``run_info``, which
asks for that one run, raises.
"""

from __future__ import annotations

from datetime import datetime

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, EncryptedStore, MissingKey, NotFound
from safepoint.model import ParentRef, Status
from safepoint.records import CheckpointInfo, RunCounts, RunInfo, StatusOrigin, TimelinePoint, from_micros
from safepoint.store import sorting
from safepoint.store.query import Op, Query, Row, Unopened
from safepoint.store.stored_row import from_column
from safepoint.visible import visible


def history(run_id: str) -> Op[list[CheckpointInfo]]:
    """Every checkpoint header of the run, oldest first."""
    rows = yield Query("history", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    return [_checkpoint_info(run_id, row) for row in rows]


def run_counts(now: int, soon: int) -> Op[RunCounts]:
    """Runs by status, queued, leased and expiring (times in microseconds since the epoch)."""
    rows = yield Query("run_counts", {"now": now, "soon": soon})
    return RunCounts(
        by_status={str(row.status): int(row.runs) for row in rows},
        queued=sum(int(row.queued) for row in rows),
        leased=sum(int(row.leased) for row in rows),
        expiring=sum(int(row.expiring) for row in rows),
    )


def forks_of(run_id: str) -> Op[list[ParentRef]]:
    """The runs forked from ``run_id`` (each as the fork's id and the step it was forked at)."""
    rows = yield Query("forks_of", {"run_id": run_id})
    return [ParentRef(str(row.run_id), int(row.parent_step)) for row in rows]


def timeline(run_id: str) -> Op[list[TimelinePoint]]:
    """Each checkpoint's counters and stored bytes, oldest first: one query, no message body."""
    rows = yield Query("timeline", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    points = []
    for row in rows:
        try:
            header = codec.decode(row.header) if row.header else {}
            counters = header.get("counters")
            points.append(
                TimelinePoint(
                    step=int(row.step),
                    created_at=from_micros(row.created_at),
                    message_count=int(row.message_count),
                    counters=counters if isinstance(counters, dict) else {},
                    stored_bytes=int(row.stored_bytes or 0),
                    pending_action=header.get("pending_action"),
                )
            )
        except (TypeError, ValueError, OverflowError, AttributeError):
            raise CorruptCheckpoint(run_id, row.step, "its header is not what a save writes") from None
    return points


def _checkpoint_info(run_id: str, row: Row) -> CheckpointInfo:
    step, version, status = row.step, row.schema_version, row.status
    created, count, digest = row.created_at, row.message_count, row.digest
    try:
        if type(step) is not int or type(version) is not int or type(count) is not int:
            raise TypeError("not an int")
        return CheckpointInfo(
            run_id=run_id,
            step=step,
            schema_version=version,
            status=Status(status),
            created_at=from_micros(created),
            message_count=count,
            digest=bytes(digest).hex(),
        )
    except (TypeError, ValueError, OverflowError):
        where = step if type(step) is int else None
        raise CorruptCheckpoint(
            run_id, where, "its checkpoint row's columns are not what a save writes"
        ) from None


def run_info(run_id: str) -> Op[RunInfo]:
    """The run row of ``run_id``."""
    rows = yield Query("run_info", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    return _run_info(rows[0])


def list_runs(
    *,
    statuses: list[str] | None,
    labels: dict[str, str] | None,
    updated_since: int | None,
    before_id: int | None,
    limit: int,
    prefix: str | None = None,
    updated_until: int | None = None,
) -> Op[tuple[list[RunInfo], int | None]]:
    """One page of runs, newest first, and the row id to continue before (if more)."""
    rows = yield Query(
        "list_runs",
        {
            **_filters(statuses, labels, updated_since, updated_until, prefix),
            "before_id": before_id,
            "limit": limit + 1,
        },
    )
    page = [_listed(row) for row in rows[:limit]]
    more = rows[limit - 1].run_ref if len(rows) > limit else None
    return page, more


def list_runs_sorted(
    *,
    statuses: list[str] | None,
    labels: dict[str, str] | None,
    updated_since: int | None,
    updated_until: int | None,
    prefix: str | None,
    sort: str,
    descending: bool,
    after: sorting.After | None,
    limit: int,
) -> Op[tuple[list[RunInfo], sorting.After | None]]:
    """One page of runs in the order ``sort`` names (``safepoint.store.sorting``), and where the
    next page starts (if more)."""
    rows = yield Query(
        "list_runs_sorted",
        {
            **_filters(statuses, labels, updated_since, updated_until, prefix),
            "sort": sort,
            "descending": descending,
            "after_text": None if after is None else after.text,
            "after_number": None if after is None else after.number,
            "after_id": None if after is None else after.row_id,
            "limit": limit + 1,  # one extra row says whether another page exists
        },
    )
    page = [_listed(row) for row in rows[:limit]]
    if len(rows) <= limit:
        return page, None
    last = rows[limit - 1]  # the key as stored, whether or not the row reads
    text, number = sorting.key_of(sort, last.run_id, last.status, last.head_step, last.updated_at)
    return page, sorting.After(text, number, last.run_ref)


def _filters(
    statuses: list[str] | None,
    labels: dict[str, str] | None,
    updated_since: int | None,
    updated_until: int | None,
    prefix: str | None,
) -> dict[str, object]:
    return {
        "statuses": None if statuses is None else codec.encode(statuses).decode(),
        "labels": None if labels is None else codec.encode(labels).decode(),
        "updated_since": updated_since,
        "updated_until": updated_until,
        "prefix": prefix,
    }


def _listed(row: Row) -> RunInfo:
    """A listing's run: read, or marked unreadable with what could be read."""
    unopened = next((value for value in row if isinstance(value, Unopened)), None)
    try:
        if unopened is None:
            return _run_info(row)
        error = unopened.error
    except EncryptedStore:
        raise  # the store's condition, not this run's: opened without its keyring, nothing reads
    except (CorruptCheckpoint, MissingKey) as exc:
        error = type(exc).__name__
    return _unreadable(row, error)


def _unreadable(row: Row, error: str) -> RunInfo:
    def micros(value: object) -> datetime:
        try:
            return from_micros(value) if type(value) is int else _EPOCH
        except OverflowError:
            return _EPOCH

    # RunInfo's fields stay typed for every caller: a status no save writes reads as failed.
    status = row.status if row.status in _STATUSES else Status.FAILED.value
    head, version = row.head_step, row.schema_version
    return RunInfo(
        run_id=str(row.run_id),
        status=Status(status),
        head_step=head if type(head) is int else -1,
        schema_version=version if type(version) is int else 0,
        labels={},
        counters={},
        created_at=micros(row.created_at),
        updated_at=micros(row.updated_at),
        parent=None,
        attempts=row.attempts if type(row.attempts) is int else 0,
        unreadable=error,
    )


_STATUSES = frozenset(status.value for status in Status)
_EPOCH = from_micros(0)


def status_origin(run_id: str) -> Op[StatusOrigin]:
    """The run row's status and, when a change made without a checkpoint set it, which one
    (``StatusOrigin``: a record from another lease epoch, or naming another status, is none)."""
    rows = yield Query("status_origin", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    row = rows[0]
    status, set_by = str(row.status), None
    try:
        change = codec.decode(row.status_change) if row.status_change is not None else None
    except (ValueError, TypeError):
        change = None  # not what a release writes: as if none, so the status must be the head's
    if (
        type(change) is dict
        and change.get("status") == status
        and type(change.get("epoch")) is int
        and change["epoch"] == row.epoch
        and change.get("by") in _SET_BY
    ):
        set_by = str(change["by"])
    return StatusOrigin(run_id, status, set_by)


_SET_BY = frozenset({"release", "requeue", "cancel", "upgrade"})


def _run_info(row: Row) -> RunInfo:
    run_id, status, head, version = row.run_id, row.status, row.head_step, row.schema_version
    if isinstance(row.counters, bytes | memoryview):  # SQLite's sealed header: never opened here
        raise EncryptedStore(f"run {visible(str(run_id))}")
    try:
        labels, counters = codec.decode(row.labels), codec.decode(row.counters)
        if type(counters) is str or (type(labels) is dict and str(labels.get("")).startswith("sp1:")):
            raise EncryptedStore(f"run {visible(str(run_id))}")  # sealed labels or counters (PostgreSQL)
        decoded = labels, from_column(counters)
        if not all(type(value) is dict for value in decoded) or type(head) is not int:
            raise TypeError("not a dict")
        return RunInfo(
            run_id=run_id,
            status=Status(status),
            head_step=head,
            schema_version=version,
            labels=decoded[0],
            counters=decoded[1],
            created_at=from_micros(row.created_at),
            updated_at=from_micros(row.updated_at),
            parent=None if row.parent_run_id is None else ParentRef(row.parent_run_id, row.parent_step),
            attempts=row.attempts,
            retry_at=None if row.retry_at is None else from_micros(row.retry_at),
            last_error=row.last_error,
        )
    except (TypeError, ValueError, OverflowError):
        where = head if type(head) is int else None
        raise CorruptCheckpoint(
            str(run_id), where, "its run row's columns are not what a save writes"
        ) from None
