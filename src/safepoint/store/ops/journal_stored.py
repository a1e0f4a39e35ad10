"""A run's call journal as stored: read whole (verify, export) and written back whole (import).

Reading takes one query for the run's entries and, for a database blob
target, one for the blobs their results reference: verify checks each entry
(``call_checks``) and loads its result, export carries them. An encrypted
store gives an entry that does not open back ``Unopened`` in this listing
(``sealed_ops``), so one damaged entry is named and the others still read.

Writing back is one transaction: the run's row read and its lease checked
as every journal write checks it without a lease (refused while another
writer's lease lives), the results' new blobs written under the blob guard,
then each entry put if absent at the step it was given — which may not be
past the run's next step (the open one, whose checkpoint is still to come);
a saved checkpoint whose step gained entries counts them (``call_recount``):
each checkpoint names the entries it covers, which verify checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument, NotFound, RunHeld
from safepoint.records import from_micros
from safepoint.store.blob_targets import BlobTarget
from safepoint.store.query import Op, Query, Row

from .loading import read_blobs


@dataclass(frozen=True, slots=True)
class StoredJournal:
    """A run's entries as stored (oldest first), the database blobs they reference, and —
    for verify — each kept checkpoint's step and how many entries it covers."""

    rows: list[Row]
    fetched: dict[str, bytes]
    covered: list[Row]


def stored(run_id: str, blobs: BlobTarget | None, *, covered: bool = False) -> Op[StoredJournal]:
    """The run's journal as stored (and, with ``covered``, its checkpoints' counts); ``NotFound``."""
    exists = yield Query("lease_state", {"run_id": run_id})  # a plain read (run_exists locks)
    if not exists:
        raise NotFound(run_id)
    rows = yield Query("calls_stored", {"run_id": run_id})
    counts = (yield Query("calls_covered", {"run_id": run_id})) if covered else []
    if blobs is None or not blobs.in_database:
        return StoredJournal(rows, {}, counts)
    digests = [d for row in rows if row.blobs is not None for d in codec.decode(row.blobs)]
    return StoredJournal(rows, (yield from read_blobs(digests)), counts)


def imported(
    run_id: str,
    entries: list[dict[str, Any]],
    pending: dict[str, bytes],
    now: int,
    blobs: BlobTarget | None,
) -> Op[int]:
    """Put each entry (the ``call_import`` parameters but the run's) if absent; how many were new."""
    rows = yield Query("call_run", {"run_id": run_id})
    if not rows:
        raise NotFound(run_id)
    run = rows[0]
    owner, expires = run.lease_owner, run.lease_expires_at
    if owner is not None and expires is not None and expires > now:
        raise RunHeld(run_id, from_micros(expires), owner)
    open_step = 0 if run.head_step is None else run.head_step + 1
    if any(entry["step"] > open_step for entry in entries):
        raise InvalidArgument(f"an imported call's step is past the run's next step ({open_step})")
    if blobs is not None and any(entry["blobs"] is not None for entry in entries):
        yield Query("blob_guard_shared")  # held until commit, as a save holds it
        if pending:
            yield from blobs.write(pending, now)
    written = 0
    for entry in entries:
        params = {**entry, "run_id": run_id, "run_ref": run.run_ref}  # run_id: what sealing binds
        written += bool((yield Query("call_import", params)))
    for step in sorted({entry["step"] for entry in entries if entry["step"] < open_step}):
        # A saved checkpoint now covers these too: its count says so, or verify would miss them.
        yield Query("call_recount", {"run_ref": run.run_ref, "step": step})
    return written
