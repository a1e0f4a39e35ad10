"""What each public store method does around its transaction, written once.

A ``Call`` is the whole recipe of one public method: the work done before the
transaction (validation, encoding — so bad values are refused before any write
and locks are held briefly), the operation the driver runs in one transaction,
and the work done after commit. ``Store`` runs a call by blocking on its
driver; an async store runs the same call by awaiting. Neither holds logic.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Generic, TypeVar

from safepoint.errors import InvalidArgument
from safepoint.model import (
    Checkpoint,
    CheckpointInfo,
    Lease,
    Page,
    Retention,
    RunInfo,
    Status,
    new_run_id,
    to_micros,
)

from . import leases, listing, maintenance, ops
from .pipeline import Pipeline, ResolveSecrets
from .serialize import check_id, check_step, finish_save, validate_fields

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Call(Generic[T, R]):
    """One transaction (``op``), and what turns its result into the method's return value."""

    op: ops.Op[T]
    write: bool
    finish: Callable[[T], R]


def _same(value: Any) -> Any:
    return value


def now_micros() -> int:
    return time.time_ns() // 1000


SaveOp = Callable[..., ops.Op[ops.SaveResult]]


def save(
    cp: Checkpoint, lease: Lease | None, pipeline: Pipeline, save_op: SaveOp | None = None
) -> Call[ops.SaveResult, CheckpointInfo]:
    """``save_op``: the driver's own save operation (same arguments and result as
    ``ops.save``, e.g. PostgreSQL's one-statement save); ``ops.save`` if None."""
    pipeline.guard(partial(validate_fields, allow_bytes=pipeline.blobs is not None), cp)
    if lease is not None and lease.run_id != cp.run_id:
        raise InvalidArgument(f"the lease is for run {lease.run_id!r}, not {cp.run_id!r}")
    view = cp.stored_view
    if view is not None and view.run_id != cp.run_id:
        view = None
    prepared = pipeline.guard(pipeline.prepare_save, cp)
    plan = pipeline.guard(prepared.plan, view, cp.messages)
    now = now_micros()

    def finish(result: ops.SaveResult) -> CheckpointInfo:
        finish_save(cp, result.plan, result.ranges, now, result.digest)
        cp.scrub_report = result.report
        assert cp.created_at is not None
        assert cp.digest is not None
        return CheckpointInfo(
            run_id=cp.run_id,
            step=cp.step,
            schema_version=cp.schema_version,
            status=cp.status,
            created_at=cp.created_at,
            message_count=result.plan.total,
            digest=cp.digest,
            scrub_report=result.report,
        )

    op = (save_op or ops.save)(cp, prepared, view, plan, now=now, lease=lease)
    return Call(op, True, finish)


def load(
    run_id: str,
    step: int | None,
    pipeline: Pipeline,
    *,
    resolve_secrets: ResolveSecrets = False,
    migrate: bool = True,
    fetch_blobs: bool = True,
) -> Call[ops.Loaded, Checkpoint]:
    def finish(loaded: ops.Loaded) -> Checkpoint:
        return pipeline.after_load(loaded, migrate=migrate, resolve=resolve_secrets, fetch_blobs=fetch_blobs)

    in_database = pipeline.blobs is not None and pipeline.blobs.in_database and fetch_blobs
    op = ops.load_for_reading(check_id(run_id), check_step(step), blobs_in_database=in_database)
    return Call(op, False, finish)


def migrate_runs(
    run_ids: list[str], pipeline: Pipeline
) -> Call[maintenance.Rewritten, maintenance.Rewritten]:
    chain = pipeline.migrations
    if chain is None:
        raise InvalidArgument("eager migration needs a store opened with migrations=MigrationChain(...)")
    ids = [check_id(run_id) for run_id in run_ids]

    def rewrite(head: Checkpoint) -> Checkpoint | None:
        chain.check_version(head.schema_version, run_id=head.run_id, step=head.step)
        return pipeline.migrate(head) if chain.needs_migration(head.schema_version) else None

    return Call(maintenance.rewrite_heads(ids, rewrite, pipeline.prepare_save, now_micros()), True, _same)


def fetch_blob(ref: Any, pipeline: Pipeline) -> Call[dict[str, bytes], str | bytes]:
    parsed = pipeline.blob_ref(ref)
    in_database = pipeline.blobs is not None and pipeline.blobs.in_database
    digests = [parsed.digest] if in_database else []

    def finish(stored: dict[str, bytes]) -> str | bytes:
        return pipeline.fetch_blob(parsed, stored)

    return Call(ops.read_blobs(digests), False, finish)


def set_retention(run_id: str, policy: Retention | None) -> Call[None, None]:
    if policy is not None and not isinstance(policy, Retention):
        raise InvalidArgument(f"policy must be a safepoint.Retention or None, not {type(policy).__name__}")
    return Call(maintenance.set_retention(check_id(run_id), policy), True, _same)


def prune_run(
    run_id: str, policy: Retention | None, pipeline: Pipeline, dry_run: bool
) -> Call[maintenance.PruneResult, maintenance.PruneResult]:
    op = maintenance.prune_run(check_id(run_id), policy or pipeline.retention, now_micros(), dry_run=dry_run)
    return Call(op, not dry_run, _same)


def collect_garbage(
    pipeline: Pipeline, grace: float | timedelta, dry_run: bool
) -> Call[maintenance.GcResult, maintenance.GcResult]:
    if pipeline.blobs is None:
        raise InvalidArgument("this store has no blob store (opened with blobs=False): nothing to collect")
    wait = grace if isinstance(grace, timedelta) else timedelta(seconds=_seconds_or_zero(grace))
    op = maintenance.collect_garbage(pipeline.blobs, now_micros(), wait, dry_run=dry_run)
    # A write transaction even for a dry run: the exclusive blob guard needs one.
    return Call(op, True, _same)


def _seconds_or_zero(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidArgument(f"grace must be a non-negative number of seconds or a timedelta, not {value!r}")
    return float(value)


def history(run_id: str) -> Call[list[CheckpointInfo], list[CheckpointInfo]]:
    return Call(listing.history(check_id(run_id)), False, _same)


def run_info(run_id: str) -> Call[RunInfo, RunInfo]:
    return Call(listing.run_info(check_id(run_id)), False, _same)


def runs(
    *,
    status: Status | str | Iterable[Status | str] | None,
    labels: dict[str, str] | None,
    updated_since: datetime | None,
    limit: int,
    cursor: str | None,
) -> Call[tuple[list[RunInfo], int | None], Page[RunInfo]]:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidArgument(f"limit must be a positive int, not {limit!r}")
    if labels is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise InvalidArgument("labels must map str to str")
    op = listing.list_runs(
        statuses=None if status is None else _statuses(status),
        labels=labels,
        updated_since=None if updated_since is None else to_micros(updated_since),
        before_id=_decode_cursor(cursor),
        limit=limit,
    )

    def finish(result: tuple[list[RunInfo], int | None]) -> Page[RunInfo]:
        items, more = result
        return Page(items, None if more is None else _encode_cursor(more))

    return Call(op, False, finish)


def fork(
    run_id: str, step: int | None, new_run_id_: str | None, labels: dict[str, str] | None, pipeline: Pipeline
) -> Call[Checkpoint, Checkpoint]:
    target = check_id(new_run_id_ or new_run_id(), "new_run_id")
    pipeline.guard(validate_fields, Checkpoint(run_id=target, labels=labels or {}))
    if labels is not None:  # scrubbed like any label a save writes
        labels = pipeline.prepare_save(Checkpoint(run_id=target, labels=labels)).fields.labels
    return Call(ops.fork(check_id(run_id), check_step(step), target, labels, now_micros()), True, _same)


def delete_run(run_id: str) -> Call[None, None]:
    return Call(ops.delete_run(check_id(run_id)), True, _same)


def enqueue(run_id: str) -> Call[None, None]:
    return Call(leases.enqueue(check_id(run_id), now_micros()), True, _same)


def claim(worker_id: str, lease: float | timedelta) -> Call[Lease | None, Lease | None]:
    return Call(
        leases.claim(check_id(worker_id, "worker_id"), _seconds(lease, "lease"), now_micros()), True, _same
    )


def heartbeat(lease: Lease, extend: float | timedelta | None) -> Call[Lease, Lease]:
    duration = lease.duration if extend is None else _seconds(extend, "extend")
    return Call(leases.heartbeat(lease, duration, now_micros()), True, _same)


def release(lease: Lease, status: Status | str | None, requeue: bool) -> Call[None, None]:
    new_status = None if status is None else Status(_statuses(status)[0])
    return Call(leases.release(lease, new_status, requeue, now_micros()), True, _same)


def _seconds(value: float | timedelta, name: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise InvalidArgument(f"{name} must be a positive number of seconds or a timedelta, not {value!r}")
    return float(seconds)


def _statuses(status: Status | str | Iterable[Status | str]) -> list[str]:
    wanted = [status] if isinstance(status, str) else list(status)
    try:
        return [Status(s).value for s in wanted]
    except ValueError as exc:
        known = ", ".join(s.value for s in Status)
        raise InvalidArgument(f"unknown status in {wanted!r} (known: {known})") from exc


def _encode_cursor(row_id: int) -> str:
    return base64.urlsafe_b64encode(str(row_id).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return int(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cursor {cursor!r} is not one this store returned") from exc
