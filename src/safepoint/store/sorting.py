"""The orders ``store.runs`` lists in, and the cursors that page through each.

A sort key is a column every store keeps in the clear — on an encrypted
store too, where labels and counters are sealed and so are no sort key:

=========  ===========================================  =================
sort       order                                        key in the cursor
=========  ===========================================  =================
created    the run's row id: creation order (default)   the row id alone
updated    the head checkpoint's time                   microseconds
run_id     the id, code point by code point             the id
status     the run row's status, as text                the status
step       the head step                                the step
=========  ===========================================  =================

The run's row id breaks ties, so pages are keyset pages: each starts after
the last row of the one before, by (key, row id), and a run is listed once
however many share its key (a run updated while paged may move, as in any
keyset listing). Newest first by creation (``created``, descending) is the
listing an index serves and keeps the short cursor it always had; any other
order is the ``list_runs_sorted`` query, whose cursor carries its sort, its
direction and the last row's key, and is refused under another order.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument

from .validate import MAX_RUN_ID_LENGTH

SORTS = ("created", "updated", "run_id", "status", "step")
TEXT_KEYS = frozenset({"run_id", "status"})
NUMBER_KEYS = frozenset({"updated", "step"})
_MAX = 2**63 - 1
_MAX_CHARS = 4096  # a 255-character id, every character escaped, fits with room


@dataclass(frozen=True, slots=True)
class After:
    """Where a sorted page starts: after the row with this key and row id."""

    text: str
    number: int
    row_id: int


def check_sort(sort: Any, descending: Any) -> tuple[str, bool]:
    if type(sort) is not str or sort not in SORTS:
        raise InvalidArgument("sort must be one of " + ", ".join(SORTS))
    if type(descending) is not bool:
        raise InvalidArgument("descending must be True or False")
    return sort, descending


def key_of(sort: str, run_id: Any, status: Any, head_step: Any, updated_at: Any) -> tuple[str, int]:
    """The (text, number) key of a listed row under ``sort`` (the unused one is '' or 0, as in the SQL)."""
    if sort in TEXT_KEYS:
        return str(run_id if sort == "run_id" else status), 0
    if sort in NUMBER_KEYS:
        value = updated_at if sort == "updated" else head_step
        return "", value if type(value) is int else 0
    return "", 0


def encode(sort: str, descending: bool, after: After) -> str:
    data = codec.encode([sort, int(descending), after.text, after.number, after.row_id])
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def decode(cursor: str, sort: str, descending: bool) -> After:
    """The place a sorted cursor this store returned names; anything else, or a cursor of another
    sort or direction, is refused (never quoted)."""
    after = None
    if 0 < len(cursor) <= _MAX_CHARS and cursor.isascii():
        try:
            data = codec.decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        except (ValueError, TypeError):  # binascii.Error and a JSON error are ValueErrors
            data = None
        if type(data) is list and len(data) == 5:
            name, way, text, number, row_id = data
            fits = (
                type(text) is str
                and len(text) <= MAX_RUN_ID_LENGTH
                and "\x00" not in text
                and type(number) is int
                and -_MAX <= number <= _MAX
                and type(row_id) is int
                and 0 <= row_id <= _MAX
            )
            if fits and name == sort and way == int(descending):
                after = After(text, number, row_id)
        # Only the exact text encode writes.
        if after is not None and encode(sort, descending, after) != cursor:
            after = None
    if after is None:
        raise InvalidArgument(
            "cursor is not one this store returned for this sort: pass page.next_cursor back unchanged"
        )
    return after
