"""The stored format of a checkpoint, shared by every backend. Pure: no I/O.

A stored checkpoint is three things:

* a *header*: canonical JSON of every field but the messages, plus the
  message count and the digest chain value after the last message;
* its *digest*: sha256 of the header bytes;
* a list of *ranges* into the run's append-only message log.

Here: the header's bytes (``header_bytes``), the messages a row carries
(``pack_bodies``, ``select_bodies``), the ranges (``parse_ranges``), a
stored checkpoint decoded and verified (``decode_checkpoint``). The one
builder of the row every operation writes, and the run row's counters
column, are beside it in ``stored_row.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from safepoint import codec, long_text
from safepoint.errors import CorruptCheckpoint, EncryptedStore
from safepoint.messagelist import MessageList, StoredView, freeze
from safepoint.model import (
    VALUE_FIELDS,
    VALUE_TYPES,
    Checkpoint,
    ParentRef,
    ScrubReport,
    Status,
    value_default,
)
from safepoint.records import from_micros

from .log_rows import Body, Piece, marked, probe_of
from .references import FORMAT, LEGACY_FORMAT, shapes
from .verified import RowChains, VerifiedRows

# What a sealed value (``crypto.sealing.MAGIC``) begins with, and no JSON text does.
SEALED_FIRST_BYTE = b"\x00"
_BYTES = (bytes, bytearray, memoryview)  # what a byte column is read back as


# Not frozen: made on every save's path, where frozen's object.__setattr__ per field costs
# more than the rest of the object (about 1.3 K instructions a field). Never changed once made.
@dataclass(slots=True, kw_only=True)
class StoredFields:
    """The header fields as they will be stored (scrubbed), by group: the two
    that are also queryable columns, and every value field by name
    (``model.VALUE_FIELDS``: what the scrubber, the offload and a load walk)."""

    counters: dict[str, int | float]
    labels: dict[str, str]
    values: dict[str, Any]
    # True only when validation proved the fields plain JSON with no string long_text
    # splices (``validate_fields``): they encode with orjson, not walked for one again.
    # A changed copy (scrubbed, offloaded) is not proved, so it defaults to False.
    short: bool = False

    @classmethod
    def of(cls, cp: Checkpoint, *, short: bool = False) -> StoredFields:
        """A checkpoint's fields as they are (already scrubbed, e.g. a stored one being forked)."""
        return cls(
            counters=cp.counters,
            labels=cp.labels,
            values={name: getattr(cp, name) for name in VALUE_FIELDS},
            short=short,
        )

    def labels_text(self) -> str:
        """The labels' canonical JSON text (the run row's labels column)."""
        if self.short:
            return orjson.dumps(self.labels, option=orjson.OPT_SORT_KEYS).decode()
        return codec.encode(self.labels).decode()

    def value(self, name: str) -> Any:
        """One of the value fields by name."""
        return self.values[name]

    def with_values(self, values: dict[str, Any]) -> StoredFields:
        """A copy with the value fields in ``values`` replaced."""
        return StoredFields(counters=self.counters, labels=self.labels, values={**self.values, **values})


def pack_bodies(bodies: list[bytes]) -> bytes | None:
    """The messages a checkpoint adds, as one value: bodies joined by newlines.

    Canonical JSON never contains a raw newline byte (orjson escapes control
    characters inside strings and writes no whitespace), so the join is
    unambiguous and ``split`` undoes it exactly.
    """
    return b"\n".join(bodies) if bodies else None


def parse_ranges(ranges_json: str | bytes) -> tuple[tuple[int, int], ...]:
    """A checkpoint's stored ranges as ``(start, end)`` pairs; ``ValueError`` unless
    they are what a save writes (ordered, non-negative, non-empty int spans)."""
    try:
        spans = tuple((a, b) for a, b in codec.decode(ranges_json))
    except (TypeError, ValueError) as exc:
        raise ValueError("ranges are not a list of pairs") from exc
    low = 0
    for start, end in spans:
        if type(start) is not int or type(end) is not int or not low <= start <= end:
            raise ValueError("ranges are not ordered spans of seqs")
        low = end
    return spans


def parse_carriers(carriers_json: str | None, count: int) -> tuple[tuple[int, int], ...] | None:
    """A checkpoint's stored carriers (``[first_step, last_step]`` per range), or None
    when there are none (rows written before the column) or they are not what a
    save writes: the load then finds the rows by scanning the run instead."""
    if carriers_json is None:
        return None
    try:
        pairs = tuple((a, b) for a, b in codec.decode(carriers_json))
    except (TypeError, ValueError):
        return None
    if len(pairs) != count or not all(type(a) is int and type(b) is int and a >= 0 for a, b in pairs):
        return None
    return pairs


def header_bytes(
    cp: Checkpoint,
    fields: StoredFields,
    *,
    created_at: int,
    count: int,
    chain: bytes,
    report: ScrubReport | None = None,
    stored_format: int = FORMAT,
) -> bytes:
    """Canonical header of ``cp``: every field but the messages, which it pins by chain.

    ``fields`` are the header fields as stored (scrubbed); the scrub report
    (counts, no values) is kept only when the scrubber replaced something.
    ``stored_format`` says how to read the references in the header and in
    the messages (``store/references.py``); a fork keeps its source's.
    """
    values = fields.values
    # Only the labels and the value fields can hold a string long enough for
    # long_text to splice (counters hold numbers; the rest is bounded): the
    # header's other parts are not walked for one (see codec.encode).
    long = not fields.short and long_text.has_long_string([fields.labels, *values.values()])
    header = {
        "format": stored_format,
        "run_id": cp.run_id,
        "step": cp.step,
        "schema_version": cp.schema_version,
        # ``_value_``: the member's plain str, read as an attribute (``.value`` is a Python-level
        # descriptor on Enum, two calls on every save's hot path).
        "status": cp.status._value_,
        "counters": fields.counters,
        **values,  # every value field by name (``StoredFields``): the keys are VALUE_FIELDS
        "labels": fields.labels,
        "parent": None if cp.parent is None else [cp.parent.run_id, cp.parent.step],
        "created_at": created_at,
        "messages": {"count": count, "chain": chain.hex()},
    }
    if report is not None and report.counts:  # kept only when the scrubber replaced something
        header["scrub"] = report.to_json()
    return codec.encode(header) if long else orjson.dumps(header, option=orjson.OPT_SORT_KEYS)


def decode_checkpoint(
    *,
    run_id: str,
    step: int,
    header: bytes,
    stored_digest: bytes,
    ranges_json: str | bytes,
    bodies: list[Body],
    carriers: tuple[tuple[int, int], ...] | None = None,
    pieces: list[Piece] | None = None,
    verified: VerifiedRows | None = None,
    marks: tuple[bytes, ...] = (),
) -> tuple[Checkpoint, int, dict[bytes, list[int]]]:
    """Rebuild and verify a stored checkpoint, and say its stored format and which
    bodies show which marks; ``CorruptCheckpoint`` on any mismatch.

    ``pieces``: the rows ``bodies`` are slices of, whole, for the usual log
    (``log_rows.select_bodies``). Then the bodies are read row by row — hashed
    (or their chain values taken from ``verified``, the store's memo, when it
    verified these very bytes), decoded, searched for marks — and each row's
    bytes and slices are let go (set to None in ``bodies``, ``pieces`` and the
    bodies' rows) before the next row is read: a load holds the rows it has not
    read yet and the messages it has made, not both in full. A caller that
    needs the bodies afterwards keeps a list of its own. Either way the last
    chain value must be the header's.

    ``marks``: byte strings to find in the bodies besides the stored format's
    own (``references.shapes``); the result gives, for each, the indexes of
    the bodies that show it.

    The checkpoint is in stored form (``store/references.py`` turns it into
    what a caller sees), so that a fork can copy it as it is.
    """

    def corrupt(detail: str) -> CorruptCheckpoint:
        return CorruptCheckpoint(run_id, step, detail)

    # A byte column read back as another type (a SQLite value's storage class edited, a
    # blob made text): bytes() would raise a raw TypeError on it.
    if not isinstance(header, _BYTES) or not isinstance(stored_digest, _BYTES):
        raise corrupt("its header or digest is not stored as bytes")
    if bytes(header[:1]) == SEALED_FIRST_BYTE:  # no JSON begins so: the store is encrypted
        raise EncryptedStore(f"run {run_id!r}")
    if codec.digest(bytes(header)) != bytes(stored_digest):
        raise corrupt("header does not match its digest")
    try:
        fields = codec.decode(header)
        ranges = parse_ranges(ranges_json)
    except (ValueError, TypeError) as exc:
        raise corrupt("header or ranges are not valid JSON") from exc
    if type(fields) is not dict or fields.get("run_id") != run_id or fields.get("step") != step:
        got = fields.get("step") if type(fields) is dict else None
        raise corrupt(f"header belongs to another run or step (step {got if type(got) is int else '?'})")
    try:
        expected, chain = fields["messages"]["count"], fields["messages"]["chain"]
    except (KeyError, TypeError) as exc:
        raise corrupt("header has no message count and chain") from exc
    if len(bodies) != expected:
        shown = expected if type(expected) is int else "?"
        raise corrupt(f"expected {shown} messages, found {len(bodies)}")
    if sum(end - start for start, end in ranges) != expected:
        # The rows are found by their carriers, so ranges that claim more
        # (or other) seqs would not show as missing messages.
        raise corrupt("its message ranges do not cover its messages")
    stored_format = fields.get("format", LEGACY_FORMAT)
    known_format = stored_format in (LEGACY_FORMAT, FORMAT)
    wanted = (*shapes(stored_format), *marks) if known_format else ()
    if pieces is None:
        chains, messages, found, readable = _read_all(bodies, wanted)
    else:
        chains, messages, found, readable = _read_rows(bodies, pieces, RowChains(verified, run_id), wanted)
    if (chains[-1] if chains else codec.EMPTY_CHAIN).hex() != chain:
        raise corrupt("messages do not match the digest chain")
    if not readable:
        raise corrupt("a message is not valid JSON")
    if not known_format:
        raise corrupt("header is in a stored format this version does not know")
    # The digest matched, so the header is as written; a header whose fields are
    # still not what a save writes (a digest recomputed by hand) is corrupt too.
    try:
        parent = fields["parent"]
        checkpoint = Checkpoint(
            run_id=run_id,
            step=step,
            schema_version=fields["schema_version"],
            messages=MessageList(
                messages,
                StoredView(run_id, step, bytes(stored_digest), len(messages), chains, ranges, carriers),
            ),
            counters=fields["counters"],
            **{name: _value(fields, name) for name in VALUE_FIELDS},
            status=Status(fields["status"]),
            labels=fields["labels"],
            parent=None if parent is None else ParentRef(parent[0], parent[1]),
            created_at=from_micros(fields["created_at"]),
            digest=bytes(stored_digest).hex(),
            scrub_report=ScrubReport.from_json(fields.get("scrub")),
        )
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise corrupt("header fields are not what a save writes") from exc
    return checkpoint, stored_format, found


Read = tuple[list[bytes], list[Any], dict[bytes, list[int]], bool]


def _read_all(bodies: list[Body], marks: tuple[bytes, ...]) -> Read:
    """The chain values after each of ``bodies``, the bodies decoded (or False for
    readable when one is not JSON), and the bodies that show each of ``marks``."""
    chains = codec.extend_chain(codec.EMPTY_CHAIN, bodies)
    found = {mark: marked(bodies, (mark,)) for mark in marks}
    try:
        return chains, list(map(freeze, map(orjson.loads, bodies))), found, True
    except ValueError:
        return chains, [], found, False


def _read_rows(slots: list[Any], pieces: list[Any], walk: RowChains, marks: tuple[bytes, ...]) -> Read:
    """``_read_all`` of the usual log's bodies (``slots``, slices of the rows of ``pieces``),
    row by row, each row's bytes let go as soon as it is read (see ``decode_checkpoint``).

    Every row is hashed (or taken from the memo) even after a body that is not
    JSON, so that a tampered row reads as a chain that does not match, as it
    does when the bodies are read whole."""
    chains: list[bytes] = []
    messages: list[Any] = []
    found: dict[bytes, list[int]] = {mark: [] for mark in marks}
    searched = [(probe_of(mark), mark) for mark in marks]
    probes = tuple({probe for probe, _ in searched})
    # The store's marks all have ``$``: one probe, one search a row (no generator made a row).
    probe = probes[0] if len(probes) == 1 else None
    rows: list[Any] = getattr(slots, "rows", [])
    nothing = (None,) * max((count for *_, count in pieces), default=0)
    readable, loads, at = True, orjson.loads, 0
    for index in range(len(pieces)):
        first_seq, packed, count = pieces[index]
        end = at + count
        views = slots[at:end]
        # The row's bytes are held by ``packed`` and ``views`` alone from here: they go with them.
        pieces[index] = None
        slots[at:end] = nothing[:count]
        if index < len(rows):
            rows[index] = None
        chains.extend(walk.after(first_seq, packed, views))
        if readable:
            try:
                messages.extend(map(freeze, map(loads, views)))
            except (ValueError, RecursionError):  # only a row the chain check then refuses
                readable = False
        # ``find``, not ``in`` (see ``log_rows._shows``): one memchr a row for the usual marks.
        if packed.find(probe) >= 0 if probe is not None else any(packed.find(p) >= 0 for p in probes):
            for offset, view in enumerate(views):
                body = bytes(view)
                for rare, mark in searched:
                    if body.find(rare) >= 0 and body.find(mark) >= 0:
                        found[mark].append(at + offset)
        at = end
    walk.finish()
    return chains, messages, found, readable


def _value(fields: dict[str, Any], name: str) -> Any:
    """Value field ``name`` of a decoded header: its default when the header was
    saved before the field existed; ``TypeError`` when it has a type no save writes."""
    if name not in fields:
        return value_default(name)
    value = fields[name]
    if not isinstance(value, VALUE_TYPES[name]):
        raise TypeError("a value field of a type no save writes")
    return value
