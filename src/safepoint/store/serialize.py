"""Checkpoint <-> stored bytes, shared by every backend. Pure: no I/O.

A stored checkpoint is three things:

* a *header*: canonical JSON of every field but the messages, plus the
  message count and the digest chain value after the last message;
* its *digest*: sha256 of the header bytes;
* a list of *ranges* into the run's append-only message log.

``plan_messages`` works out which messages a save must append, from what the
checkpoint object knows the store already holds (its ``StoredView``), so the
common case — messages appended since the last save — touches only the new
ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from safepoint import codec
from safepoint.errors import CorruptCheckpoint, InvalidArgument, InvalidCheckpoint, NotJSONCompatible
from safepoint.messagelist import MessageList, StoredView, freeze
from safepoint.model import Checkpoint, ParentRef, ScrubReport, Status
from safepoint.records import from_micros

from .references import FORMAT, LEGACY_FORMAT

if TYPE_CHECKING:
    from .pipeline import StoredFields

MAX_RUN_ID_LENGTH = 255
# Steps and schema versions are keys and columns (PostgreSQL's schema_version
# is an ``integer``); bounding both by the 32-bit range keeps every backend
# and every arithmetic on them (``step + 1``) far from an overflow, and no
# run takes two billion steps.
MAX_STEP = 2**31 - 1
MAX_SCHEMA_VERSION = 2**31 - 1


def check_id(value: Any, what: str = "run_id") -> str:
    """Refuse a run or worker id that no backend can store or look up (a plain
    ``str``, 1 to 255 characters, without NUL or lone surrogates); the error
    names ``what``, never the value."""
    if type(value) is not str or not value or len(value) > MAX_RUN_ID_LENGTH:
        raise InvalidArgument(f"{what} must be a non-empty str of at most {MAX_RUN_ID_LENGTH} characters")
    if "\x00" in value or not codec.is_plain_json(value):
        raise InvalidArgument(f"{what} must not contain NUL characters or lone surrogates")
    return value


def check_step(step: Any, what: str = "step") -> int | None:
    """Refuse a step that is not None or an int from 0 to ``MAX_STEP``."""
    if step is not None and not _is_int_in(step, 0, MAX_STEP):
        raise InvalidArgument(f"{what} must be None or an int from 0 to {MAX_STEP}")
    return step  # type: ignore[no-any-return]


def _is_int_in(value: Any, low: int, high: int) -> bool:
    # Exact int: bool and IntEnum members are not steps (and would be stored as plain ints).
    return type(value) is int and low <= value <= high


def validate_fields(cp: Checkpoint, *, allow_bytes: bool = False) -> None:
    """Refuse a checkpoint whose non-message fields can't be stored, naming the field.

    ``allow_bytes``: ``bytes`` values are accepted in ``pending_action``,
    ``cursors`` and ``state`` (the store offloads them to its blob store).
    """
    try:
        check_id(cp.run_id)
    except InvalidArgument as exc:
        raise InvalidCheckpoint(str(exc)) from None
    if not _is_int_in(cp.step, 0, MAX_STEP):
        raise InvalidCheckpoint(f"step must be an int from 0 to {MAX_STEP}")
    if not _is_int_in(cp.schema_version, 1, MAX_SCHEMA_VERSION):
        raise InvalidCheckpoint(f"schema_version must be an int from 1 to {MAX_SCHEMA_VERSION}")
    if type(cp.status) is not Status:
        raise InvalidCheckpoint(f"status must be a Status, not {type(cp.status).__name__}")
    parent = cp.parent
    if parent is not None and (
        type(parent) is not ParentRef
        or type(parent.run_id) is not str
        or not parent.run_id
        or len(parent.run_id) > MAX_RUN_ID_LENGTH
        or not _is_int_in(parent.step, 0, MAX_STEP)
    ):
        raise InvalidCheckpoint("parent must be None or a ParentRef with a run id and a step")
    # Every save runs this: one quick pass over exact built-in types first; only
    # if it finds anything unusual does the detailed pass name the bad path.
    if not _plainly_valid(cp):
        _explain_invalid(cp, allow_bytes)


def _plainly_valid(cp: Checkpoint) -> bool:
    counters, labels, pending = cp.counters, cp.labels, cp.pending_action
    if type(counters) is not dict or type(labels) is not dict:
        return False
    for key, number in counters.items():
        if type(key) is not str or "\x00" in key or type(number) not in _NUMBER_TYPES:
            return False
        if type(number) is float and not math.isfinite(number):
            return False
    for key, label in labels.items():
        if type(key) is not str or type(label) is not str or "\x00" in key or "\x00" in label:
            return False
    return (
        codec.is_plain_json(counters)
        and codec.is_plain_json(labels)
        and type(cp.cursors) is dict
        and type(cp.state) is dict
        and codec.is_plain_json(cp.cursors)
        and codec.is_plain_json(cp.state)
        and (pending is None or (type(pending) is dict and codec.is_plain_json(pending)))
    )


_NUMBER_TYPES = (int, float)


def _explain_invalid(cp: Checkpoint, allow_bytes: bool) -> None:
    """The detailed pass: raise naming the first bad field (or accept the store's own types)."""
    codec.check_json(cp.run_id, "run_id")
    # check_json first: it refuses subclasses (an IntEnum counter, a StrEnum
    # label), so what the loops below see is of a plain type.
    _check_mapping(cp.counters, "counters")
    for position, (key, number) in enumerate(cp.counters.items()):
        if type(number) not in _NUMBER_TYPES:
            path = "counters" + codec.key_segment(key, position)
            raise NotJSONCompatible(path, f"{type(number).__name__} is not a number")
    _check_mapping(cp.labels, "labels")
    for position, (key, label) in enumerate(cp.labels.items()):
        if not isinstance(label, str):
            path = "labels" + codec.key_segment(key, position)
            raise NotJSONCompatible(path, f"{type(label).__name__} is not a str")
    # Labels and counters are queryable columns (JSONB on PostgreSQL, which
    # cannot hold NUL); refuse NUL there on every backend so a run can move
    # between backends. Messages and state may hold NUL: they are stored as bytes.
    for path, text in _queryable_texts(cp):
        if "\x00" in text:
            raise NotJSONCompatible(path, "NUL characters are not allowed in labels and counter names")
    if cp.pending_action is not None:
        _check_mapping(cp.pending_action, "pending_action", allow_bytes)
    _check_mapping(cp.cursors, "cursors", allow_bytes)
    _check_mapping(cp.state, "state", allow_bytes)


def _queryable_texts(cp: Checkpoint) -> list[tuple[str, str]]:
    # Paths name keys the way codec does: escaped, and by position when long.
    def path(root: str, key: str, position: int) -> str:
        return root + codec.key_segment(key, position, dotted=False)

    texts = [(path("labels", k, i), k) for i, k in enumerate(cp.labels)]
    texts += [(path("labels", k, i), v) for i, (k, v) in enumerate(cp.labels.items())]
    texts += [(path("counters", k, i), k) for i, k in enumerate(cp.counters)]
    return texts


def _check_mapping(value: Any, path: str, allow_bytes: bool = False) -> None:
    if not isinstance(value, dict):
        raise NotJSONCompatible(path, f"{type(value).__name__} is not a dict")
    codec.check_json(value, path, allow_bytes=allow_bytes)


def encode_message(message: Any, index: int) -> bytes:
    """Canonical bytes of one message, refusing anything that isn't a JSON dict."""
    path = f"messages[{index}]"
    if not isinstance(message, dict):
        raise NotJSONCompatible(path, f"{type(message).__name__} is not a message (messages are dicts)")
    codec.check_json(message, path)
    return codec.encode(message)


def check_message(message: Any, index: int, *, allow_bytes: bool) -> None:
    """Refuse a message that isn't a JSON dict (``bytes`` inside allowed with ``allow_bytes``)."""
    path = f"messages[{index}]"
    if not isinstance(message, dict):
        raise NotJSONCompatible(path, f"{type(message).__name__} is not a message (messages are dicts)")
    codec.check_json(message, path, allow_bytes=allow_bytes)


@dataclass(slots=True)
class MessagePlan:
    """What a save does to the message log.

    ``keep`` leading messages are already stored (in ``kept_ranges``);
    ``bodies`` are appended; ``chains`` covers the whole new view.
    """

    keep: int
    kept_ranges: list[tuple[int, int]]
    bodies: list[bytes]
    chains: list[bytes]
    total: int

    def ranges(self, first_seq: int) -> list[tuple[int, int]]:
        """The new view's ranges when ``bodies`` get seqs from ``first_seq`` on."""
        ranges = list(self.kept_ranges)
        if self.bodies:
            end = first_seq + len(self.bodies)
            if ranges and ranges[-1][1] == first_seq:
                # Plain append: the last range just grows, so a run that is
                # never rewritten keeps a single range.
                ranges[-1] = (ranges[-1][0], end)
            else:
                ranges.append((first_seq, end))
        return ranges


def plan_messages(
    view: StoredView | None,
    messages: list[Any],
    encode: Callable[[Any, int], bytes] = encode_message,
) -> MessagePlan:
    """Work out the delta between ``messages`` and the stored ``view``.

    Messages before the list's ``clean_prefix`` are known unchanged and are
    never looked at. Past it (after a rewrite, or for a list that was not
    loaded from the store) messages are encoded — by ``encode``, which scrubs
    them as they will be stored — and compared by digest chain, so rewriting
    only a few recent turns still shares the untouched prefix.
    """
    total = len(messages)
    keep, chain, pending = 0, codec.EMPTY_CHAIN, None
    if view is not None:
        tracked = isinstance(messages, MessageList) and messages.stored is view
        keep = min(messages.clean_prefix if tracked else 0, view.count, total)  # type: ignore[attr-defined]
        chain = view.chain_at(keep)
        while keep < min(total, view.count):
            body = encode(messages[keep], keep)
            candidate = codec.extend_chain(chain, (body,))[0]
            if candidate != view.chains[keep]:
                pending = body  # the first changed message: already encoded, reuse it
                break
            chain = candidate
            keep += 1
    bodies = [pending] if pending is not None else []
    bodies.extend(encode(messages[i], i) for i in range(keep + len(bodies), total))
    new_chains = codec.extend_chain(chain, bodies)
    if view is None:
        chains = new_chains
    elif keep == view.count == len(view.chains):
        # The common append case: extend the shared list in place (O(new)).
        # Views that already use it look only at their first ``count`` entries.
        chains = view.chains
        chains.extend(new_chains)
    else:
        chains = view.chains[:keep] + new_chains
    kept_ranges = view.ranges_for_prefix(keep) if view is not None else []
    return MessagePlan(keep=keep, kept_ranges=kept_ranges, bodies=bodies, chains=chains, total=total)


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


def select_bodies(carriers: list[tuple[Any, ...]], spans: tuple[tuple[int, int], ...]) -> list[bytes]:
    """The message bodies a checkpoint sees, from the rows that added them.

    ``carriers`` are ``(first_seq, packed)`` rows of the run, in log order;
    a body missing from them is simply absent from the result (the digest
    check then reports the checkpoint corrupt). Only seqs the carriers hold
    are looked at, so a tampered span (``[0, 10**12]``) costs no more than
    the rows read; a carrier whose columns are not what a save writes
    contributes nothing.
    """
    by_seq: dict[int, bytes] = {}
    for first_seq, packed in carriers:
        if type(first_seq) is int and isinstance(packed, bytes | bytearray | memoryview):
            for offset, body in enumerate(bytes(packed).split(b"\n")):
                by_seq[first_seq + offset] = body
    if not by_seq:
        return []
    lowest, highest = min(by_seq), max(by_seq) + 1
    out: list[bytes] = []
    for start, end in spans:
        out.extend(by_seq[seq] for seq in range(max(start, lowest), min(end, highest)) if seq in by_seq)
    return out


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
    header = {
        "format": stored_format,
        "run_id": cp.run_id,
        "step": cp.step,
        "schema_version": cp.schema_version,
        "status": cp.status.value,
        "counters": fields.counters,
        "pending_action": fields.pending_action,
        "cursors": fields.cursors,
        "state": fields.state,
        "labels": fields.labels,
        "parent": None if cp.parent is None else [cp.parent.run_id, cp.parent.step],
        "created_at": created_at,
        "messages": {"count": count, "chain": chain.hex()},
    }
    if report:
        header["scrub"] = report.to_json()
    return codec.encode(header)


def finish_save(
    cp: Checkpoint, plan: MessagePlan, ranges: list[tuple[int, int]], created_at: int, digest: bytes
) -> None:
    """After the commit: record in ``cp`` what the store now holds.

    New messages are swapped for frozen copies so that later in-place edits
    of stored messages fail loudly instead of going unsaved.
    """
    messages = cp.messages
    assert isinstance(messages, MessageList)  # Checkpoint.__setattr__ guarantees it
    # In place, touching only the new messages: rebuilding the list would make
    # every save cost O(history) again.
    fresh = [freeze(m) for m in messages[plan.keep :]]
    list.__setitem__(messages, slice(plan.keep, None), fresh)
    messages.stored = StoredView(cp.run_id, cp.step, digest, plan.total, plan.chains, tuple(ranges))
    messages.clean_prefix = plan.total
    cp.created_at = from_micros(created_at)
    cp.digest = digest.hex()


def decode_checkpoint(
    *,
    run_id: str,
    step: int,
    header: bytes,
    stored_digest: bytes,
    ranges_json: str | bytes,
    bodies: list[bytes],
) -> tuple[Checkpoint, int]:
    """Rebuild and verify a stored checkpoint, and say its stored format;
    ``CorruptCheckpoint`` on any mismatch.

    The checkpoint is in stored form (``store/references.py`` turns it into
    what a caller sees), so that a fork can copy it as it is.
    """

    def corrupt(detail: str) -> CorruptCheckpoint:
        return CorruptCheckpoint(run_id, step, detail)

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
    chains = codec.extend_chain(codec.EMPTY_CHAIN, (bytes(b) for b in bodies))
    if (chains[-1] if chains else codec.EMPTY_CHAIN).hex() != chain:
        raise corrupt("messages do not match the digest chain")
    try:
        messages = [freeze(codec.decode(body)) for body in bodies]
    except ValueError as exc:
        raise corrupt("a message is not valid JSON") from exc
    stored_format = fields.get("format", LEGACY_FORMAT)
    if stored_format not in (LEGACY_FORMAT, FORMAT):
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
                messages, StoredView(run_id, step, bytes(stored_digest), len(messages), chains, ranges)
            ),
            counters=fields["counters"],
            pending_action=fields["pending_action"],
            cursors=fields["cursors"],
            state=fields["state"],
            status=Status(fields["status"]),
            labels=fields["labels"],
            parent=None if parent is None else ParentRef(parent[0], parent[1]),
            created_at=from_micros(fields["created_at"]),
            digest=bytes(stored_digest).hex(),
            scrub_report=ScrubReport.from_json(fields.get("scrub")),
        )
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        raise corrupt("header fields are not what a save writes") from exc
    return checkpoint, stored_format
