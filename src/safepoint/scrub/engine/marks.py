"""Span arithmetic for the rule engine: the markers the store wrote, and marker-shaped input.

**Markers.** Only markers the store wrote are exempt, and the caller names
them: ``keep``, the sorted spans of genuine markers. They are never matched
again and no finding overlaps one (a rule's regex sees each stretch between
them as a text of its own, so a marker also reads as a boundary). Any other
marker-shaped text (``[REDACTED:…]``, ``[SECRET:…]``) is untrusted input and
switches nothing off: the rules judge the text as if it were not there (a
:class:`View` with it removed, spans mapped back, so a finding may cover it),
and what it holds is scanned too. Markers are located with one regex pass and
bisection, never compared pairwise.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence

from safepoint.errors import InvalidArgument

from .rule import Span

_MARKER = re.compile(r"\[(?:REDACTED|SECRET):[^\]\s]{1,160}\]")


def checked_marks(keep: Sequence[Span], size: int) -> list[Span]:
    """``keep`` as a list of int spans, refused unless sorted, disjoint and inside the text."""
    marks = [(int(s), int(e)) for s, e in keep]
    last = 0
    for s, e in marks:
        if not last <= s < e <= size:
            raise InvalidArgument("keep must hold sorted, disjoint (start, end) spans inside the text")
        last = e
    return marks


def gaps(marks: list[Span], size: int) -> list[Span]:
    """The stretches of text between the kept markers (empty ones left out)."""
    out: list[Span] = []
    last = 0
    for s, e in marks:
        if s > last:
            out.append((last, s))
        last = e
    if size > last:
        out.append((last, size))
    return out


def union(spans: list[Span]) -> list[Span]:
    """Sorted, disjoint spans covering the same positions."""
    out: list[Span] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def intersect(stretches: list[Span], regions: list[Span] | None) -> Iterator[Span]:
    """The parts of the sorted ``stretches`` inside the sorted ``regions`` (None: all of them)."""
    if regions is None:
        yield from stretches
        return
    i = j = 0
    while i < len(stretches) and j < len(regions):
        lo = max(stretches[i][0], regions[j][0])
        hi = min(stretches[i][1], regions[j][1])
        if lo < hi:
            yield lo, hi
        if stretches[i][1] < regions[j][1]:
            i += 1
        else:
            j += 1


def masked(text: str, marks: list[Span]) -> str:
    """``text`` with each kept marker blanked out (as many vertical tabs): no trigger is found inside
    one (marker-dense text would spend its time skipping them) and no marker-shaped text spans one.
    A lookbehind from the next stretch sees whitespace where it saw "]": a boundary either way."""
    if not marks:
        return text
    pieces: list[str] = []
    last = 0
    blanks: dict[int, str] = {}
    for s, e in marks:
        pieces.append(text[last:s])
        blank = blanks.get(e - s)
        if blank is None:
            blank = blanks[e - s] = "\v" * (e - s)
        pieces.append(blank)
        last = e
    pieces.append(text[last:])
    return "".join(pieces)


def input_markers(text: str) -> list[Span]:
    """Marker-shaped spans of a masked ``text``: none is, or overlaps, a kept marker (those are
    blanked out, and no marker-shaped text holds whitespace)."""
    if "[REDACTED:" not in text and "[SECRET:" not in text:
        return []
    return [match.span() for match in _MARKER.finditer(text)]


class View:
    """``text`` with the input markers removed, and the mapping of positions both ways."""

    def __init__(self, text: str, inputs: list[Span]) -> None:
        pieces: list[str] = []
        self._starts: list[int] = []  # each input marker's start in text
        self._ends: list[int] = []
        self._points: list[int] = []  # where each one was, in the view
        self._removed: list[int] = []  # characters removed up to and including each one
        last = removed = 0
        for s, e in inputs:
            pieces.append(text[last:s])
            self._starts.append(s)
            self._ends.append(e)
            self._points.append(s - removed)
            removed += e - s
            self._removed.append(removed)
            last = e
        pieces.append(text[last:])
        self.text = "".join(pieces)

    def inward(self, pos: int) -> int:
        """A text position in view coordinates (one inside an input marker: where it was)."""
        k = bisect.bisect_right(self._starts, pos) - 1
        if k < 0:
            return pos
        if pos < self._ends[k]:
            return self._points[k]
        return pos - self._removed[k]

    def start(self, pos: int) -> int:
        """A finding's start back in text: after any input marker that was right there."""
        k = bisect.bisect_right(self._points, pos)
        return pos + (self._removed[k - 1] if k else 0)

    def end(self, pos: int) -> int:
        """A finding's end back in text: before any input marker that was right there."""
        k = bisect.bisect_left(self._points, pos)
        return pos + (self._removed[k - 1] if k else 0)


def splice(
    text: str, marks: list[Span], found: list[tuple[int, int, str]]
) -> tuple[str, list[Span], list[Span]]:
    """``text`` with the sorted, disjoint replacements made; all marks and the new ones, moved."""
    pieces: list[str] = []
    merged: list[Span] = []
    new: list[Span] = []
    last = shift = at = 0
    for s, e, marker in found:
        while at < len(marks) and marks[at][0] < s:
            merged.append((marks[at][0] + shift, marks[at][1] + shift))
            at += 1
        pieces.append(text[last:s])
        pieces.append(marker)
        span = (s + shift, s + shift + len(marker))
        merged.append(span)
        new.append(span)
        shift += len(marker) - (e - s)
        last = e
    merged.extend((s + shift, e + shift) for s, e in marks[at:])
    pieces.append(text[last:])
    return "".join(pieces), merged, new
