"""The call journal: a run's recorded calls, written and read (generators of named queries).

Each write is one transaction: the run's row is read first (``call_run``)
and its lease checked exactly as a save checks it — under a lease, only
while that lease is the run's current one (``LeaseLost``); without one,
refused while another writer's lease lives (``Conflict``) — then the entry
is put if absent (``call_intent``) or its result stored if none was
(``call_done``: the first result wins; an intent becomes done). The put
says whether it wrote: a write that stored its entry knows what it stored
(``Stored``: the put gives back what it kept of an intent, the run's row
says whether the writer's lease lives) and reads nothing back; only a put
that finds the key taken reads the entry (``call_get``), so a second writer
learns the first one's result. An entry belongs to the step after the
run's head: the checkpoint that will cover it, and with which retention
deletes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.errors import LeaseLost, NotFound, RunHeld
from safepoint.records import Lease, from_micros
from safepoint.store.blob_targets import BlobTarget
from safepoint.store.call_values import StoredResult, entry_digest
from safepoint.store.query import Op, Query, Row

from .loading import read_blobs
from .saving import lease_detail


@dataclass(frozen=True, slots=True)
class Entry:
    """An entry as read in its transaction: its row, whether this write stored it, and the
    blobs of the database target its result references (fetched in the same transaction)."""

    row: Row
    written: bool
    fetched: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Stored:
    """An entry this write stored, known without reading it back: the caller has its result.

    ``step``, ``writer``, ``epoch`` and ``created_at`` are the entry's as it now stands (an
    intent's, when a result completed one); ``writer_live`` whether the writer's lease is
    the run's current one and unexpired; ``same_request`` as ``call_get`` compares it."""

    step: int
    writer: str | None
    epoch: int | None
    writer_live: bool
    same_request: bool | None
    created_at: int
    done_at: int | None


def write(  # noqa: PLR0917 - one entry's parts, built by the call table
    run_id: str,
    key: str,
    request: bytes | None,
    stored: StoredResult | None,
    lease: Lease | None,
    now: int,
    blobs: BlobTarget | None,
) -> Op[Entry | Stored]:
    """An intent (``stored`` None) or a result under ``key``, put if absent: what this write
    stored (``Stored``), or the entry found under the key (``Entry``, not written)."""
    rows = yield Query("call_run", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    run = rows[0]
    owner, epoch, expires = run.lease_owner, run.lease_epoch, run.lease_expires_at
    if lease is not None:
        if owner != lease.worker_id or epoch != lease.epoch:
            raise LeaseLost(lease.run_id, lease.epoch, lease_detail(lease, owner, epoch))
    elif owner is not None and expires is not None and expires > now:
        raise RunHeld(run_id, from_micros(expires), owner)  # record with the holder's lease
    params: dict[str, Any] = {
        "run_id": run_id,
        "run_ref": run.run_ref,
        "key": key,
        "step": 0 if run.head_step is None else run.head_step + 1,
        "request": request,
        "writer": None if lease is None else lease.worker_id,
        "epoch": None if lease is None else lease.epoch,
        "now": now,
    }
    if stored is None:
        # The empty result's digest: plain here, keyed when sealed, so that encrypt_store can
        # tell an intent written before the store was encrypted (its request to key).
        params["digest"] = entry_digest(key, b"")
        if (yield Query("call_intent", params)):
            same = None if request is None else True
            writer, writer_epoch = params["writer"], params["epoch"]
            live = _live(writer, writer_epoch, run, now)
            return Stored(params["step"], writer, writer_epoch, live, same, now, None)
        found = yield from read(run_id, key, request, now, blobs)
        assert found is not None  # the key is taken, in this transaction
        return found
    referencing = stored.blobs is not None and blobs is not None
    if referencing:
        yield Query("blob_guard_shared")  # held until commit, as a save holds it
    params.update(result=stored.body, digest=stored.digest, blobs=stored.blobs)
    while True:
        rows = yield Query("call_done", params)
        if rows:
            if referencing:  # its blobs commit with it; read back as a replay reads it (put back)
                assert blobs is not None
                if stored.pending:
                    yield from blobs.write(stored.pending, now)
                entry = yield from read(run_id, key, request, now, blobs)
                assert entry is not None  # written, in this transaction
                return Entry(entry.row, True, entry.fetched)
            kept = rows[0]
            live = _live(kept.writer, kept.epoch, run, now)
            same = None if kept.same_request is None else bool(kept.same_request)
            return Stored(kept.step, kept.writer, kept.epoch, live, same, kept.created_at, now)
        found = yield from read(run_id, key, request, now, blobs)
        if found is not None and (found.row.state == "done" or found.row.step == params["step"]):
            return found  # the first result stands
        if found is not None:  # an intent of an earlier step: its result keeps that step (the
            params = {**params, "step": found.row.step}  # checkpoint covering both), sealed for it


def _live(writer: str | None, epoch: int | None, run: Row, now: int) -> bool:
    """Whether the lease that wrote an entry is the run's current one, unexpired (``call_get``'s
    ``writer_live``, from the run's row this transaction read)."""
    expires = run.lease_expires_at
    return (
        writer is not None
        and writer == run.lease_owner
        and epoch == run.lease_epoch
        and expires is not None
        and expires > now
    )


def read(
    run_id: str, key: str, request: bytes | None, now: int, blobs: BlobTarget | None
) -> Op[Entry | None]:
    """The entry under ``key``, or None (no such entry, or no such run)."""
    rows = yield Query("call_get", {"run_id": run_id, "key": key, "request": request, "now": now})
    if not rows:
        return None
    row = rows[0]
    fetched = yield from _fetched([row], blobs)
    return Entry(row, False, fetched)


def entries(
    run_id: str, step: int | None, blobs: BlobTarget | None
) -> Op[tuple[list[Row], dict[str, bytes]]]:
    """A run's entries (of ``step``, or all), oldest first; ``NotFound`` without the run."""
    exists = yield Query("lease_state", {"run_id": run_id})  # a plain read (run_exists locks)
    if not exists:
        raise NotFound(run_id)
    rows = yield Query("calls_of_run", {"run_id": run_id, "step": step})
    fetched = yield from _fetched(rows, blobs)
    return rows, fetched


def _fetched(rows: list[Row], blobs: BlobTarget | None) -> Op[dict[str, bytes]]:
    if blobs is None or not blobs.in_database:
        return {}
    digests = [d for row in rows if row.blobs is not None for d in codec.decode(row.blobs)]
    return (yield from read_blobs(digests))
