"""Every store operation, written once, as a generator of named queries.

An operation yields ``Query`` objects and receives each one's rows back; it
never touches a connection. A driver (SQLite now, PostgreSQL and async
drivers next) opens the transaction, runs the queries the operation asks for
and commits when the generator returns — or rolls back when it raises. This
is how sync and async stores share one implementation of each operation.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from safepoint import codec
from safepoint.blobs.base import BlobRef
from safepoint.errors import Conflict, LeaseLost, NotFound, SafepointError, StoreError
from safepoint.messagelist import MessageList, StoredView
from safepoint.model import (
    Checkpoint,
    CheckpointInfo,
    Lease,
    ParentRef,
    RunInfo,
    ScrubReport,
    Status,
    from_micros,
    to_micros,
)

from .offload import BLOB_MARK, find_refs
from .pipeline import PreparedSave, StoredFields
from .serialize import (
    MessagePlan,
    decode_checkpoint,
    header_bytes,
    pack_bodies,
    select_bodies,
)

Row = tuple[Any, ...]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Query:
    """Run the named query with ``params``; or, with ``many``, once per dict in it."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    many: list[dict[str, Any]] | None = None


Op = Generator[Query, list[Row], T]
_NO_RUN: Row = (0, None, None, None, None, None, 0, None, False)


@dataclass(frozen=True, slots=True)
class SaveResult:
    plan: MessagePlan
    ranges: list[tuple[int, int]]
    digest: bytes
    report: ScrubReport


def save(
    cp: Checkpoint,
    prepared: PreparedSave,
    view: StoredView | None,
    plan: MessagePlan,
    *,
    now: int,
    lease: Lease | None = None,
) -> Op[SaveResult]:
    """Append ``cp`` as the run's next step: new messages, the checkpoint row, the run row.

    ``prepared`` holds the scrubbed header fields; ``plan`` was worked out
    before the transaction from ``view``; if the run's head turns out not to
    be that view (another object saved since, or the checkpoint was built from
    scratch) the plan is redone against the head.
    """
    fields = prepared.fields
    labels = codec.encode(fields.labels).decode()
    rows = yield Query("run_head", {"run_id": cp.run_id, "labels": labels})
    # (next free seq, run row id, head step, head digest, status, lease owner,
    # epoch, expiry, whether the run row needs advance_run); a dialect may
    # return no row for a run that does not exist yet.
    first_seq, run_ref, head_step, head_digest, head_status, owner, epoch, expires, stale = (
        rows[0] if rows else _NO_RUN
    )
    # Fencing, checked inside the write transaction: a stale owner changes nothing.
    if lease is not None:
        if run_ref is None or owner != lease.worker_id or epoch != lease.epoch:
            raise LeaseLost(lease.run_id, lease.epoch, _lease_detail(owner, epoch))
    elif owner is not None and expires is not None and expires > now:
        raise Conflict(
            cp.run_id,
            cp.step,
            head_step,
            detail=f"run {cp.run_id!r} is leased by worker {owner!r}; save with its lease",
        )
    if run_ref is None:
        if cp.step != 0:
            raise Conflict(cp.run_id, cp.step, None)
        if plan.keep:  # the view belonged to a run that was deleted since
            plan = prepared.plan(None, cp.messages)
    else:
        if cp.step != head_step + 1:
            raise Conflict(cp.run_id, cp.step, head_step)
        if view is None or view.digest != bytes(head_digest):
            head = yield from _load(cp.run_id, head_step)
            plan = prepared.plan(head.stored_view, cp.messages)

    ranges = plan.ranges(first_seq)
    report = prepared.report()
    chain = plan.chains[-1] if plan.chains else codec.EMPTY_CHAIN
    header = header_bytes(cp, fields, created_at=now, count=plan.total, chain=chain, report=report)
    digest = codec.digest(header)
    status = cp.status.value
    # One parameter dict serves every statement of the save (each query takes
    # the names it uses; dialects ignore the rest).
    row = {
        "run_id": cp.run_id,
        "run_ref": run_ref,
        "status": status,
        "step": cp.step,
        "schema_version": cp.schema_version,
        "labels": labels,
        "counters": codec.encode(fields.counters).decode(),
        "digest": digest,
        "now": now,
        "next_seq": first_seq + len(plan.bodies),
        "parent_run_id": None,
        "parent_step": None,
        "message_count": plan.total,
        "ranges": codec.encode(ranges).decode(),
        "header": header,
        # The new messages travel in the checkpoint's own row: one row, one
        # B-tree leaf per save, however many messages it adds.
        "first_seq": first_seq,
        "added": len(plan.bodies),
        "messages": pack_bodies(plan.bodies),
        "blobs": None,
    }
    if prepared.blobs is not None:
        row["blobs"] = prepared.blob_digests()
        if row["blobs"] is not None:
            # Held until commit; garbage collection takes it exclusively.
            yield Query("blob_guard_shared")
            pending = prepared.pending_blobs()
            if pending:  # durable before the row that references them commits
                yield from prepared.blobs.write(pending, now)
    if run_ref is None:
        inserted = yield Query("insert_run", row)
        if not inserted:  # ON CONFLICT DO NOTHING: a concurrent writer created the run first
            raise Conflict(
                cp.run_id, cp.step, None, detail=f"run {cp.run_id!r} was created by another writer"
            )
        row["run_ref"] = inserted[0][0]
    else:
        if stale:  # SQLite: only when the labels changed; PostgreSQL keeps the head there
            yield Query("advance_run", row)
        if head_status != status:
            yield Query("set_run_status", row)
    yield Query("insert_checkpoint", row)
    return SaveResult(plan, ranges, digest, report)


def load(run_id: str, step: int | None) -> Op[Checkpoint]:
    """The latest checkpoint of the run, or the one at ``step``; two queries either way."""
    return (yield from _load(run_id, step))


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loaded checkpoint as stored, and where its blob references are.

    ``blob_messages`` are the indexes of messages that hold references;
    ``stored_blobs`` the referenced values the database blob target read in
    the same transaction (still in their stored framing).
    """

    checkpoint: Checkpoint
    blob_messages: list[int]
    has_blobs: bool
    stored_blobs: dict[str, bytes]


def load_for_reading(run_id: str, step: int | None, *, blobs_in_database: bool) -> Op[Loaded]:
    """``load``, noting blob references (and reading them, for the database target)."""
    checkpoint, bodies, header = yield from _load_with_bodies(run_id, step, with_header=True)
    indexes = [i for i, body in enumerate(bodies) if BLOB_MARK in body]
    has_blobs = bool(indexes) or BLOB_MARK in header
    stored: dict[str, bytes] = {}
    if has_blobs and blobs_in_database:
        refs: list[BlobRef] = []
        for name in ("pending_action", "cursors", "state"):
            find_refs(getattr(checkpoint, name), refs)
        for index in indexes:
            find_refs(checkpoint.messages[index], refs)
        digests = sorted({ref.digest for ref in refs})
        rows = yield Query("select_blobs", {"digests": codec.encode(digests).decode()})
        stored = {digest: bytes(data) for digest, data in rows}
    return Loaded(checkpoint, indexes, has_blobs, stored)


def _load(run_id: str, step: int | None) -> Op[Checkpoint]:
    checkpoint: Checkpoint
    checkpoint, _bodies = yield from _load_with_bodies(run_id, step)
    return checkpoint


def _load_with_bodies(run_id: str, step: int | None, *, with_header: bool = False) -> Op[Any]:
    if step is None:
        rows = yield Query("checkpoint_latest", {"run_id": run_id})
    else:
        rows = yield Query("checkpoint_at", {"run_id": run_id, "step": step})
    if not rows:
        raise NotFound(run_id, step)
    run_ref, found_step, ranges, header, digest = rows[0]
    # The rows of the run whose added messages overlap the ranges, in order.
    carriers = yield Query("view_messages", {"run_ref": run_ref, "ranges": ranges})
    bodies = select_bodies(carriers, ranges)
    checkpoint = decode_checkpoint(
        run_id=run_id,
        step=found_step,
        header=header,
        stored_digest=digest,
        ranges_json=ranges,
        bodies=bodies,
    )
    if with_header:
        return checkpoint, bodies, bytes(header)
    return checkpoint, bodies


def read_blobs(digests: list[str]) -> Op[dict[str, bytes]]:
    """Stored blobs of the database blob target, by digest (as stored: framed, unverified)."""
    if not digests:
        return {}
    rows = yield Query("select_blobs", {"digests": codec.encode(sorted(set(digests))).decode()})
    return {digest: bytes(data) for digest, data in rows}


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
    )


def fork(
    run_id: str, step: int | None, new_run_id: str, labels: dict[str, str] | None, now: int
) -> Op[Checkpoint]:
    """Start ``new_run_id`` from a verified copy of ``run_id``'s checkpoint at ``step``."""
    source, bodies = yield from _load_with_bodies(run_id, step)
    rows = yield Query("run_head", {"run_id": new_run_id, "labels": None})
    _next_seq, exists, *_ = rows[0] if rows else _NO_RUN
    if exists is not None:
        raise Conflict(
            new_run_id,
            source.step,
            None,
            detail=f"cannot fork into run {new_run_id!r}: it already exists",
        )
    view = source.stored_view
    assert view is not None  # a loaded checkpoint always carries its view
    forked = Checkpoint(
        run_id=new_run_id,
        step=source.step,
        schema_version=source.schema_version,
        counters=source.counters,
        pending_action=source.pending_action,
        cursors=source.cursors,
        state=source.state,
        status=source.status,
        labels=source.labels if labels is None else labels,
        parent=ParentRef(run_id, source.step),
    )
    header = header_bytes(
        forked, StoredFields.of(forked), created_at=now, count=view.count, chain=view.chain_at(view.count)
    )
    digest = codec.digest(header)
    # The fork owns a copy of the messages it sees, numbered from its own log's start.
    first_seq = 0
    ranges = [(0, view.count)] if view.count else []
    inserted = yield Query(
        "insert_run",
        {
            "run_id": new_run_id,
            "status": forked.status.value,
            "step": forked.step,
            "schema_version": forked.schema_version,
            "labels": codec.encode(forked.labels).decode(),
            "counters": codec.encode(forked.counters).decode(),
            "parent_run_id": run_id,
            "parent_step": source.step,
            "digest": digest,
            "now": now,
            "next_seq": first_seq + view.count,
        },
    )
    if not inserted:
        raise Conflict(
            new_run_id, source.step, None, detail=f"run {new_run_id!r} was created by another writer"
        )
    new_ref = inserted[0][0]
    yield Query(
        "insert_checkpoint",
        {
            "run_ref": new_ref,
            "step": forked.step,
            "schema_version": forked.schema_version,
            "status": forked.status.value,
            "now": now,
            "message_count": view.count,
            "ranges": codec.encode(ranges).decode(),
            "header": header,
            "digest": digest,
            "first_seq": first_seq,
            "added": len(bodies),
            "messages": pack_bodies(bodies),
            "blobs": _referenced_blobs(header, bodies),
        },
    )
    new_view = StoredView(
        new_run_id, forked.step, digest, view.count, view.chains[: view.count], tuple(ranges)
    )
    object.__setattr__(forked, "messages", MessageList(source.messages, new_view))
    forked.created_at = from_micros(now)
    forked.digest = digest.hex()
    return forked


def _referenced_blobs(header: bytes, bodies: list[bytes]) -> str | None:
    """The ``blobs`` column for a row holding ``header`` and carrying ``bodies``."""
    refs: list[BlobRef] = []
    for data in (header, *bodies):
        if BLOB_MARK in data:
            find_refs(codec.decode(data), refs)
    return codec.encode(sorted({ref.digest for ref in refs})).decode() if refs else None


def _lease_detail(owner: str | None, epoch: int) -> str:
    if owner is None:
        return f"the run is not leased (current epoch {epoch})"
    return f"worker {owner!r} holds epoch {epoch}"


def enqueue(run_id: str, now: int) -> Op[None]:
    """Queue the run for workers (idempotent; keeps its place if already queued)."""
    rows = yield Query("enqueue", {"run_id": run_id, "now": now})
    if not rows:
        raise NotFound(run_id)


def claim(worker_id: str, duration: float, now: int) -> Op[Lease | None]:
    """Take one queued run whose lease is free or expired; None when there is none."""
    expires = now + int(duration * 1_000_000)
    rows = yield Query("claim", {"worker_id": worker_id, "now": now, "expires_at": expires})
    if not rows:
        return None
    run_id, epoch, expires_at = rows[0]
    return Lease(run_id, worker_id, epoch, from_micros(expires_at), duration)


def heartbeat(lease: Lease, duration: float, now: int) -> Op[Lease]:
    """Extend the lease from now; LeaseLost if it is no longer current."""
    expires = now + int(duration * 1_000_000)
    params = {
        "run_id": lease.run_id,
        "worker_id": lease.worker_id,
        "epoch": lease.epoch,
        "expires_at": expires,
    }
    rows = yield Query("heartbeat", params)
    if not rows:
        yield from _raise_lease_lost(lease)
    return Lease(lease.run_id, lease.worker_id, lease.epoch, from_micros(rows[0][0]), duration)


def release(lease: Lease, status: Status | None, requeue: bool, now: int) -> Op[None]:
    """Give the run back; with ``requeue`` it stays queued for the next worker."""
    rows = yield Query(
        "release",
        {
            "run_id": lease.run_id,
            "worker_id": lease.worker_id,
            "epoch": lease.epoch,
            "status": None if status is None else status.value,
            "requeue": requeue,
            "now": now,
        },
    )
    if not rows:
        yield from _raise_lease_lost(lease)


def _raise_lease_lost(lease: Lease) -> Op[None]:
    rows = yield Query("lease_state", {"run_id": lease.run_id})
    if not rows:
        raise NotFound(lease.run_id)
    owner, epoch = rows[0]
    raise LeaseLost(lease.run_id, lease.epoch, _lease_detail(owner, epoch))


def delete_run(run_id: str) -> Op[None]:
    """Remove the run with all its checkpoints and messages."""
    rows = yield Query("run_exists", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    run_ref = rows[0][0]
    for name in ("delete_checkpoints", "delete_run"):
        yield Query(name, {"run_ref": run_ref})


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What ``rewrite_heads`` did: runs rewritten, and runs whose rewrite failed."""

    rewritten: list[str]
    failed: list[tuple[str, int, SafepointError]]


def rewrite_heads(
    run_ids: list[str],
    rewrite: Callable[[Checkpoint], Checkpoint | None],
    prepare: Callable[[Checkpoint], PreparedSave],
    now: int,
) -> Op[Rewritten]:
    """Replace each run's head checkpoint in place by ``rewrite(head)``, in one transaction.

    For eager migration: ``rewrite`` returns the migrated checkpoint, or None
    when the head needs nothing. A run whose rewrite raises a safepoint error
    is left as it is and reported; the others are still rewritten.
    """
    done: list[str] = []
    failed: list[tuple[str, int, SafepointError]] = []
    for run_id in run_ids:
        rows = yield Query("run_head", {"run_id": run_id, "labels": None})
        next_seq, run_ref, head_step, *_ = rows[0] if rows else _NO_RUN
        if run_ref is None:
            continue  # deleted since it was listed
        head = yield from _load(run_id, head_step)
        try:
            new = rewrite(head)
            if new is None:
                continue
            prepared = prepare(new)
            plan = prepared.plan(head.stored_view, new.messages)
        except SafepointError as exc:
            failed.append((run_id, head_step, exc))
            continue
        ((first_seq, added, packed),) = yield Query("head_messages", {"run_ref": run_ref, "step": head_step})
        if first_seq + added != next_seq:
            raise StoreError(f"run {run_id!r}: its head row does not end the message log; not rewritten")
        carried = [bytes(packed)] if packed is not None else []
        fields = prepared.fields
        chain = plan.chains[-1] if plan.chains else codec.EMPTY_CHAIN
        assert head.created_at is not None
        header = header_bytes(
            new,
            fields,
            created_at=to_micros(head.created_at),
            count=plan.total,
            chain=chain,
            report=prepared.report(),
        )
        row = {
            "run_ref": run_ref,
            "step": head_step,
            "schema_version": new.schema_version,
            "status": new.status.value,
            "message_count": plan.total,
            "ranges": codec.encode(plan.ranges(next_seq)).decode(),
            "header": header,
            "digest": codec.digest(header),
            "added": added + len(plan.bodies),
            "messages": pack_bodies(carried + plan.bodies),
            "labels": codec.encode(fields.labels).decode(),
            "counters": codec.encode(fields.counters).decode(),
            "next_seq": next_seq + len(plan.bodies),
            "now": now,
        }
        yield Query("rewrite_checkpoint", row)
        yield Query("rewrite_run_head", row)
        done.append(run_id)
    return Rewritten(done, failed)
