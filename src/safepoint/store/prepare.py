"""Preparing a save: a checkpoint in the form the store writes, before any transaction.

Every field is scrubbed (``safepoint.scrub``) before it is encoded, so no
registered secret or rule match reaches the database; input ``$`` keys are
escaped (``references.py``); then large values and ``bytes`` go out to blobs
(``large_values.py``). Messages are validated, scrubbed and offloaded one by one
as the delta is planned (``delta.py``) — only the new ones, and the scrubber is
deterministic, so the stored bytes of an unchanged message are the same every
time and the delta compares like with like.

``PreparedSave`` is what ``ops.save`` needs from this: the stored fields, a
``plan`` it may redo against the head inside its transaction, the scrub
report, and the blobs the row references and must write.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from orjson import OPT_SORT_KEYS, dumps

from safepoint import codec
from safepoint.blobs.base import blob_digest
from safepoint.codec import is_short_plain_json
from safepoint.errors import NotJSONCompatible, SchemaTooNew
from safepoint.messagelist import StoredView
from safepoint.model import VALUE_FIELDS, Checkpoint, ScrubReport
from safepoint.scrub import Found, Scrubber

from .blob_targets import BlobTarget
from .delta import MessagePlan, plan_messages
from .large_values import (
    BlobPolicy,
    BlobSink,
    digests_json,
    might_hold_blobs,
    offload,
    offload_encoded,
    offload_fields,
    shows_dollar_mark,
)
from .references import KEY_MARK, may_need_stored_form, to_stored
from .stored import StoredFields
from .validate import check_message, validate_fields

T = TypeVar("T")

_NOTHING_SCRUBBED = ScrubReport()
# Read only: a save's sinks are made when a value first goes to one (most saves offload nothing).
_NO_BLOBS = BlobSink()
_NO_SCRUBBER = Found("reference", "messages")

# Header JSON up to this many bytes is walked without a look per field (see _scrub_fields).
_WALK_WITHOUT_LOOK = 2048


class PreparedSave:
    """One save's stored form: scrubbed fields with large values offloaded, the
    message encoder the delta plan uses, and the blobs the save must write."""

    def __init__(
        self,
        cp: Checkpoint,
        *,
        scrubber: Scrubber | None,
        blobs: BlobTarget | None,
        policy: BlobPolicy,
        short: bool = False,
    ) -> None:
        self._scrubber = scrubber
        self._policy = policy
        self.blobs = blobs
        self._field_counts: list[Counter[tuple[str, str]]] = []
        self._message_found: Found | None = None
        self._digest_of = blobs.digest_of if blobs is not None else blob_digest
        self._field_sink = _NO_BLOBS  # _offload_fields makes the save's own before anything is added
        self._message_sink = _NO_BLOBS  # and plan()'s encode, for the messages
        self.fields = self._prepare_fields(StoredFields.of(cp, short=short))

    def _prepare_fields(self, fields: StoredFields) -> StoredFields:
        """The header fields as stored: scrubbed (``bytes`` too), input ``$`` keys
        escaped, large values and ``bytes`` out to blobs.

        The fields are encoded together once; most saves stop there, because
        that one text shows no step might match, no ``$`` key and nothing large.
        """
        try:
            values = _header_values(fields)
            # Proved plain with no long string (validate_fields): orjson's own bytes, no walk for one.
            encoded: bytes | None = (
                dumps(values, option=OPT_SORT_KEYS) if fields.short else codec.encode(values)
            )
        except TypeError:  # bytes somewhere (validation let them through): every field is walked
            encoded = None
        if (
            self._scrubber is None
            and encoded is not None
            and encoded.find(b"$") < 0  # find, not ``in`` (see log_rows._shows)
            and (self.blobs is None or len(encoded) <= self._policy.smallest)
            and not may_need_stored_form(encoded)
        ):
            # The usual header without a scrubber: no $ key, no reference, nothing large (the
            # checks _scrub_fields and _offload_fields make, without their calls).
            return fields
        stored = self._scrub_fields(fields, encoded)
        if stored is not fields:
            encoded = None  # changed: the offload check needs the new text
        return self._offload_fields(stored, encoded)

    def _scrub_fields(self, fields: StoredFields, encoded: bytes | None) -> StoredFields:
        scrubber = self._scrubber
        if scrubber is None:
            if encoded is not None and not may_need_stored_form(encoded):
                return fields
            return fields.with_values({name: to_stored(fields.value(name)) for name in VALUE_FIELDS})
        # One look at all the header fields together first (one pass over the bytes): usually
        # nothing matches. Counter names proven on an earlier save ("tokens_in" holds the token
        # rule's trigger) are left out of the look, so they do not wake a walk on every save.
        if encoded is not None and not scrubber.header_needs_walk(encoded, fields.counters):
            return fields
        # Something might match. A small header is walked field by field
        # straight away — its short strings are cached — where a look per field
        # would cost more than the walk; a large one is looked at field by
        # field first, so only the field at fault is walked.
        checked = encoded is not None and len(encoded) <= _WALK_WITHOUT_LOOK
        found = Found(scrubber.policy, "state")  # one record for the header; each field sets its root
        values, labels, counters = scrubber.scrub_fields(
            fields.values, fields.labels, fields.counters, found, checked=checked
        )
        self._field_counts.append(found.counts)
        scrubbed = StoredFields(counters=counters, labels=labels, values=values)
        if not found.counts and encoded is not None and scrubbed == fields:
            return fields  # nothing replaced: the header text encoded earlier still holds
        return scrubbed

    def _offload_fields(self, fields: StoredFields, encoded: bytes | None) -> StoredFields:
        """Large values out of the header, after scrubbing (so no blob holds a secret)."""
        if self.blobs is None:
            return fields
        if encoded is not None and not might_hold_blobs(encoded, self._policy):
            return fields  # the whole header is smaller than any threshold, and holds no reference
        self._field_sink = BlobSink(self._digest_of)
        return fields.with_values(offload_fields(fields.values, self._policy, self._field_sink))

    def plan(self, view: StoredView | None, messages: list[Any], known: int = 0) -> MessagePlan:
        """The message delta against ``view``: every new message scrubbed, then offloaded;
        ``known`` leading messages are known to be as stored (``remembered.py``)."""
        scrubber, policy = self._scrubber, self._policy
        if scrubber is None and self.blobs is None:
            return plan_messages(view, messages, known=known)  # nothing to scrub: no path to clean
        blobs, smallest = self.blobs, policy.smallest
        if scrubber is not None:
            found = self._message_found = Found(scrubber.policy, "messages")
        else:
            found = _NO_SCRUBBER  # only the scrubber records findings: never written to
        self._message_sink = _NO_BLOBS  # a plan redone starts with none

        def sink() -> BlobSink:
            if self._message_sink is _NO_BLOBS:
                self._message_sink = BlobSink(self._digest_of)
            return self._message_sink

        def encode(message: Any, index: int) -> bytes:
            # One validating walk: plain JSON with no very long string (the usual
            # case) encodes as it is, with orjson straight away, and is walked
            # only if its text asks for it; anything else (bytes, the store's own
            # references, a string long_text splices) is checked by path and walked.
            if type(message) is dict and is_short_plain_json(message):
                body = dumps(message, option=OPT_SORT_KEYS)
                if scrubber is None and body.find(b"$") < 0 and (blobs is None or len(body) <= smallest):
                    # The usual message without a scrubber: no $ key to escape, no reference
                    # and nothing large to offload (the checks below, by one memchr: ``find``,
                    # as ``b"$" in body`` first tries b"$" as an int and makes and clears a TypeError).
                    return body
                root = f"messages[{index}]"
                if scrubber is not None:
                    message, body = scrubber.scrub_encoded(message, body, root, found)
                elif shows_dollar_mark(body, KEY_MARK):  # a $ key to escape
                    message = to_stored(message)
                    body = codec.encode(message)
            else:
                root = f"messages[{index}]"
                check_message(message, index, allow_bytes=self.blobs is not None)
                if scrubber is not None:
                    message, _ = scrubber.scrub(message, root, found, checked=True)
                else:
                    message = to_stored(message)
                if self.blobs is not None:
                    message = offload(message, root, policy, sink())  # bytes and large text out
                body = codec.encode(message)
            if self.blobs is not None:
                body = offload_encoded(message, body, root, policy, sink())
            return body

        if scrubber is None:  # no error of its to clean (guarded)
            return plan_messages(view, messages, encode, known, _as_given)
        return guarded(scrubber, plan_messages, view, messages, encode, known, _as_given)

    def report(self) -> ScrubReport:
        counts = [found for found in self._field_counts if found]
        if self._message_found is not None and self._message_found.counts:
            counts.append(self._message_found.counts)
        return ScrubReport.merge(counts) if counts else _NOTHING_SCRUBBED  # the usual save

    # -- what the save writes besides its row --------------------------------

    def blob_digests(self) -> str | None:
        """The row's ``blobs`` column: every digest its header and new messages reference."""
        if not self._field_sink.digests and not self._message_sink.digests:
            return None  # the usual save: nothing by reference
        return digests_json(self._field_sink.digests | self._message_sink.digests)

    def pending_blobs(self) -> dict[str, bytes]:
        """New values to write to the blob store (by digest), before the row commits."""
        return self._field_sink.pending | self._message_sink.pending


def prepare_save(
    cp: Checkpoint,
    scrubber: Scrubber | None,
    blobs: BlobTarget | None,
    policy: BlobPolicy,
    schema_version: int,
    *,
    validate: bool = False,
) -> PreparedSave:
    """``cp`` in the form a store with these settings writes; ``SchemaTooNew`` when it was
    written by newer code (an imported fixture, a copied checkpoint) than ``schema_version``:
    this code would store a shape it cannot load itself. ``validate``: its values are checked
    first (``validate_fields``), as a save's must be."""
    short = validate and validate_fields(cp, allow_bytes=blobs is not None)
    if type(cp.schema_version) is int and cp.schema_version > schema_version:
        raise SchemaTooNew(cp.run_id, cp.step, cp.schema_version, schema_version)
    return PreparedSave(cp, scrubber=scrubber, blobs=blobs, policy=policy, short=short)


def _header_values(fields: StoredFields) -> tuple[Any, ...]:
    # Counters last: the scrubber's header look leaves proven counter names out by cutting them off the end.
    return (*fields.values.values(), fields.labels, fields.counters)


def _as_given(message: Any) -> bytes | None:
    """A message's canonical JSON as given (what it is stored as when the scrubber
    finds nothing and nothing is offloaded), None when JSON has none for it."""
    try:
        return codec.encode(message)
    except TypeError:
        return None


def guarded(scrubber: Scrubber | None, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)``, with a ``NotJSONCompatible`` path scrubbed: the path
    may quote a dict key, and a key can be a secret. The cleaned error is
    raised outside the ``except`` block so the original (with the key) is
    not kept as its ``__context__`` either. A plan may run inside the save's
    transaction, so it cleans its own errors."""
    try:
        return func(*args)
    except NotJSONCompatible as exc:
        if scrubber is None:
            raise
        error = NotJSONCompatible(scrubber.scrub_text(exc.path), exc.reason)
    raise error
