"""Retention, garbage collection and eager migration, as operations (generators of named queries).

**Retention** (``prune_run``) decides, per run, which checkpoints to keep —
the last N, those younger than a duration, always the head — and removes the
rest. A checkpoint row also carries the messages its save added, and a kept
checkpoint may still see some of them; such a row is not deleted but turned
into a *carrier*: ``pruned`` set, header emptied, so ``load``/``history`` no
longer see the checkpoint while every kept checkpoint still loads exactly.
A carrier no kept checkpoint needs any more is deleted. Finished runs older
than a duration are deleted whole.

**Garbage collection** (``collect_garbage``) deletes blobs no remaining row
references. It holds the blob guard exclusively (``blob_guard_exclusive``),
which every save that references blobs holds shared from inside its
transaction until its commit. External blobs are uploaded before that
transaction, so a GC may delete one between its upload and the save's
transaction; the save re-checks its new blobs under the shared guard and puts
any missing one again (``blobio.ExternalBlobs.write``), so a committed row
never references a deleted blob. Blobs a crashed save left behind (written,
never committed) are exactly the orphans it removes. On SQLite it then gives
the file's free pages back to the file system (``PRAGMA incremental_vacuum``,
in a file created with incremental auto-vacuum, which new stores are); the
file shrinks at the next WAL checkpoint, at the latest when the last
connection closes. A file created without it keeps its free pages (SQLite
reuses them) until one full ``vacuum_store``.

Dry runs read only: they take no lock (on PostgreSQL a read-only
transaction refuses ``FOR UPDATE``), so what they report is what a real run
would have done at that moment.

**Eager migration** (``rewrite_heads``, for ``safepoint migrate``) replaces a
run's head checkpoint in place; see its docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from safepoint import codec
from safepoint.errors import SafepointError, StoreError
from safepoint.model import Checkpoint, Retention, Status, from_micros, to_micros

from .blobio import BlobTarget, ExternalBlobs
from .offload import BLOB_MARK, find_stored_refs
from .ops.loading import load_typed
from .ops.saving import NO_RUN
from .pipeline import PreparedSave
from .query import Op, Query, Row
from .serialize import header_bytes, pack_bodies

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


@dataclass(frozen=True, slots=True)
class FileSpace:
    """A SQLite file's size before and after a collection, and the free space left in it.

    ``reclaims`` says whether the file gives free pages back (created with
    incremental auto-vacuum); when False, ``free_bytes`` stay in the file,
    reused by later saves, until one full ``Store.vacuum()``.
    """

    bytes_before: int
    bytes_after: int
    free_bytes: int
    reclaims: bool

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after


@dataclass(slots=True)
class GcResult:
    """What garbage collection found and did.

    ``bytes_freed`` counts blob bytes; ``database`` is the SQLite file's
    space (None on PostgreSQL, which reuses freed space after autovacuum
    instead of giving it back).
    """

    blobs_deleted: int = 0
    bytes_freed: int = 0
    blobs_kept: int = 0
    deleted: list[str] = field(default_factory=list)
    database: FileSpace | None = None


def set_retention(run_id: str, policy: Retention | None) -> Op[None]:
    """Give the run its own retention policy (``None``: follow the store's)."""
    value = None if policy is None else codec.encode(policy.to_json()).decode()
    rows = yield Query("set_run_retention", {"run_id": run_id, "retention": value})
    if not rows:
        from safepoint.errors import NotFound  # noqa: PLC0415

        raise NotFound(run_id)


def hidden_steps(run_id: str) -> Op[list[int]]:
    """Steps whose row is marked pruned but still holds a checkpoint header.

    Retention empties a row it prunes (``make_carrier``: no header, no
    ranges), so a pruned flag on a full row was set by hand, and it hides a
    live checkpoint from ``history`` and loads. ``NotFound`` if no such run.
    """
    rows = yield Query("run_retention_read", {"run_id": run_id})
    if not rows:
        from safepoint.errors import NotFound  # noqa: PLC0415

        raise NotFound(run_id)
    spans = yield Query("checkpoint_spans", {"run_ref": rows[0][0]})
    return [int(row[0]) for row in spans if row[5] and row[6]]


def prune_run(run_id: str, store_policy: Retention | None, now: int, *, dry_run: bool) -> Op[PruneResult]:
    """Apply the run's retention policy (its own, else the store's) in one transaction."""
    result = PruneResult(run_id)
    rows = yield Query("run_retention_read" if dry_run else "run_retention", {"run_id": run_id})
    if not rows:
        return result  # deleted since it was listed
    run_ref, own, status = rows[0]
    policy = Retention.from_json(codec.decode(own)) if own is not None else store_policy
    if policy is None:
        return result
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
            for name in ("delete_checkpoints", "delete_run"):
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
    digests: list[str] = []
    if packed is not None and BLOB_MARK in bytes(packed):
        for body in bytes(packed).split(b"\n"):
            if BLOB_MARK in body:
                find_stored_refs(codec.decode(body), digests)
    blobs = codec.encode(sorted(set(digests))).decode() if digests else None
    yield Query("make_carrier", {"run_ref": run_ref, "step": step, "blobs": blobs})


def collect_garbage(target: BlobTarget, now: int, grace: timedelta, *, dry_run: bool) -> Op[GcResult]:
    """Delete every blob no row references (and older than ``grace``), under the exclusive guard."""
    result = GcResult()
    if not dry_run:  # a dry run deletes nothing, so it needs no guard (and runs read only)
        yield Query("blob_guard_exclusive")
    referenced: set[str] = set()
    for (blobs,) in (yield Query("referenced_blobs")):
        referenced.update(codec.decode(blobs))
    cutoff = from_micros(now) - grace
    if isinstance(target, ExternalBlobs):
        for info in target.store.scan():
            if info.digest in referenced or info.created_at > cutoff:
                result.blobs_kept += 1
                continue
            if dry_run or target.store.delete(info.digest):
                result.blobs_deleted += 1
                result.bytes_freed += info.stored_size
                result.deleted.append(info.digest)
        result.database = yield from _release_free_pages(dry_run)
        return result
    doomed = []
    for digest, stored_size, created in (yield Query("stored_blobs")):
        if digest in referenced or from_micros(created) > cutoff:
            result.blobs_kept += 1
            continue
        doomed.append({"digest": digest})
        result.blobs_deleted += 1
        result.bytes_freed += stored_size
        result.deleted.append(digest)
    if doomed and not dry_run:
        yield Query("delete_blobs", many=doomed)
    result.database = yield from _release_free_pages(dry_run)
    return result


def _release_free_pages(dry_run: bool) -> Op[FileSpace | None]:
    """Give the SQLite file's free pages back (see the module docstring); None on PostgreSQL."""
    rows = yield Query("database_pages")
    if not rows:
        return None
    pages, free, page_size, auto_vacuum = rows[0]
    reclaims = auto_vacuum == _INCREMENTAL
    before = pages * page_size
    if dry_run or not reclaims or not free:
        return FileSpace(before, before - (free * page_size if reclaims else 0), free * page_size, reclaims)
    yield Query("release_free_pages", many=[{}] * free)
    ((pages, free, page_size, _),) = yield Query("database_pages")
    return FileSpace(before, pages * page_size, free * page_size, reclaims)


_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for incremental


def vacuum_store() -> Op[FileSpace | None]:
    """Rewrite the SQLite file without its free pages, switched to incremental auto-vacuum.

    SQLite's ``VACUUM`` cannot run inside a transaction: this operation ends
    the one its driver began, vacuums, and begins an empty one for the
    driver to commit. It needs the database to itself (it waits for the
    write lock, and for readers) and free disk space about the size of the
    file. None on PostgreSQL (``Store.vacuum`` refuses it before).
    """
    rows = yield Query("database_pages")
    if not rows:
        return None
    pages, _free, page_size, _mode = rows[0]
    yield Query("end_transaction")
    yield Query("vacuum_incremental")
    yield Query("vacuum")
    yield Query("begin_transaction")
    ((after, free, page_size, mode),) = yield Query("database_pages")
    return FileSpace(pages * page_size, after * page_size, free * page_size, mode == _INCREMENTAL)


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
        next_seq, run_ref, head_step, *_ = rows[0] if rows else NO_RUN
        if run_ref is None:
            continue  # deleted since it was listed
        head, *_ = yield from load_typed(run_id, head_step)
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
