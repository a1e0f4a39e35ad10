"""Operations on whole runs: fork one into a new run, delete one with everything it holds."""

from __future__ import annotations

from safepoint.errors import Conflict, NotFound
from safepoint.messagelist import MessageList, StoredView
from safepoint.model import Checkpoint, ParentRef, ScrubReport
from safepoint.records import from_micros
from safepoint.store.large_values import digests_json, stored_digests
from safepoint.store.query import Op, Query
from safepoint.store.references import typed_checkpoint
from safepoint.store.stored import StoredFields
from safepoint.store.stored_row import checkpoint_row

from .loading import load_with_bodies
from .saving import NO_RUN


def fork(
    run_id: str, step: int | None, new_run_id: str, labels: dict[str, str] | None, now: int
) -> Op[Checkpoint]:
    """Start ``new_run_id`` from a verified copy of ``run_id``'s checkpoint at ``step``.

    The copy is byte for byte the stored form (header fields and message
    bodies), under the source's stored format and scrub report, so its
    references mean what they meant in the source.
    """
    source, views, _header, stored_format = yield from load_with_bodies(run_id, step)
    bodies = list(map(bytes, views))  # a body may be a slice of its row: the copy holds its own
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
    # The source's content at its step, as a new run's first checkpoint: no
    # stored messages of its own yet, no store facts, a parent naming the source.
    forked = source.evolve(
        run_id=new_run_id,
        messages=MessageList(),
        labels=source.labels if labels is None else labels,
        parent=ParentRef(run_id, source.step),
        created_at=None,
        digest=None,
        scrub_report=ScrubReport(),
    )
    # The fork owns a copy of the messages it sees, numbered from its own log's start.
    first_seq = 0
    ranges = [(0, view.count)] if view.count else []
    carriers = [(forked.step, forked.step)] if view.count else []  # all in the fork's one row
    row = checkpoint_row(
        forked,
        StoredFields.of(forked),
        created_at=now,
        count=view.count,
        chain=view.chain_at(view.count),
        report=source.scrub_report,
        ranges=ranges,
        carriers=carriers,
        chains=b"".join(view.chains[: view.count]),
        bodies=bodies,
        stored_format=stored_format,
    )
    header, digest = row["header"], row["digest"]
    row.update(
        run_id=new_run_id,
        parent_run_id=run_id,
        parent_step=source.step,
        now=now,
        next_seq=first_seq + view.count,
        first_seq=first_seq,
        blobs=_referenced_blobs(header, bodies),
    )
    inserted = yield Query("insert_run", row)
    if not inserted:
        raise Conflict(
            new_run_id, source.step, None, detail=f"run {new_run_id!r} was created by another writer"
        )
    row["run_ref"] = inserted[0].run_ref
    yield Query("insert_checkpoint", row)
    new_view = StoredView(
        new_run_id, forked.step, digest, view.count, view.chains[: view.count], tuple(ranges), tuple(carriers)
    )
    object.__setattr__(forked, "messages", MessageList(source.messages, new_view))
    forked.created_at = from_micros(now)
    forked.digest = digest.hex()
    forked.scrub_report = source.scrub_report
    return typed_checkpoint(forked, stored_format, bodies, header)


def _referenced_blobs(header: bytes, bodies: list[bytes]) -> str | None:
    """The ``blobs`` column for a row holding ``header`` and carrying ``bodies``."""
    return digests_json(stored_digests((header, *bodies)))


def delete_run(run_id: str) -> Op[None]:
    """Remove the run with all its checkpoints and messages."""
    rows = yield Query("run_exists", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    run_ref = rows[0].run_ref
    for name in ("delete_calls", "delete_redactions", "delete_checkpoints", "delete_run"):
        yield Query(name, {"run_ref": run_ref})
