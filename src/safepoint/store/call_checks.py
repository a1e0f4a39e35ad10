"""Is a stored journal entry whole? The one check that ``verify_calls`` and every read of an entry make.

An entry's ``digest`` column is SHA-256 of its key and its stored result
(``call_values.entry_digest``), so a result altered in place, or an entry
moved to another key, no longer matches. On an encrypted store the result
is sealed for its run, step and key: an entry moved to another key, step or
run, or altered, does not open (a read raises; ``calls_stored``, a listing,
gives the result back ``Unopened``), and its keyed digest is given back
plain only when it is the opened result's (``sealed_ops``). And each
checkpoint counts the entries of its step when it is saved (a step gains
none after): an entry deleted, or moved to another step, changes a count.
What is wrong is said in words, naming no value; the caller names run, step
and key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from safepoint import codec
from safepoint.errors import CorruptCall, CorruptCheckpoint

from .call_values import entry_digest
from .query import Row, Unopened

_STATES = ("intent", "done")
_USAGE = ("tokens_in", "tokens_out", "spend")


def damage(row: Row) -> str | None:
    """What is wrong with a stored entry (its ``key``, ``state``, ``result``, ``digest``), or None."""
    result, digest = row.result, row.digest
    if isinstance(result, Unopened) or isinstance(digest, Unopened):
        return "its result does not open for its run, step and key"
    if row.state not in _STATES:
        return "its state is neither intent nor done"
    if result is None:
        return "it is done but holds no result" if row.state == "done" else None
    if row.state == "intent":
        return "it is an intent but holds a result"
    body = bytes(result)
    if digest is None or bytes(digest) != entry_digest(row.key, body):
        return "its result does not match its digest"
    if not _stored_form(body):
        return "its result is not in the stored form"
    return None


def check(run_id: str, row: Row) -> None:
    """Raise ``CorruptCall`` naming the run, the entry's step and key if ``row`` is damaged."""
    detail = damage(row)
    if detail is not None:
        raise CorruptCall(run_id, row.step, row.key, detail)


def miscounted(run_id: str, rows: list[Row], covered: list[Row]) -> list[CorruptCheckpoint]:
    """A ``CorruptCheckpoint`` for each checkpoint (``covered``: its ``step`` and ``calls``) whose
    step holds another number of entries than it counted when saved (NULL: saved before the
    journal, nothing to compare). A step's count never changes once its checkpoint is saved."""
    stored = Counter(row.step for row in rows)
    return [
        CorruptCheckpoint(
            run_id, row.step, f"it covers {row.calls} recorded calls, but {stored[row.step]} are stored"
        )
        for row in covered
        if row.calls is not None and row.calls != stored[row.step]
    ]


def _stored_form(body: bytes) -> bool:
    # A plain store's digest is no secret: a forged one matches, so the form is checked too.
    try:
        data: Any = codec.decode(body)
    except ValueError:
        return False
    if type(data) is not dict or "value" not in data:
        return False
    usage, redacted = data.get("usage"), data.get("redacted", 0)
    if usage is not None and not (
        type(usage) is dict
        and all(type(usage.get(name)) in (int, float) and not usage[name] < 0 for name in _USAGE)
    ):
        return False
    return type(redacted) is int and redacted >= 0
