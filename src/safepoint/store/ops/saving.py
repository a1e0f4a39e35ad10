"""Saving a checkpoint: the run's next step, in one transaction (``save``).

The run's head is read and locked (``run_head``), fenced against leases and
checked to be the step before, then the new messages, the checkpoint row
and the run row are written. A writer that already knows its run's head
asks first for the whole save as one optional statement (``save_next``);
see ``save`` for how either way ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from safepoint import codec
from safepoint.errors import Conflict, LeaseLost
from safepoint.messagelist import StoredView
from safepoint.model import Checkpoint, ScrubReport
from safepoint.records import Lease
from safepoint.store.query import Op, PlanT, Query, SaveInput
from safepoint.store.query_specs import QUERY_SPECS
from safepoint.store.stored_row import checkpoint_row

from .loading import chain_view, load

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


# Not frozen: made on every save's path, where frozen's object.__setattr__ per field costs
# more than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True)
class SaveResult(Generic[PlanT]):
    plan: PlanT
    ranges: list[tuple[int, int]]
    carriers: list[tuple[int, int]] | None
    digest: bytes
    report: ScrubReport


def save(
    cp: Checkpoint,
    prepared: SaveInput[PlanT],
    view: StoredView | None,
    plan: PlanT | None,
    *,
    now: int,
    lease: Lease | None = None,
) -> Op[SaveResult[PlanT]]:
    """Append ``cp`` as the run's next step: new messages, the checkpoint row, the run row.

    ``prepared`` holds the scrubbed header fields; ``plan`` was worked out
    before the transaction from ``view``; if the run's head turns out not to
    be that view (another object saved since) the plan is redone against the
    head, and a save with no view to plan against (None: a checkpoint built
    from scratch in a process that never saw the run) is planned here.

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
    labels = prepared.fields.labels_text()
    guessed = _guess(cp, prepared, view, plan, labels=labels, now=now)
    if guessed is not None:
        assert view is not None
        # Into the save's one parameter dict (no copy of it): the other statements ignore them.
        guessed[1].update(
            head_digest=view.digest,
            lease_owner=None if lease is None else lease.worker_id,
            lease_epoch=None if lease is None else lease.epoch,
        )
        if (yield Query("save_next", guessed[1], optional=True)):
            return guessed[2]

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
            detail="the run is leased by a worker or held by an open Run; save with its lease",
        )
    if run_ref is None:
        if cp.step != 0:
            raise Conflict(cp.run_id, cp.step, None)
        if plan is None or plan.keep:  # the view belonged to a run that was deleted since
            plan = prepared.plan(None, cp.messages)
    else:
        if cp.step != head_step + 1:
            raise Conflict(cp.run_id, cp.step, head_step)
        if plan is None or view is None or view.digest != bytes(head_row.head_digest):
            plan = yield from _plan_against_head(cp, prepared, head_step, view, run_ref)

    if guessed is not None and guessed[0] == first_seq and guessed[2].plan is plan:
        # The head was as guessed (a driver without save_next, the usual case
        # on SQLite): the parameters are the ones built for save_next.
        _, row, result = guessed
        row["run_ref"] = run_ref
    else:
        row, result = _save_row(
            cp, prepared, plan, labels=labels, first_seq=first_seq, run_ref=run_ref, now=now
        )
    if prepared.blobs is not None:
        row["blobs"] = prepared.blob_digests()
        if row["blobs"] is not None:
            # Held until commit; garbage collection takes it exclusively.
            yield Query("blob_guard_shared")
            pending = prepared.pending_blobs()
            if pending:  # durable before the row that references them commits
                # Database target: inserted here. External: uploaded before the
                # transaction (methods.checkpoints.save_call); here only re-checked, and put again
                # if a GC removed one since (blob_targets.py).
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


def _plan_against_head(
    cp: Checkpoint, prepared: SaveInput[PlanT], head_step: int, view: StoredView | None, run_ref: int
) -> Op[PlanT]:
    """The delta against the run's head, read in the save's transaction: by its
    chain values where its rows have them (no body read), else loaded whole. A ``view`` of
    the head step itself that is not the head was held from before a redaction rewrote it:
    ``Conflict`` (``_refuse_if_redacted``)."""
    if view is not None and view.step == head_step and view.run_id == cp.run_id:
        yield from _refuse_if_redacted(cp, head_step, run_ref)
    head_view = yield from chain_view(cp.run_id, head_step)
    if head_view is None:
        head = yield from load(cp.run_id, head_step)
        head_view = head.stored_view
    return prepared.plan(head_view, cp.messages)


def _refuse_if_redacted(cp: Checkpoint, head_step: int, run_ref: int) -> Op[None]:
    """``Conflict`` when the writer's view of the head step is from before a redaction
    rewrote that step (``safepoint redact``): planned against the head, its messages —
    which still hold what the redaction took out — would be written back. It reloads."""
    rows = yield Query("redacted_head", {"run_ref": run_ref})
    if rows and rows[0].head_step is not None and rows[0].head_step == head_step:
        raise Conflict(
            cp.run_id,
            cp.step,
            head_step,
            detail="the run was redacted since this checkpoint was loaded; load it again",
        )


def _guess(
    cp: Checkpoint,
    prepared: SaveInput[PlanT],
    view: StoredView | None,
    plan: PlanT | None,
    *,
    labels: str,
    now: int,
) -> tuple[int, dict[str, Any], SaveResult[PlanT]] | None:
    """The save's parameters if ``view`` is the run's head (with its next free seq); None when
    the save must go the general way from the start (another run's view, a new run, blobs)."""
    if plan is None or view is None or view.run_id != cp.run_id or cp.step != view.step + 1:
        return None
    if prepared.blobs is not None and prepared.blob_digests() is not None:
        return None
    # The run's next free seq is where the view's log ends, unless a rewrite
    # dropped its tail (then save_next finds another and declines).
    first_seq = view.ranges[-1][1] if view.ranges else 0
    row, result = _save_row(cp, prepared, plan, labels=labels, first_seq=first_seq, run_ref=None, now=now)
    return first_seq, row, result


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
    carriers = plan.carriers(first_seq, cp.step)
    added = plan.chains[plan.total - len(plan.bodies) : plan.total]  # the new messages' chain values
    report = prepared.report()
    row = checkpoint_row(
        cp,
        prepared.fields,
        created_at=now,
        count=plan.total,
        chain=plan.chains[-1] if plan.chains else codec.EMPTY_CHAIN,
        report=report,
        ranges=ranges,
        carriers=carriers,
        chains=b"".join(added),
        bodies=plan.bodies,
        labels=labels,
    )
    digest = row["digest"]
    # One item at a time: ``row.update(run_id=..., ...)`` builds a keyword dict first, on every save.
    row["run_id"] = cp.run_id
    row["run_ref"] = run_ref
    row["now"] = now
    row["next_seq"] = first_seq + len(plan.bodies)
    row["parent_run_id"] = row["parent_step"] = row["blobs"] = None
    row["first_seq"] = first_seq
    return row, SaveResult(plan, ranges, carriers, digest, report)


def lease_detail(lease: Lease, owner: str | None, epoch: int) -> str:
    """Whose lease the run is under now, without the worker id: ids are chosen by
    whoever runs a worker (host names, pids, tokens), and error texts get logged."""
    if owner is None:
        return f"the run is not leased (current epoch {epoch})"
    who = "this worker" if owner == lease.worker_id else "another worker"
    return f"{who} holds epoch {epoch}"
