"""Every store operation, written once, as a generator of named queries.

An operation yields ``Query`` objects and receives each one's rows back; it
never touches a connection. A driver (SQLite now, PostgreSQL and async
drivers next) opens the transaction, runs the queries the operation asks for
and commits when the generator returns — or rolls back when it raises. This
is how sync and async stores share one implementation of each operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, cast

from safepoint import codec
from safepoint.blobs.base import BlobRef
from safepoint.errors import Conflict, CorruptCheckpoint, LeaseLost, NotFound
from safepoint.messagelist import MessageList, StoredView
from safepoint.model import (
    Checkpoint,
    Lease,
    ParentRef,
    ScrubReport,
    from_micros,
)

from .offload import BLOB_MARK, find_refs, find_stored_refs
from .pipeline import StoredFields
from .query import QUERY_SPECS, Loaded, NamedRow, Op, PlanT, Query, SaveInput
from .references import typed_checkpoint
from .serialize import (
    decode_checkpoint,
    header_bytes,
    pack_bodies,
    parse_ranges,
    select_bodies,
)

# What run_head means for a run that does not exist yet (a dialect may return no row).
NO_RUN = QUERY_SPECS["run_head"].row.of(
    next_seq=0,
    run_ref=None,
    head_step=None,
    head_digest=None,
    status=None,
    lease_owner=None,
    lease_epoch=0,
    lease_expires_at=None,
    needs_advance=False,
)


@dataclass(frozen=True, slots=True)
class SaveResult(Generic[PlanT]):
    plan: PlanT
    ranges: list[tuple[int, int]]
    digest: bytes
    report: ScrubReport


def save(
    cp: Checkpoint,
    prepared: SaveInput[PlanT],
    view: StoredView | None,
    plan: PlanT,
    *,
    now: int,
    lease: Lease | None = None,
) -> Op[SaveResult[PlanT]]:
    """Append ``cp`` as the run's next step: new messages, the checkpoint row, the run row.

    ``prepared`` holds the scrubbed header fields; ``plan`` was worked out
    before the transaction from ``view``; if the run's head turns out not to
    be that view (another object saved since, or the checkpoint was built from
    scratch) the plan is redone against the head.

    A writer whose ``view`` is its run's head (it saved or loaded it: most
    saves) asks first for ``save_next``, an optional query: the whole save as
    one statement that writes only where the head, the next free seq and the
    lease are as ``view`` and ``lease`` say — the checks below, in SQL. A
    dialect that has it (PostgreSQL: one round trip instead of three) either
    wrote the save or wrote nothing; a driver without it answers
    ``UNSUPPORTED``. Either way nothing was written, and the general way
    below runs (in a new transaction after PostgreSQL's, which committed
    nothing), raising ``Conflict`` or ``LeaseLost`` or re-planning as it
    always does. A save that starts a run or references blobs takes the
    general way from the start.
    """
    labels = codec.encode(prepared.fields.labels).decode()
    if (
        view is not None
        and view.run_id == cp.run_id
        and cp.step == view.step + 1
        and (prepared.blobs is None or prepared.blob_digests() is None)
    ):
        # The run's next free seq is where the view's log ends, unless a
        # rewrite dropped its tail (then save_next finds another and declines).
        first_seq = view.ranges[-1][1] if view.ranges else 0
        row, result = _save_row(cp, prepared, plan, labels=labels, first_seq=first_seq, run_ref=None, now=now)
        guards = {
            "head_digest": view.digest,
            "lease_owner": None if lease is None else lease.worker_id,
            "lease_epoch": None if lease is None else lease.epoch,
        }
        if (yield Query("save_next", row | guards, optional=True)):
            return result

    rows = yield Query("run_head", {"run_id": cp.run_id, "labels": labels})
    head_row = rows[0] if rows else NO_RUN
    first_seq, run_ref, head_step = head_row.next_seq, head_row.run_ref, head_row.head_step
    owner, epoch, expires = head_row.lease_owner, head_row.lease_epoch, head_row.lease_expires_at
    # Fencing, checked inside the write transaction: a stale owner changes nothing.
    if lease is not None:
        if run_ref is None or owner != lease.worker_id or epoch != lease.epoch:
            raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, owner, epoch))
    elif owner is not None and expires is not None and expires > now:
        raise Conflict(
            cp.run_id,
            cp.step,
            head_step,
            detail="the run is leased by a worker; save with its lease",
        )
    if run_ref is None:
        if cp.step != 0:
            raise Conflict(cp.run_id, cp.step, None)
        if plan.keep:  # the view belonged to a run that was deleted since
            plan = prepared.plan(None, cp.messages)
    else:
        if cp.step != head_step + 1:
            raise Conflict(cp.run_id, cp.step, head_step)
        if view is None or view.digest != bytes(head_row.head_digest):
            head = yield from _load(cp.run_id, head_step)
            plan = prepared.plan(head.stored_view, cp.messages)

    row, result = _save_row(cp, prepared, plan, labels=labels, first_seq=first_seq, run_ref=run_ref, now=now)
    if prepared.blobs is not None:
        row["blobs"] = prepared.blob_digests()
        if row["blobs"] is not None:
            # Held until commit; garbage collection takes it exclusively.
            yield Query("blob_guard_shared")
            pending = prepared.pending_blobs()
            if pending:  # durable before the row that references them commits
                # Database target: inserted here. External: uploaded before the
                # transaction (calls.save); here only re-checked, and put again
                # if a GC removed one since (blobio.py).
                yield from prepared.blobs.write(pending, now)
    if run_ref is None:
        inserted = yield Query("insert_run", row)
        if not inserted:  # ON CONFLICT DO NOTHING: a concurrent writer created the run first
            raise Conflict(
                cp.run_id, cp.step, None, detail=f"run {cp.run_id!r} was created by another writer"
            )
        row["run_ref"] = inserted[0].run_ref
    else:
        if head_row.needs_advance:  # SQLite: only when the labels changed; PostgreSQL keeps the head there
            yield Query("advance_run", row)
        if head_row.status != row["status"]:
            yield Query("set_run_status", row)
    yield Query("insert_checkpoint", row)
    return result


def _save_row(
    cp: Checkpoint,
    prepared: SaveInput[PlanT],
    plan: PlanT,
    *,
    labels: str,
    first_seq: int,
    run_ref: int | None,
    now: int,
) -> tuple[dict[str, Any], SaveResult[PlanT]]:
    """The save's parameters when its new messages get seqs from ``first_seq`` on, and its result.

    One parameter dict serves every statement of the save, save_next's
    included (each query takes the names its spec declares; dialects ignore
    the rest); ``blobs`` is the general way's to fill in.
    """
    ranges = plan.ranges(first_seq)
    report = prepared.report()
    chain = plan.chains[-1] if plan.chains else codec.EMPTY_CHAIN
    header = header_bytes(cp, prepared.fields, created_at=now, count=plan.total, chain=chain, report=report)
    digest = codec.digest(header)
    row = {
        "run_id": cp.run_id,
        "run_ref": run_ref,
        "status": cp.status.value,
        "step": cp.step,
        "schema_version": cp.schema_version,
        "labels": labels,
        "counters": codec.encode(prepared.fields.counters).decode(),
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
    return row, SaveResult(plan, ranges, digest, report)


def load(run_id: str, step: int | None) -> Op[Checkpoint]:
    """The latest checkpoint of the run, or the one at ``step``; two queries either way."""
    return (yield from _load(run_id, step))


def load_for_reading(run_id: str, step: int | None, *, blobs_in_database: bool) -> Op[Loaded]:
    """``load`` as a caller sees it (store-written references typed), noting blob
    references (and reading them, for the database target)."""
    checkpoint, bodies, header = yield from load_typed(run_id, step)
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
        stored = {row.digest: bytes(row.data) for row in rows}
    return Loaded(checkpoint, indexes, has_blobs, stored)


def load_typed(run_id: str, step: int | None) -> Op[tuple[Checkpoint, list[bytes], bytes]]:
    """The checkpoint as callers see it (``references.typed_checkpoint``), with
    its message bodies and header as stored."""
    checkpoint, bodies, header, stored_format = yield from _load_with_bodies(run_id, step)
    return typed_checkpoint(checkpoint, stored_format, bodies, header), bodies, header


def _load(run_id: str, step: int | None) -> Op[Checkpoint]:
    checkpoint: Checkpoint
    checkpoint, *_ = yield from _load_with_bodies(run_id, step)
    return checkpoint


def _load_with_bodies(run_id: str, step: int | None) -> Op[tuple[Checkpoint, list[bytes], bytes, int]]:
    """The checkpoint in stored form, its bodies and header as stored, and its stored format."""
    if step is None:
        rows = yield Query("checkpoint_latest", {"run_id": run_id})
    else:
        rows = yield Query("checkpoint_at", {"run_id": run_id, "step": step})
    if not rows:
        raise NotFound(run_id, step)
    found = rows[0]
    run_ref, found_step, ranges, header, digest = (
        found.run_ref,
        found.step,
        found.ranges,
        found.header,
        found.digest,
    )
    if step is None:
        _check_head(run_id, found)
    try:
        spans = parse_ranges(ranges)
    except ValueError:
        raise CorruptCheckpoint(run_id, found_step, "its message ranges are not what a save writes") from None
    # The rows of the run whose added messages overlap the ranges, in order.
    carriers = yield Query("view_messages", {"run_ref": run_ref, "ranges": codec.encode(spans).decode()})
    bodies = select_bodies(cast(list[tuple[Any, ...]], carriers), spans)
    checkpoint, stored_format = decode_checkpoint(
        run_id=run_id,
        step=found_step,
        header=header,
        stored_digest=digest,
        ranges_json=ranges,
        bodies=bodies,
    )
    return checkpoint, bodies, bytes(header), stored_format


def _check_head(run_id: str, row: NamedRow) -> None:
    """The run row's head (PostgreSQL keeps it there) against the checkpoint rows.

    ``row`` is checkpoint_latest's: the row at the head step (its step None:
    no such row), the run row's head step and digest, the highest stored
    step. A head moved back would load an older checkpoint and make every
    later save conflict; a head row deleted would look like a run that does
    not exist. On SQLite the head *is* the
    highest row, so these always agree (docs/operations.md says what that
    cannot catch).
    """
    found, digest, head_step, head_digest, last = (
        row.step,
        row.digest,
        row.head_step,
        row.head_digest,
        row.last_step,
    )
    if type(head_step) is not int:
        raise CorruptCheckpoint(run_id, last if type(last) is int else None, "the run row has no head step")
    if found is None:
        raise CorruptCheckpoint(run_id, head_step, "the run's head checkpoint row is missing")
    if last != head_step:
        raise CorruptCheckpoint(
            run_id, last, f"the run row's head is step {head_step}, but step {last} is stored"
        )
    if head_digest is None or bytes(head_digest) != bytes(digest):
        raise CorruptCheckpoint(run_id, head_step, "the run row's head digest does not match the checkpoint")


def read_blobs(digests: list[str]) -> Op[dict[str, bytes]]:
    """Stored blobs of the database blob target, by digest (as stored: framed, unverified)."""
    if not digests:
        return {}
    rows = yield Query("select_blobs", {"digests": codec.encode(sorted(set(digests))).decode()})
    return {row.digest: bytes(row.data) for row in rows}


def fork(
    run_id: str, step: int | None, new_run_id: str, labels: dict[str, str] | None, now: int
) -> Op[Checkpoint]:
    """Start ``new_run_id`` from a verified copy of ``run_id``'s checkpoint at ``step``.

    The copy is byte for byte the stored form (header fields and message
    bodies), under the source's stored format and scrub report, so its
    references mean what they meant in the source.
    """
    source, bodies, _header, stored_format = yield from _load_with_bodies(run_id, step)
    rows = yield Query("run_head", {"run_id": new_run_id, "labels": None})
    if (rows[0] if rows else NO_RUN).run_ref is not None:
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
        forked,
        StoredFields.of(forked),
        created_at=now,
        count=view.count,
        chain=view.chain_at(view.count),
        report=source.scrub_report,
        stored_format=stored_format,
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
    new_ref = inserted[0].run_ref
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
    forked.scrub_report = source.scrub_report
    return typed_checkpoint(forked, stored_format, bodies, header)


def _referenced_blobs(header: bytes, bodies: list[bytes]) -> str | None:
    """The ``blobs`` column for a row holding ``header`` and carrying ``bodies``."""
    digests: list[str] = []
    for data in (header, *bodies):
        if BLOB_MARK in data:
            find_stored_refs(codec.decode(data), digests)
    return codec.encode(sorted(set(digests))).decode() if digests else None


def lease_detail(lease: Lease, owner: str | None, epoch: int) -> str:
    """Whose lease the run is under now, without the worker id: ids are chosen by
    whoever runs a worker (host names, pids, tokens), and error texts get logged."""
    if owner is None:
        return f"the run is not leased (current epoch {epoch})"
    who = "this worker" if owner == lease.worker_id else "another worker"
    return f"{who} holds epoch {epoch}"


def delete_run(run_id: str) -> Op[None]:
    """Remove the run with all its checkpoints and messages."""
    rows = yield Query("run_exists", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    run_ref = rows[0].run_ref
    for name in ("delete_checkpoints", "delete_run"):
        yield Query(name, {"run_ref": run_ref})
