"""The one blob reference scanner: stored bytes and loaded values name the same references.

A row's ``blobs`` column (what garbage collection keeps) is found from the
stored bytes; a load follows the ``BlobLink``s of the typed value. Both go
through ``blob_refs``, so for any value — real references, hostile
look-alikes and escaped input mixed — the two agree, and input shaped like a
reference is never counted.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from safepoint import codec
from safepoint.refs import BlobLink, SecretRef
from safepoint.store.large_values import BLOB_MARK, find_refs, stored_digests
from safepoint.store.references import from_stored, to_stored

_DIGESTS = st.binary(min_size=1, max_size=8).map(lambda data: hashlib.sha256(data).hexdigest())
_LINKS = st.builds(
    BlobLink,
    _DIGESTS,
    st.integers(0, 10**6),
    st.sampled_from(["text/plain; charset=utf-8", "application/octet-stream"]),
)
# Input that looks like a reference: stored escaped, so it must mean nothing.
_LOOK_ALIKES = st.builds(
    lambda digest: {"$blob": {"sha256": digest, "size": 1, "media_type": "text/plain"}}, _DIGESTS
)
# Integers the store holds (validation refuses wider ones before anything is encoded).
_INTEGERS = st.integers(-(2**63), 2**64 - 1)  # what codec encodes (orjson: int64 and uint64)
_LEAVES = st.one_of(st.none(), _INTEGERS, st.text(max_size=5), _LINKS, _LOOK_ALIKES, st.just(SecretRef("K")))
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "$b", "$blob", "$$c"]), inner, max_size=3)
    ),
    max_leaves=12,
)


def _links(value: Any) -> set[str]:
    return {ref.digest for ref in find_refs(value, [])}


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_stored_bytes_and_loaded_value_name_the_same_references(value: Any) -> None:
    """The digests found in a value's stored bytes are exactly the links its load follows."""
    stored = codec.encode(to_stored(value))
    loaded = from_stored(codec.decode(stored))
    assert stored_digests([stored]) == _links(loaded) == _links(value)
    if _links(value):
        assert BLOB_MARK in stored  # the byte prefilter never hides a reference
