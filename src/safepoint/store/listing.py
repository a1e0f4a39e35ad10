"""Read operations over runs: a run's history, its summary, and the paged listing."""

from __future__ import annotations

from safepoint import codec
from safepoint.errors import NotFound
from safepoint.model import CheckpointInfo, ParentRef, RunInfo, Status, from_micros

from .ops import Op, Query, Row


def history(run_id: str) -> Op[list[CheckpointInfo]]:
    """Every checkpoint header of the run, oldest first."""
    rows = yield Query("history", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    return [
        CheckpointInfo(
            run_id=run_id,
            step=step,
            schema_version=version,
            status=Status(status),
            created_at=from_micros(created),
            message_count=count,
            digest=bytes(digest).hex(),
        )
        for step, version, status, created, count, digest in rows
    ]


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
) -> Op[tuple[list[RunInfo], int | None]]:
    """One page of runs, newest first, and the row id to continue before (if more)."""
    rows = yield Query(
        "list_runs",
        {
            "statuses": None if statuses is None else codec.encode(statuses).decode(),
            "labels": None if labels is None else codec.encode(labels).decode(),
            "updated_since": updated_since,
            "before_id": before_id,
            "limit": limit + 1,  # one extra row says whether another page exists
        },
    )
    page = [_run_info(row) for row in rows[:limit]]
    more = rows[limit - 1][0] if len(rows) > limit else None
    return page, more


def _run_info(row: Row) -> RunInfo:
    (
        _id,
        run_id,
        status,
        head,
        version,
        labels,
        counters,
        created,
        updated,
        parent_id,
        parent_step,
        attempts,
        retry_at,
        last_error,
    ) = row
    return RunInfo(
        run_id=run_id,
        status=Status(status),
        head_step=head,
        schema_version=version,
        labels=codec.decode(labels),
        counters=codec.decode(counters),
        created_at=from_micros(created),
        updated_at=from_micros(updated),
        parent=None if parent_id is None else ParentRef(parent_id, parent_step),
        attempts=attempts,
        retry_at=None if retry_at is None else from_micros(retry_at),
        last_error=last_error,
    )
