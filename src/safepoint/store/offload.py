"""Large values by reference: strings too big to inline go to a blob store.

On save, after scrubbing, every string in a checkpoint longer than the
threshold (64 KiB of UTF-8 by default; per-path rules may lower or raise it)
is replaced by ``{"$blob": {"sha256", "size", "media_type"}}`` and its bytes
are queued for the blob store. ``ops.save`` writes them inside the save's
transaction, before the checkpoint row — so a blob is durable before any
checkpoint that references it commits, and a crash in between leaves an
orphan blob, never a dangling reference. On load the references are replaced
by the values again (or left as references, for a caller who wants to fetch
them lazily).

Content addressing makes the same output stored once, across steps and runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.blobs.base import BLOB_KEY, BlobRef, blob_digest
from safepoint.errors import InvalidArgument

DEFAULT_THRESHOLD = 64 * 1024
TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"
BLOB_MARK = b'"' + BLOB_KEY.encode() + b'"'


@dataclass(frozen=True, slots=True)
class BlobPolicy:
    """When a string is offloaded: longer than ``threshold`` bytes (UTF-8), or
    than the threshold of the longest matching path prefix in ``rules``
    (e.g. ``{"state.documents": 4096, "messages": 1_000_000}``)."""

    threshold: int = DEFAULT_THRESHOLD
    rules: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in (("threshold", self.threshold), *self.rules.items()):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgument(
                    f"blob threshold for {name!r} must be a non-negative int, not {value!r}"
                )

    @property
    def smallest(self) -> int:
        return min((self.threshold, *self.rules.values()))

    def threshold_for(self, path: str) -> int:
        best, best_len = self.threshold, -1
        for prefix, value in self.rules.items():
            matches = path == prefix or path.startswith((prefix + ".", prefix + "["))
            if matches and len(prefix) > best_len:
                best, best_len = value, len(prefix)
        return best


class BlobSink:
    """One save's blobs: new values to write, and every digest its row references."""

    def __init__(self) -> None:
        self.pending: dict[str, bytes] = {}
        self.digests: set[str] = set()

    def add(self, data: bytes, media_type: str = TEXT) -> BlobRef:
        ref = BlobRef(blob_digest(data), len(data), media_type)
        self.pending.setdefault(ref.digest, data)
        self.digests.add(ref.digest)
        return ref


def might_hold_blobs(encoded: bytes, policy: BlobPolicy) -> bool:
    """Whether a value with these canonical bytes could need offloading or hold a reference."""
    return len(encoded) > policy.smallest or BLOB_MARK in encoded


def offload(value: Any, root: str, policy: BlobPolicy, sink: BlobSink) -> Any:
    """``value`` with every oversized string — and every ``bytes`` value, whatever
    its size (JSON cannot hold bytes) — replaced by a blob reference (a new object
    where anything changed); existing references are recorded in ``sink``."""
    if isinstance(value, bytes):
        return sink.add(value, BINARY).to_json()
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        if len(data) > policy.threshold_for(root):
            return sink.add(data).to_json()
        return value
    if isinstance(value, dict):
        ref = BlobRef.from_json(value) if BLOB_KEY in value else None
        if ref is not None:
            sink.digests.add(ref.digest)
            return value
        return {k: offload(v, _child(root, k), policy, sink) for k, v in value.items()}
    if isinstance(value, list):
        return [offload(v, f"{root}[{i}]", policy, sink) for i, v in enumerate(value)]
    return value


def _child(root: str, key: str) -> str:
    return f"{root}.{key}" if key.isidentifier() else f"{root}[{key!r}]"


def offload_bytes(value: Any, root: str, policy: BlobPolicy, sink: BlobSink) -> Any:
    """``value`` with its ``bytes`` moved out, if it holds any (checked cheaply first)."""
    if codec.is_plain_json(value):
        return value
    return offload(value, root, policy, sink)


def offload_encoded(value: Any, encoded: bytes, root: str, policy: BlobPolicy, sink: BlobSink) -> bytes:
    """Canonical bytes of ``value`` after offloading, given its canonical bytes."""
    if not might_hold_blobs(encoded, policy):
        return encoded
    return codec.encode(offload(value, root, policy, sink))


def find_refs(value: Any, out: list[BlobRef]) -> list[BlobRef]:
    """Every blob reference inside ``value``."""
    if isinstance(value, dict):
        ref = BlobRef.from_json(value) if BLOB_KEY in value else None
        if ref is not None:
            out.append(ref)
        else:
            for child in value.values():
                find_refs(child, out)
    elif isinstance(value, list):
        for child in value:
            find_refs(child, out)
    return out


def inline(value: Any, fetched: Mapping[str, bytes]) -> Any:
    """A copy of ``value`` with each blob reference replaced by its value (text, or bytes)."""
    if isinstance(value, dict):
        ref = BlobRef.from_json(value) if BLOB_KEY in value else None
        if ref is not None:
            data = fetched[ref.digest]
            return data.decode("utf-8", "surrogatepass") if ref.media_type == TEXT else data
        return {k: inline(v, fetched) for k, v in value.items()}
    if isinstance(value, list):
        return [inline(v, fetched) for v in value]
    return value


def blob_digests_json(sink: BlobSink) -> str | None:
    """The row's ``blobs`` column: sorted digests as JSON, or NULL."""
    return codec.encode(sorted(sink.digests)).decode() if sink.digests else None
