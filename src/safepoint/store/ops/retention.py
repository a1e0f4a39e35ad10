"""Retention, as operations (generators of named queries): which checkpoints a run keeps.

``prune_run`` decides, per run, which checkpoints to keep — the last N, those
younger than a duration, always the head — and removes the rest. A checkpoint
row also carries the messages its save added, and a kept checkpoint may still
see some of them; such a row is not deleted but turned into a *carrier*:
``pruned`` set, header emptied, so ``load``/``history`` no longer see the
checkpoint while every kept checkpoint still loads exactly. A carrier no kept
checkpoint needs any more is deleted. Finished runs older than a duration are
deleted whole — except, under the store-wide policy, a run labelled
``safepoint.keep_finished=true``: an adapter's thread that reached its end
and may go on (the LangGraph saver's, unless told otherwise).

A dry run reads only: it takes no lock (on PostgreSQL a read-only
transaction refuses ``FOR UPDATE``), so what it reports is what a real run
would have done at that moment. ``safepoint.store.admin.prune_store`` applies
retention to every run, one transaction each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from safepoint import codec
from safepoint.errors import NotFound
from safepoint.model import Status
from safepoint.records import Retention, from_micros
from safepoint.store.large_values import BLOB_MARK, digests_json, stored_digests
from safepoint.store.query import Op, Query, Row

KEEP_FINISHED = {"safepoint.keep_finished": "true"}  # the label that keeps a finished run: see prune_run
_FINISHED = frozenset({Status.DONE.value, Status.FAILED.value, Status.CANCELLED.value})


@dataclass(slots=True)
class PruneResult:
    """What retention did to one run (or would do, in a dry run)."""

    run_id: str
    pruned_steps: list[int] = field(default_factory=list)
    rows_deleted: int = 0
    run_deleted: bool = False
    # Stored bytes of what was removed: deleted rows whole, the headers of rows
    # kept as message carriers (as stored, before PostgreSQL's compression).
    bytes_deleted: int = 0


def set_retention(run_id: str, policy: Retention | None) -> Op[None]:
    """Give the run its own retention policy (``None``: follow the store's)."""
    value = None if policy is None else codec.encode(policy.to_json()).decode()
    rows = yield Query("set_run_retention", {"run_id": run_id, "retention": value})
    if not rows:
        raise NotFound(run_id)


def hidden_steps(run_id: str) -> Op[list[int]]:
    """Steps whose row is marked pruned but still holds a checkpoint header.

    Retention empties a row it prunes (``make_carrier``: no header, no
    ranges), so a pruned flag on a full row was set by hand, and it hides a
    live checkpoint from ``history`` and loads. ``NotFound`` if no such run.
    """
    rows = yield Query("run_retention_read", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    spans = yield Query("checkpoint_spans", {"run_ref": rows[0][0]})
    return [int(row[0]) for row in spans if row[5] and row[6]]


def prune_run(run_id: str, store_policy: Retention | None, now: int, *, dry_run: bool) -> Op[PruneResult]:
    """Apply the run's retention policy (its own, else the store's) in one transaction.
    (An encrypted store's labels reach this op opened: ``sealed_ops`` opens every labels column.)"""
    result = PruneResult(run_id)
    rows = yield Query("run_retention_read" if dry_run else "run_retention", {"run_id": run_id})
    if not rows:
        return result  # deleted since it was listed
    run_ref, own, status, labels = rows[0]
    policy = Retention.from_json(codec.decode(own)) if own is not None else store_policy
    if policy is None:
        return result
    may_expire = own is None and policy.delete_finished_after is not None and status in _FINISHED
    if may_expire and all(codec.decode(labels).get(k) == v for k, v in KEEP_FINISHED.items()):
        # An adapter's conversation that ended can go on later: the store-wide policy
        # does not expire it as finished (a policy set on the run itself does).
        policy = Retention(policy.keep_last, policy.keep_for)
    spans = yield Query("checkpoint_spans", {"run_ref": run_ref})
    live = [row for row in spans if not row[5]]
    if not live:
        return result
    head_step, head_created = live[-1][0], live[-1][1]
    if (
        policy.delete_finished_after is not None
        and status in _FINISHED
        and from_micros(head_created) < from_micros(now) - policy.delete_finished_after
    ):
        result.run_deleted = True
        result.rows_deleted = len(spans)
        result.bytes_deleted = sum(row[6] + row[7] for row in spans)
        if not dry_run:
            for name in ("delete_calls", "delete_redactions", "delete_checkpoints", "delete_run"):
                yield Query(name, {"run_ref": run_ref})
        return result
    keep = _kept_steps(live, head_step, policy, now)
    seen = [span for row in live if row[0] in keep for span in codec.decode(row[4])]
    for step, _created, first_seq, added, _ranges, pruned, header_size, body_size in spans:
        if step in keep:
            continue
        carries_seen = added > 0 and any(first_seq < end and first_seq + added > start for start, end in seen)
        if not pruned:
            result.pruned_steps.append(step)
            if not dry_run:  # the calls the checkpoint covered go with it (docs/journal.md)
                yield Query("delete_calls_of_step", {"run_ref": run_ref, "step": step})
        if carries_seen:
            if not pruned:
                result.bytes_deleted += header_size
                if not dry_run:
                    yield from _make_carrier(run_ref, step)
            continue
        result.rows_deleted += 1
        result.bytes_deleted += header_size + body_size
        if not dry_run:
            yield Query("delete_checkpoint_row", {"run_ref": run_ref, "step": step})
    return result


def _kept_steps(live: list[Row], head_step: int, policy: Retention, now: int) -> set[int]:
    if policy.keep_last is None and policy.keep_for is None:
        return {row[0] for row in live}
    keep = {head_step}
    if policy.keep_last is not None:
        keep.update(row[0] for row in live[-policy.keep_last :] if policy.keep_last > 0)
    if policy.keep_for is not None:
        cutoff = now - policy.keep_for // timedelta(microseconds=1)
        keep.update(row[0] for row in live if row[1] >= cutoff)
    return keep


def _make_carrier(run_ref: int, step: int) -> Op[None]:
    """Drop the checkpoint but keep the messages its row carries (and their blobs)."""
    rows = yield Query("carried_messages", {"run_ref": run_ref, "step": step})
    packed = rows[0][0] if rows else None
    blobs = None
    if packed is not None and BLOB_MARK in bytes(packed):
        blobs = digests_json(stored_digests(bytes(packed).split(b"\n")))
    yield Query("make_carrier", {"run_ref": run_ref, "step": step, "blobs": blobs})
