"""Two steps side by side: their messages and their fields in rows, each row "same", "changed",
"removed" or "added", and within a changed row the words each side lost or gained.

Messages are matched by ``difflib`` (the standard library) after the prefix both steps share, which
is folded into one row; each side's text is its decoder's words (``chat.reader``). Fields are
``readable.checkpoint_diff``'s changes by path, as indented JSON. No HTML here: a row is plain data
and the template gives each piece its class (strict CSP: no inline style).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from safepoint.conversation import Turn
from safepoint.visible import visible

MATCHED = 400  # messages of each side matched one by one at most; past that, removed then added
_WORDS = 4_000  # characters of a changed text compared word by word (the rest shown unmarked)
_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a row: a label (a message's role, a field's path), its pieces (class, text)."""

    label: str
    pieces: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Row:
    kind: str  # "same", "changed", "removed", "added"
    left: Side | None
    right: Side | None
    note: str = ""


def message_rows(
    old: Sequence[Any], new: Sequence[Any], shared: int, read: Callable[[Any], Turn]
) -> list[Row]:
    """The messages of two steps in rows: the shared prefix as one row, then the rest matched."""
    rows = []
    if shared:
        rows.append(Row("same", None, None, f"messages 1 to {shared}: the same on both sides"))
    left = [read(m) for m in old[shared:]]
    right = [read(m) for m in new[shared:]]
    opcodes: Sequence[tuple[str, int, int, int, int]] = [("replace", 0, len(left), 0, len(right))]
    if len(left) <= MATCHED and len(right) <= MATCHED:  # else too many to match: removed, then added
        matcher = difflib.SequenceMatcher(None, _keys(left), _keys(right), autojunk=False)
        opcodes = matcher.get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            rows += [
                Row("same", _plain(left[i]), _plain(right[j]))
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            a = left[i1 + k] if i1 + k < i2 else None
            b = right[j1 + k] if j1 + k < j2 else None
            rows.append(
                _paired(
                    a.role if a else "", a.text if a else None, b.role if b else "", b.text if b else None
                )
            )
    return rows


def field_rows(changes: Sequence[dict[str, Any]]) -> list[Row]:
    """``checkpoint_diff``'s field changes in rows, labelled by path: added where there was nothing
    before, removed where there is nothing after, else changed."""
    rows = []
    for change in changes:
        before, after = change["before"], change["after"]
        rows.append(
            _paired(
                change["path"],
                None if before is None else _json(before),
                change["path"],
                None if after is None else _json(after),
            )
        )
    return rows


def _paired(left_label: str, before: str | None, right_label: str, after: str | None) -> Row:
    """A row of two texts, their control characters shown as escapes (as the conversation does)."""
    left_label, right_label = visible(left_label), visible(right_label)
    before = None if before is None else visible(before, keep_newlines=True)
    after = None if after is None else visible(after, keep_newlines=True)
    if before is None and after is not None:
        return Row("added", None, Side(right_label, (("ins", after),)))
    if after is None and before is not None:
        return Row("removed", Side(left_label, (("del", before),)), None)
    lost, gained = _marked(before or "", after or "")
    return Row("changed", Side(left_label, lost), Side(right_label, gained))


def _marked(before: str, after: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """Each side's words as (class, text) pieces: "same", or "del" on the left and "ins" on the right."""
    a, b = _TOKENS.findall(before[:_WORDS]), _TOKENS.findall(after[:_WORDS])
    lost: list[tuple[str, str]] = []
    gained: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            lost.append(("same", "".join(a[i1:i2])))
            gained.append(("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            lost.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            gained.append(("ins", "".join(b[j1:j2])))
    if len(before) > _WORDS:
        lost.append(("same", before[_WORDS:]))
    if len(after) > _WORDS:
        gained.append(("same", after[_WORDS:]))
    return tuple(lost), tuple(gained)


def _keys(turns: Sequence[Turn]) -> list[tuple[str, str]]:
    return [(turn.role, turn.text) for turn in turns]


def _plain(turn: Turn) -> Side:
    return Side(visible(turn.role), (("same", visible(turn.text, keep_newlines=True)),))


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
