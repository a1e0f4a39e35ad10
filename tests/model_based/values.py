"""What the machine stores: hostile values for every field of ``model.VALUE_FIELDS``.

The field names are read from ``safepoint.model.VALUE_FIELDS`` when the
machine is built, so a field added by the recipe is driven without an edit
here. Each value is a dict of hostile strings (control characters, markup,
text shaped like the store's markers), ``$``-keys, dicts shaped like the
store's own references (``{"$secret": …}``, ``{"$blob": …}``) as plain data,
the registered secret inside text, a value to redact later (``PLANTED``) in
text and in a label's value, strings over the blob threshold and, where
the store offloads them, ``bytes``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import safepoint.model

from .model import CANARY, PLANTED, SECRET_NAME, SECRET_VALUE

BLOB_THRESHOLD = 256  # the machine's stores offload values over this many bytes

FRAGMENTS = (
    "plain",
    f"[SECRET:{SECRET_NAME}]",
    "[REDACTED:email]",
    "$x",
    "$$y",
    "\x1b[31m",
    "<script>alert(1)</script>",
    "\u202e",
    "é💥",
    "\\",
    '"',
    "\n",
    "\x00",
    '{"$blob": 1}',
    "%24secret",
    CANARY,
    SECRET_VALUE,
    PLANTED,
)
KEYS = ("a", "b", "$k", "$$k", "$secret", "$blob", "$marks", "$text", "$", "k.dot")
MARKER_SHAPED = (
    {"$secret": SECRET_NAME},
    {"$blob": {"sha256": "0" * 64, "size": 3, "media_type": "text/plain"}},
    {"$marks": [[0, 1]], "$text": "x"},
    {"$$secret": SECRET_NAME},
)
LABELS = (
    {},
    {"team": "blue"},
    {"team": "red"},
    {"team": "blue", "tier": "gold"},
    {"team": "blue", "ticket": f"t-{PLANTED}"},  # a label value a redaction rewrites (its key stays)
)


def value_fields() -> tuple[str, ...]:
    """The checkpoint's free-form value fields, as the store under test defines them."""
    return tuple(safepoint.model.VALUE_FIELDS)


def texts() -> st.SearchStrategy[str]:
    short = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=3).map("".join)
    # Over the blob threshold: offloaded where the store has a blob target, inline otherwise.
    large = st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, 3)).map(
        lambda pair: (pair[0] + " ") * (BLOB_THRESHOLD // max(len(pair[0]), 1) + 1) * pair[1]
    )
    return st.one_of(short, short, short, short, short, short, short, large)


def leaves(allow_bytes: bool) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = [
        texts(),
        st.integers(-(2**40), 2**40),
        st.booleans(),
        st.none(),
        st.sampled_from(MARKER_SHAPED),
    ]
    if allow_bytes:  # bytes go to the blob store; with no blob target the store refuses them
        planted = b"\x00\xff" + PLANTED.encode() * 12  # a value to redact later, in a blob
        options.append(st.sampled_from((b"\x00\xffbytes", CANARY.encode() * 20, b"$blob", planted)))
    return st.one_of(*options)


def values(allow_bytes: bool) -> st.SearchStrategy[dict[str, Any]]:
    """One field's value: a dict, nested a little."""
    leaf = leaves(allow_bytes)
    nested = st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
        ),
        max_leaves=6,
    )
    return st.dictionaries(st.sampled_from(KEYS), nested, max_size=4)


def contents(allow_bytes: bool) -> st.SearchStrategy[dict[str, Any]]:
    """What one save changes: a new message, each value field, the labels, the status."""
    fields = {name: values(allow_bytes) for name in value_fields()}
    return st.fixed_dictionaries(
        {
            "message": texts(),
            "values": st.fixed_dictionaries(fields),
            "labels": st.sampled_from(LABELS),
            "status": st.sampled_from(("running", "waiting", "paused")),
        }
    )


def strings_in(value: Any) -> list[str]:
    """Every string (and bytes, decoded) leaf in ``value`` of 8 characters or more: what no
    error message may quote."""
    found: list[str] = []
    if isinstance(value, str):
        if len(value) >= 8:
            found.append(value)
    elif isinstance(value, bytes):
        if len(value) >= 8:
            found.append(value.decode(errors="replace"))
    elif isinstance(value, dict):
        for item in value.values():
            found += strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found += strings_in(item)
    return found
