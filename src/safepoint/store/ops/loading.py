"""Loading a checkpoint: the header row, then the rows carrying its messages (two queries).

``load_with_bodies`` reads the stored form (what a fork copies and a save
re-plans against); ``load_typed`` and ``load_for_reading`` give it as a
caller sees it, store-written references typed. ``read_blobs`` reads the
database blob target's values.
"""

from __future__ import annotations

from operator import attrgetter

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, NotFound
from safepoint.messagelist import StoredView
from safepoint.model import Checkpoint
from safepoint.store.large_values import BLOB_MARK, checkpoint_refs
from safepoint.store.log_rows import Body, select_bodies, select_chains
from safepoint.store.query import Loaded, Op, Query, Row
from safepoint.store.references import typed_checkpoint
from safepoint.store.stored import decode_checkpoint, parse_carriers, parse_ranges
from safepoint.store.verified import VerifiedRows

# A carrier row's (step, first_seq, added, messages), read in C: a load reads one row per save.
_CARRIED = attrgetter("step", "first_seq", "added", "messages")


def load(run_id: str, step: int | None) -> Op[Checkpoint]:
    """The latest checkpoint of the run, or the one at ``step``, in stored form; two queries either way."""
    checkpoint: Checkpoint
    checkpoint, *_ = yield from load_with_bodies(run_id, step)
    return checkpoint


def load_for_reading(
    run_id: str, step: int | None, *, blobs_in_database: bool, verified: VerifiedRows | None = None
) -> Op[Loaded]:
    """``load`` as a caller sees it (store-written references typed), noting blob
    references (and reading them, for the database target)."""
    checkpoint, found, header = yield from load_typed(run_id, step, verified, (BLOB_MARK,))
    indexes = found[BLOB_MARK]
    has_blobs = bool(indexes) or header.find(BLOB_MARK) >= 0  # find: see log_rows._shows
    stored: dict[str, bytes] = {}
    if has_blobs and blobs_in_database:
        digests = sorted({ref.digest for ref in checkpoint_refs(checkpoint, indexes)})
        rows = yield Query("select_blobs", {"digests": codec.encode(digests).decode()})
        stored = {row.digest: bytes(row.data) for row in rows}
    return Loaded(checkpoint, indexes, has_blobs, stored)


def load_typed(
    run_id: str, step: int | None, verified: VerifiedRows | None = None, marks: tuple[bytes, ...] = ()
) -> Op[tuple[Checkpoint, dict[bytes, list[int]], bytes]]:
    """The checkpoint as callers see it (``references.typed_checkpoint``), the
    indexes of its messages whose stored bytes show each of ``marks``, and its
    header as stored. Its bodies are let go as they are read (the usual log:
    row by row), so a load holds its rows or its messages, not both in full."""
    checkpoint, _, header, stored_format, found = yield from _load(run_id, step, verified, marks, keep=False)
    return typed_checkpoint(checkpoint, stored_format, (), header, found), found, header


def load_with_bodies(
    run_id: str, step: int | None, verified: VerifiedRows | None = None
) -> Op[tuple[Checkpoint, list[Body], bytes, int]]:
    """The checkpoint in stored form, its bodies and header as stored (a body is
    bytes or a memoryview slice of its row), and its stored format.

    With ``verified`` (the store's memo of rows already hashed), rows whose bytes
    it has verified before are not hashed again; the chain is checked all the same.
    """
    checkpoint, bodies, header, stored_format, _ = yield from _load(run_id, step, verified, (), keep=True)
    return checkpoint, bodies, header, stored_format


def _load(
    run_id: str, step: int | None, verified: VerifiedRows | None, marks: tuple[bytes, ...], *, keep: bool
) -> Op[tuple[Checkpoint, list[Body], bytes, int, dict[bytes, list[int]]]]:
    """``load_with_bodies``, and the bodies that show each of ``marks`` and of the
    stored format's shapes; without ``keep`` the bodies list it gives is empty."""
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
    # The rows of the run whose added messages overlap the ranges, in order: by
    # key where the row says which steps carry each range, else by a scan.
    known = parse_carriers(found.carriers, len(spans))
    if known is not None and len(spans) == 1:  # the usual: one range, one primary-key range scan
        ((first, last),), ((start, end),) = known, spans
        span = {"first_step": first, "last_step": last, "span_start": start, "span_end": end}
        rows = yield Query("view_span", {"run_ref": run_ref, **span})
    elif known is not None:
        keyed = [[first, last, start, end] for (first, last), (start, end) in zip(known, spans, strict=True)]
        rows = yield Query("view_carriers", {"run_ref": run_ref, "spans": codec.encode(keyed).decode()})
    else:
        rows = yield Query("view_messages", {"run_ref": run_ref, "ranges": codec.encode(spans).decode()})
    carried = list(map(_CARRIED, rows))
    rows.clear()
    if verified is not None:
        carried = verified.same_rows(run_id, carried)
    bodies, carriers, pieces = select_bodies(carried, spans)
    # The bodies hold what they need of the rows (slices of their bytes): the rows go.
    del carried
    kept = list(bodies) if keep else []  # decode_checkpoint lets go of ``bodies`` as it reads them
    checkpoint, stored_format, marked_at = decode_checkpoint(
        run_id=run_id,
        step=found_step,
        header=header,
        stored_digest=digest,
        ranges_json=ranges,
        bodies=bodies,
        carriers=carriers,
        pieces=pieces,
        verified=verified,
        marks=marks,
    )
    return checkpoint, kept, bytes(header), stored_format, marked_at


def chain_view(run_id: str, step: int) -> Op[StoredView | None]:
    """What the run's checkpoint at ``step`` holds of its messages — their count,
    ranges and digest chain — read from its rows' chain values without a body;
    None when a row has none (written before them) or they do not add up to the
    checkpoint's own chain: the caller then loads the bodies."""
    rows = yield Query("checkpoint_at", {"run_id": run_id, "step": step})
    if not rows:
        return None
    found = rows[0]
    try:
        spans = parse_ranges(found.ranges)
        counted = codec.decode(found.header)["messages"]
        count, chain = counted["count"], counted["chain"]
    except (ValueError, TypeError, KeyError):
        return None  # the load that follows says what is wrong
    carriers = parse_carriers(found.carriers, len(spans))
    if carriers is None or type(count) is not int or sum(end - start for start, end in spans) != count:
        return None
    keyed = [[first, last, start, end] for (first, last), (start, end) in zip(carriers, spans, strict=True)]
    carried = yield Query("view_chains", {"run_ref": found.run_ref, "spans": codec.encode(keyed).decode()})
    chains = select_chains([(row.first_seq, row.chains) for row in carried], spans)
    if chains is None or len(chains) != count or (chains[-1] if chains else codec.EMPTY_CHAIN).hex() != chain:
        return None
    return StoredView(run_id, found.step, bytes(found.digest), count, chains, spans, carriers)


def _check_head(run_id: str, row: Row) -> None:
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
