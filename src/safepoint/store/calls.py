"""What each public store method does around its transaction, written once.

A ``Call`` is the whole recipe of one public method: the work done before the
transaction (validation, encoding — so bad values are refused before any write
and locks are held briefly), slow I/O that must precede it (``before``: a
save's blob uploads), the operation the driver runs in one transaction, and
the work done after commit. ``Store`` runs a call by blocking on its driver;
an async store runs the same call by awaiting (and ``before`` in a thread).
Neither holds logic.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from itertools import islice
from typing import Any, Generic, TypeVar

from safepoint import codec
from safepoint.errors import InvalidArgument
from safepoint.model import (
    MAX_AGE,
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
from safepoint.scrub import Secrets

from . import maintenance
from .blobio import ExternalBlobs
from .ops import leases, listing, loading, saving
from .ops import runs as run_ops  # calls.runs is the listing call
from .pipeline import Pipeline, PreparedSave, ResolveSecrets
from .query import Loaded, Op
from .serialize import MessagePlan, check_id, check_step, finish_save, validate_fields

# Bounds on arguments, so that no value reaches a driver as an overflow (SQLite
# and PostgreSQL hold 64-bit integers; a lease's expiry is microseconds).
MAX_LIMIT = 10_000  # rows per page of ``runs``
MAX_LEASE = timedelta(days=365)  # a lease or heartbeat extension
MAX_EPOCH = 2**63 - 1
MAX_ROW_ID = 2**63 - 1  # what a cursor encodes
_MAX_CURSOR_CHARS = 32

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Call(Generic[T, R]):
    """One transaction (``op``), and what turns its result into the method's return value.

    ``before``, when set, is blocking I/O to run before the transaction
    begins (outside any lock); ``op`` stays correct if a runner skips it.
    """

    op: Op[T]
    write: bool
    finish: Callable[[T], R]
    before: Callable[[], None] | None = None


def _same(value: Any) -> Any:
    return value


def now_micros() -> int:
    return time.time_ns() // 1000


SaveOp = Callable[..., Op[saving.SaveResult[MessagePlan]]]


def save(
    cp: Checkpoint, lease: Lease | None, pipeline: Pipeline, save_op: SaveOp | None = None
) -> Call[saving.SaveResult[MessagePlan], CheckpointInfo]:
    """``save_op``: the save operation to build (same arguments and result as
    ``saving.save``, e.g. one wrapped by ``observed_save``); ``saving.save`` if None."""
    if not isinstance(cp, Checkpoint):
        raise InvalidArgument(f"save takes a safepoint.Checkpoint, not {type(cp).__name__}")
    if lease is not None:
        _check_lease(lease)
    pipeline.guard(partial(validate_fields, allow_bytes=pipeline.blobs is not None), cp)
    if lease is not None and lease.run_id != cp.run_id:
        raise InvalidArgument(f"the lease is for run {lease.run_id!r}, not {cp.run_id!r}")
    view = cp.stored_view
    if view is not None and view.run_id != cp.run_id:
        view = None
    prepared = pipeline.guard(pipeline.prepare_save, cp)
    plan = pipeline.guard(prepared.plan, view, cp.messages)
    now = now_micros()

    def finish(result: saving.SaveResult[MessagePlan]) -> CheckpointInfo:
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

    op = (save_op or saving.save)(cp, prepared, view, plan, now=now, lease=lease)
    # External blobs are uploaded before the transaction, so no upload runs
    # under the run's row lock or against the server's idle-in-transaction
    # timeout; the op re-checks them under the blob guard (see blobio.py).
    before = None
    if isinstance(pipeline.blobs, ExternalBlobs):
        pending = prepared.pending_blobs()
        if pending:
            before = partial(pipeline.blobs.put_all, pending)
    return Call(op, True, finish, before)


@dataclass(slots=True)
class SaveFacts:
    """What one committed save wrote, for span attributes and metrics: sizes and counts, no value.

    ``bytes_written`` counts the new message bodies and blobs (the small
    header row aside); ``findings`` the scrubber's replacements by rule.
    """

    bytes_written: int = 0
    messages_added: int = 0
    blobs_written: int = 0
    findings: dict[str, int] = field(default_factory=dict)


def observed_save(
    cp: Checkpoint, lease: Lease | None, pipeline: Pipeline, save_op: SaveOp | None, facts: SaveFacts
) -> Call[saving.SaveResult[MessagePlan], CheckpointInfo]:
    """``save``, filling ``facts`` once the save has committed (an observed store's save).

    The save is built by ``save`` itself; only its operation is wrapped, to
    keep hold of the prepared save, whose pending blobs are read after
    commit (a re-plan inside the transaction may add some).
    """
    inner = save_op or saving.save
    held: list[PreparedSave] = []

    def op(
        cp: Checkpoint, prepared: PreparedSave, *args: Any, **kwargs: Any
    ) -> Op[saving.SaveResult[MessagePlan]]:
        held.append(prepared)
        return inner(cp, prepared, *args, **kwargs)

    call = save(cp, lease, pipeline, op)

    def finish(result: saving.SaveResult[MessagePlan]) -> CheckpointInfo:
        info = call.finish(result)
        blobs = held[0].pending_blobs() if held else {}
        facts.messages_added = len(result.plan.bodies)
        facts.blobs_written = len(blobs)
        facts.bytes_written = sum(map(len, result.plan.bodies)) + sum(map(len, blobs.values()))
        facts.findings = result.report.by_rule()
        return info

    return Call(call.op, call.write, finish, call.before)


def load(
    run_id: str,
    step: int | None,
    pipeline: Pipeline,
    *,
    resolve_secrets: ResolveSecrets = False,
    migrate: bool = True,
    fetch_blobs: bool = True,
) -> Call[Loaded, Checkpoint]:
    def finish(loaded: Loaded) -> Checkpoint:
        return pipeline.after_load(loaded, migrate=migrate, resolve=resolve_secrets, fetch_blobs=fetch_blobs)

    if not (
        type(resolve_secrets) is bool or isinstance(resolve_secrets, Secrets) or callable(resolve_secrets)
    ):
        raise InvalidArgument(
            "resolve_secrets must be a bool, a safepoint.Secrets or a name -> value callable"
        )
    _flag(migrate, "migrate")
    _flag(fetch_blobs, "fetch_blobs")
    in_database = pipeline.blobs is not None and pipeline.blobs.in_database and fetch_blobs
    op = loading.load_for_reading(check_id(run_id), check_step(step), blobs_in_database=in_database)
    return Call(op, False, finish)


def migrate_runs(
    run_ids: list[str], pipeline: Pipeline
) -> Call[maintenance.Rewritten, maintenance.Rewritten]:
    chain = pipeline.migrations
    if chain is None:
        raise InvalidArgument("eager migration needs a store opened with migrations=MigrationChain(...)")
    if not isinstance(run_ids, list | tuple):  # a str would be taken for a list of one-letter ids
        raise InvalidArgument(f"run_ids must be a list of run ids, not {type(run_ids).__name__}")
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

    return Call(loading.read_blobs(digests), False, finish)


def set_retention(run_id: str, policy: Retention | None) -> Call[None, None]:
    return Call(maintenance.set_retention(check_id(run_id), _policy(policy)), True, _same)


def _policy(policy: Any) -> Retention | None:
    if policy is not None and not isinstance(policy, Retention):
        raise InvalidArgument(f"policy must be a safepoint.Retention or None, not {type(policy).__name__}")
    return policy


def prune_run(
    run_id: str, policy: Retention | None, pipeline: Pipeline, dry_run: bool
) -> Call[maintenance.PruneResult, maintenance.PruneResult]:
    chosen = _policy(policy) or pipeline.retention
    op = maintenance.prune_run(check_id(run_id), chosen, now_micros(), dry_run=_flag(dry_run, "dry_run"))
    return Call(op, not dry_run, _same)


def collect_garbage(
    pipeline: Pipeline, grace: float | timedelta, dry_run: bool
) -> Call[maintenance.GcResult, maintenance.GcResult]:
    if pipeline.blobs is None:
        raise InvalidArgument("this store has no blob store (opened with blobs=False): nothing to collect")
    wait = _duration(grace, "grace", low=timedelta(0), high=MAX_AGE)
    op = maintenance.collect_garbage(pipeline.blobs, now_micros(), wait, dry_run=_flag(dry_run, "dry_run"))
    # A dry run deletes nothing and takes no guard: a read-only transaction.
    return Call(op, not dry_run, _same)


def vacuum(dialect: str) -> Call[maintenance.FileSpace | None, maintenance.FileSpace]:
    if dialect != "sqlite":
        raise InvalidArgument(
            f"vacuum is for SQLite stores; {dialect} reuses freed space after autovacuum"
            " (VACUUM FULL is a database administrator's call)"
        )

    def finish(space: maintenance.FileSpace | None) -> maintenance.FileSpace:
        assert space is not None  # a SQLite file always reports its pages
        return space

    return Call(maintenance.vacuum_store(), True, finish)


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
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be an int from 1 to {MAX_LIMIT}")
    if labels is not None and not _label_filter(labels):
        raise InvalidArgument(
            "labels must be a dict of str to str, without NUL characters or lone surrogates"
        )
    if updated_since is not None and not isinstance(updated_since, datetime):
        raise InvalidArgument(f"updated_since must be a datetime or None, not {type(updated_since).__name__}")
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


def _label_filter(labels: Any) -> bool:
    return (
        type(labels) is dict
        and all(type(k) is str and type(v) is str and "\x00" not in k + v for k, v in labels.items())
        and codec.is_plain_json(labels)
    )


def fork(
    run_id: str, step: int | None, new_run_id_: str | None, labels: dict[str, str] | None, pipeline: Pipeline
) -> Call[Checkpoint, Checkpoint]:
    target = check_id(new_run_id_ or new_run_id(), "new_run_id")
    pipeline.guard(validate_fields, Checkpoint(run_id=target, labels={} if labels is None else labels))
    if labels is not None:  # scrubbed like any label a save writes
        labels = pipeline.prepare_save(Checkpoint(run_id=target, labels=labels)).fields.labels
    return Call(run_ops.fork(check_id(run_id), check_step(step), target, labels, now_micros()), True, _same)


def delete_run(run_id: str) -> Call[None, None]:
    return Call(run_ops.delete_run(check_id(run_id)), True, _same)


def enqueue(run_id: str) -> Call[None, None]:
    return Call(leases.enqueue(check_id(run_id), now_micros()), True, _same)


def claim(worker_id: str, lease: float | timedelta) -> Call[Lease | None, Lease | None]:
    return Call(
        leases.claim(check_id(worker_id, "worker_id"), _seconds(lease, "lease"), now_micros()), True, _same
    )


def heartbeat(lease: Lease, extend: float | timedelta | None) -> Call[Lease, Lease]:
    _check_lease(lease)
    duration = lease.duration if extend is None else _seconds(extend, "extend")
    return Call(leases.heartbeat(lease, duration, now_micros()), True, _same)


def release(lease: Lease, status: Status | str | None, requeue: bool) -> Call[None, None]:
    _check_lease(lease)
    new_status = None if status is None else _status(status)
    return Call(leases.release(lease, new_status, _flag(requeue, "requeue"), now_micros()), True, _same)


def requeue(run_id: str) -> Call[None, None]:
    return Call(leases.requeue(check_id(run_id), now_micros()), True, _same)


def hidden_steps(run_id: str) -> Call[list[int], list[int]]:
    return Call(maintenance.hidden_steps(check_id(run_id)), False, _same)


def queue_depth() -> Call[int, int]:
    return Call(leases.queue_depth(now_micros()), False, _same)


def queue_state(run_id: str) -> Call[leases.QueueState, leases.QueueState]:
    return Call(leases.queue_state(check_id(run_id)), False, _same)


def revoke_lease(run_id: str) -> Call[leases.QueueState, leases.QueueState]:
    return Call(leases.revoke_lease(check_id(run_id)), True, _same)


def cancel(run_id: str, pipeline: Pipeline) -> Call[leases.Cancelled, leases.Cancelled]:
    return Call(leases.cancel(check_id(run_id), pipeline.prepare_save, now_micros()), True, _same)


def _check_lease(lease: Any) -> None:
    """Refuse anything but a Lease with fields a store could have returned (naming the field only)."""
    if not isinstance(lease, Lease):
        raise InvalidArgument(f"lease must be a safepoint.Lease (from claim), not {type(lease).__name__}")
    check_id(lease.run_id, "lease.run_id")
    check_id(lease.worker_id, "lease.worker_id")
    if type(lease.epoch) is not int or not 0 <= lease.epoch <= MAX_EPOCH:
        raise InvalidArgument(f"lease.epoch must be an int from 0 to {MAX_EPOCH}")
    _seconds(lease.duration, "lease.duration")


def _flag(value: Any, name: str) -> bool:
    if type(value) is not bool:
        raise InvalidArgument(f"{name} must be True or False, not {type(value).__name__}")
    return value


def _seconds(value: Any, name: str) -> float:
    return _duration(value, name, low=None, high=MAX_LEASE).total_seconds()


def _duration(value: Any, name: str, *, low: timedelta | None, high: timedelta) -> timedelta:
    """``value`` (seconds or a timedelta) as a timedelta within ``low`` (None: above 0) and ``high``."""
    kind = "positive" if low is None else "non-negative"
    problem = f"{name} must be a {kind} number of seconds or a timedelta, at most {high.days} days"
    if isinstance(value, timedelta):
        duration = value
    elif type(value) in (int, float) and math.isfinite(value) and abs(value) <= high.total_seconds():
        duration = timedelta(seconds=value)
    else:
        raise InvalidArgument(problem)
    if duration > high or (duration <= timedelta(0) if low is None else duration < low):
        raise InvalidArgument(problem)
    return duration


_KNOWN_STATUSES = ", ".join(s.value for s in Status)


def _status(status: Any) -> Status:
    if type(status) is Status:
        return status
    if type(status) is str:
        for known in Status:
            if known.value == status:
                return known
    raise InvalidArgument(f"status must be a Status or the value of one ({_KNOWN_STATUSES})")


def _statuses(status: Status | str | Iterable[Status | str]) -> list[str]:
    if isinstance(status, str):
        return [_status(status).value]
    if not isinstance(status, Iterable) or isinstance(status, bytes | bytearray | Mapping):
        raise InvalidArgument(
            f"status must be a Status, the value of one, or a list of them ({_KNOWN_STATUSES})"
        )
    # More entries than statuses exist can only be a mistake: don't walk an endless iterable.
    wanted = list(islice(status, 2 * len(Status) + 1))
    if len(wanted) > 2 * len(Status):
        raise InvalidArgument("status lists at most each status once")
    return [_status(s).value for s in wanted]


def _encode_cursor(row_id: int) -> str:
    return base64.urlsafe_b64encode(str(row_id).encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any) -> int | None:
    """The row id in a cursor this store returned; anything else is refused (never quoted)."""
    if cursor is None:
        return None
    row_id = None
    if type(cursor) is str and 0 < len(cursor) <= _MAX_CURSOR_CHARS and cursor.isascii():
        try:
            row_id = int(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii"))
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            row_id = None
    # Only the exact text _encode_cursor writes: int() also takes " 7", "+7" and "7_0".
    if row_id is None or not 0 <= row_id <= MAX_ROW_ID or _encode_cursor(row_id) != cursor:
        raise InvalidArgument("cursor is not one this store returned: pass page.next_cursor back unchanged")
    return row_id
