"""A journal entry's values in the form the store writes, and back: the result and its request.

A recorded result goes the way a checkpoint's ``state`` goes — validated as
JSON data, scrubbed (registered secrets become references, rule matches
markers), input ``$`` keys escaped, large values and ``bytes`` out to blobs —
by the steps and the paths a save takes for it (``state.result``, as
``prepare_save`` would see it), so the journal holds nothing a checkpoint
would not; only the checkpoint around it is not built. It is stored as one
canonical JSON object beside the call's usage and how many values the rules
redacted. The request is never stored: only its digest, which the driver
compares. Reading back undoes it the way a load does: references typed,
large values put back, secrets resolved when asked."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument, NotJSONCompatible, SecretLeak
from safepoint.records import CallUsage
from safepoint.scrub import Found
from safepoint.scrub.resolve import lookup_for, restore

from .after_load import ResolveSecrets
from .large_values import BlobSink, digests_json, find_stored_refs, inline, might_hold_blobs, offload
from .references import KEY_MARK, from_stored, may_need_stored_form, to_stored
from .settings import StoreSettings

MAX_KEY_LENGTH = 1024  # a key names a call's place: a thread, a path, an order, a tool call id
_PLACE = "state.result"  # where the shared save path puts the value (errors name "result")


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One result in stored form: the row's ``result`` and ``digest`` columns, the blobs it
    references (the ``blobs`` column) and the new ones to write before it commits."""

    body: bytes
    digest: bytes
    blobs: str | None
    pending: dict[str, bytes]
    redacted: int


def check_key(key: Any) -> str:
    """Refuse a key no backend can store: a plain ``str`` of 1 to 1024 characters, no NUL."""
    if type(key) is not str or not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidArgument(f"key must be a non-empty str of at most {MAX_KEY_LENGTH} characters")
    if "\x00" in key or not codec.is_plain_json(key):
        raise InvalidArgument("key must not contain NUL characters or lone surrogates")
    return key


def request_digest(request: Any) -> bytes | None:
    """The digest of what a call asked (canonical JSON), None without one. ``NotJSONCompatible``
    for a request JSON cannot hold (its path named, never a value)."""
    if request is None:
        return None
    try:
        encoded = codec.encode(request)
    except (TypeError, ValueError):
        raise NotJSONCompatible("request", "the request is not JSON data") from None
    # NaN and infinity encode as null: {"t": nan} and {"t": None} would share a digest (a
    # request whose JSON holds no null holds neither, and is not walked for them).
    if b"null" in encoded and _not_finite(request):
        raise NotJSONCompatible("request", "the request holds NaN or infinity, which JSON lacks")
    return hashlib.sha256(b"safepoint-call-request\x1f" + encoded).digest()


def _not_finite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_not_finite(item) for item in value)
    return False


def usage_of(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    if not isinstance(usage, CallUsage):
        raise InvalidArgument(f"usage must be a safepoint.CallUsage, not {type(usage).__name__}")
    tokens = (usage.tokens_in, usage.tokens_out)
    if any(type(n) is not int or n < 0 for n in tokens):
        raise InvalidArgument("usage tokens must be non-negative ints")
    if type(usage.spend) not in (int, float) or not usage.spend >= 0 or usage.spend == float("inf"):
        raise InvalidArgument("usage spend must be a finite non-negative number")
    return {"tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out, "spend": usage.spend}


def stored_result(
    key: str, result: Any, usage: CallUsage | None, settings: StoreSettings, *, redacted_before: int = 0
) -> StoredResult:
    """``result`` as the store writes it, by the steps a save takes for a value field
    (validated, scrubbed, ``$`` keys escaped, large values and ``bytes`` out to blobs).
    ``redacted_before``: values rules replaced when it was first recorded (an imported
    result carries their markers already, which the scrubber passes through uncounted)."""
    used = usage_of(usage)
    try:
        value, found, sink = settings.guard(_stored_value, result, settings)
    except NotJSONCompatible as exc:
        raise NotJSONCompatible(exc.path.replace(_PLACE, "result", 1), exc.reason) from None
    except SecretLeak as exc:  # the "raise" policy: named like the result, never quoted
        raise SecretLeak(exc.path.replace(_PLACE, "result", 1), exc.rule) from None
    # A registered secret becomes a reference that resolve_secrets gives back; a rule's
    # marker replaces the value for good: the result replays redacted. So does a registered
    # secret under the "redact" policy: its marker is all that is stored.
    redacted = redacted_before
    if found is not None and found.counts:
        kept = found.policy == "reference"
        counts = found.counts.items()
        redacted += sum(n for (rule, _), n in counts if not (kept and rule.startswith("secret:")))
    body = codec.encode({"value": value, "usage": used, "redacted": redacted})
    digest = entry_digest(key, body)
    blobs = None if sink is None or not sink.digests else digests_json(sink.digests)
    pending = {} if sink is None else sink.pending
    return StoredResult(body, digest, blobs, pending, redacted)


def _stored_value(result: Any, settings: StoreSettings) -> tuple[Any, Found | None, BlobSink | None]:
    """The result in stored form, the scrubber's findings and the blobs it references: the
    steps ``prepare_save`` takes for a checkpoint's ``state``, on ``{"result": result}`` —
    the same paths (``state.result``: blob rules and error paths), the same scrubber calls."""
    scrubber, blobs = settings.scrubber, settings.blobs
    # Nested as deep as a value of ``state`` may be: ``state`` itself is one level.
    codec.check_json(result, _PLACE, allow_bytes=blobs is not None, max_depth=codec.MAX_DEPTH - 1)
    state: dict[str, Any] = {"result": result}
    try:
        encoded: bytes | None = codec.encode(state)
    except TypeError:  # bytes inside (JSON has none): walked, then offloaded
        encoded = None
    found = None
    if scrubber is not None:
        found = Found(scrubber.policy, "state")
        # The scrubber's look over the encoded bytes, in one pass (stored shapes, rule triggers
        # and registered secrets together), as a save's messages get it.
        if encoded is None or scrubber.needs_walk_encoded(encoded):
            scrubbed, _ = scrubber.scrub(state, "state", found, checked=True)
            if scrubbed is not state:
                state, encoded = scrubbed, None
    elif encoded is None or may_need_stored_form(encoded):
        state, encoded = to_stored(state), None
    sink = None
    if blobs is not None:
        sink = BlobSink(blobs.digest_of)
        if encoded is None or might_hold_blobs(encoded, settings.blob_policy):
            state = offload(state, "state", settings.blob_policy, sink)
    return state["result"], found, sink


def entry_digest(key: str, body: bytes) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass") + b"\x1f" + body).digest()


def stored_digests(body: bytes) -> list[str]:
    """The blob digests a stored result references (to fetch them with it)."""
    return find_stored_refs(codec.decode(body)["value"], [])


def loaded_result(
    body: bytes, settings: StoreSettings, fetched: dict[str, bytes], resolve: ResolveSecrets
) -> tuple[Any, CallUsage | None, int]:
    """A stored result read back: (the value, its usage, how many values were redacted)."""
    data = codec.decode(body)
    value = data["value"]
    if KEY_MARK in body:  # a $ key somewhere: an escaped input key, or a reference the store wrote
        digests = find_stored_refs(value, [])
        value = from_stored(value)
        if digests and settings.blobs is not None:
            value = inline(value, settings.blobs.fetch(sorted(set(digests)), fetched))
    if resolve is not False:
        if resolve is True:
            scrubber = settings.scrubber
            if scrubber is None or not len(scrubber.secrets):
                raise InvalidArgument("resolve_secrets=True needs secrets registered with the store")
            resolve = scrubber.secrets
        value = restore(value, lookup_for(resolve))
    return value, _usage(data), int(data.get("redacted", 0))


def written_result(stored: StoredResult) -> tuple[Any, CallUsage | None]:
    """A result this process just stored, as ``loaded_result`` would read it back without
    resolving secrets: only for one that references no blob (nothing to fetch)."""
    data = codec.decode(stored.body)
    value = data["value"]
    return (from_stored(value) if KEY_MARK in stored.body else value), _usage(data)


def _usage(data: dict[str, Any]) -> CallUsage | None:
    used = data.get("usage")
    return None if used is None else CallUsage(used["tokens_in"], used["tokens_out"], used["spend"])
