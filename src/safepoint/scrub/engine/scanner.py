"""The rule engine's entry point: :class:`RuleScanner` runs a set of rules over text.

:meth:`RuleScanner.find` returns the spans, :meth:`RuleScanner.redact`
replaces them by ``[REDACTED:<rule>]``. The scan itself (one automaton pass,
regexes only at triggers, linear time) is :mod:`.triggers`; the markers the
caller keeps and marker-shaped input are handled as :mod:`.marks` describes.

Overlapping findings are merged into one, named after the longest (then
earliest-listed rule, then leftmost) match, in one sort and sweep — so every
character any rule matched is redacted. :meth:`RuleScanner.redact` repeats
only near the markers it just wrote, and only on a side glued to the text (see
there). The engine never logs and never puts matched text in an exception.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from safepoint.errors import InvalidArgument

from .marks import View, checked_marks, gaps, input_markers, masked, splice, union
from .rule import Finding, Rule, Span
from .triggers import Candidate, Triggers

_RULE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # so that every marker is recognised as one
_MAX_ROUNDS = 32
# Characters no rule's token, value or key runs through and no lookaround needs to see past ("[" and
# "]" are not among them: a marker next to a new one may hide a glued token from the view).
_SEPARATORS = frozenset(" \t\r\n\f\v\"'`,;(){}<>")


class RuleScanner:
    """Runs a set of rules over text: :meth:`find` the spans, :meth:`redact` them."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        names = [rule.name for rule in self.rules]
        if len(set(names)) != len(names):
            raise InvalidArgument("rule names must be unique")
        for name in names:
            if not _RULE_NAME.fullmatch(name):
                raise InvalidArgument(f"rule name {name!r} must be 1-128 of A-Z a-z 0-9 _ . -")
        self._triggers = Triggers(self.rules)

    def might_match(self, text: str) -> bool:
        """Cheap prefilter, on text or its JSON: False means :meth:`find` would certainly return nothing."""
        return self._triggers.might_match(text)

    def find(self, text: str, keep: Sequence[Span] = ()) -> list[Finding]:
        """Non-overlapping findings sorted by start, none overlapping a ``keep`` span.

        ``keep``: the sorted spans of the markers the store wrote in ``text``. Overlapping matches
        are merged into one finding, named after the longest, then earliest-listed rule, then the
        leftmost match — so every character any rule matched is redacted.
        """
        found = self._find(text, checked_marks(keep, len(text)), None)
        return [Finding(start, end, self.rules[index].name) for start, end, index in found]

    def redact(self, text: str, keep: Sequence[Span] = ()) -> tuple[str, list[str], list[Span]]:
        """``text`` with each finding replaced by ``[REDACTED:<rule>]``, the rule names hit (one per
        finding), and the sorted spans of every genuine marker in the result (``keep`` moved along,
        and the new ones).

        When nothing is found, the very same ``str`` object comes back with ``[]``. A token glued to
        one just redacted (``-----END … KEY-----sk-ant-…``) only shows its boundary once its
        neighbour is a marker, so redaction repeats — looking again only within reach of the markers
        just written — until nothing more is found: ``redact(out, keep=marks)`` is always a no-op.
        """
        marks = checked_marks(keep, len(text))
        names: list[str] = []
        regions: list[Span] | None = None  # None: the whole text
        for _ in range(_MAX_ROUNDS):
            found = self._find(text, marks, regions)
            if not found:
                break
            names.extend(self.rules[index].name for _, _, index in found)
            # A round changes what a rule sees only next to a new marker, and only on a side where the
            # marker is glued to the text: to its right, lookbehinds (and matches reaching back) now
            # see a boundary; to its left, lookaheads see the end. A separator there (whitespace, a
            # quote, , ; ( ) { } < >) was already a boundary, so that side needs no second look —
            # which spares dense text (a finding per line) a second pass. (A long match refused
            # because it ran into the text now replaced is not judged again cut at the marker: a
            # match overlapping that text was merged into the finding.)
            size = len(text)
            glued = [
                (s > 0 and text[s - 1] not in _SEPARATORS, e < size and text[e] not in _SEPARATORS)
                for s, e, _ in found
            ]
            text, marks, new = splice(
                text, marks, [(s, e, f"[REDACTED:{self.rules[i].name}]") for s, e, i in found]
            )
            size = len(text)
            regions = union(
                [
                    (max(0, s - self._triggers.left_reach), s)
                    for (s, _), (left, _) in zip(new, glued, strict=True)
                    if left
                ]
                + [
                    (e, min(size, e + self._triggers.right_reach))
                    for (_, e), (_, right) in zip(new, glued, strict=True)
                    if right
                ]
            )
            if not regions:
                break
        return text, names, marks

    # -- inside ---------------------------------------------------------------------

    def _find(self, text: str, marks: list[Span], regions: list[Span] | None) -> list[Candidate]:
        """Merged candidates in ``text``, judged as if input markers were not there."""
        text = masked(text, marks)
        inputs = input_markers(text)
        if not inputs:
            return _merge(self._triggers.scan(text, gaps(marks, len(text)), regions))
        view = View(text, inputs)
        view_marks = [(view.inward(s), view.inward(e)) for s, e in marks]
        view_regions = (
            None if regions is None else union([(view.inward(a), view.inward(b)) for a, b in regions])
        )
        found = [
            (view.start(s), view.end(e), index)
            for s, e, index in self._triggers.scan(view.text, gaps(view_marks, len(view.text)), view_regions)
        ]
        if regions is None:  # what an input marker holds is data too (it never changes between rounds)
            contents = [(text.index(":", s) + 1, e - 1) for s, e in inputs]
            found += self._triggers.scan(text, contents, contents)
        return _merge(found)


def _merge(found: list[Candidate]) -> list[Candidate]:
    """Sort, and merge overlapping candidates into one, named after the longest (then the
    earliest-listed rule, then the leftmost): one sweep, whatever their number."""
    if len(found) < 2:
        return found
    found.sort()
    merged: list[Candidate] = []
    start, end, index = found[0]
    best = (start - end, index, start)
    for s, e, i in itertools.islice(found, 1, None):
        if s < end:
            end = max(end, e)
            rank = (s - e, i, s)
            if rank < best:
                best, index = rank, i
        else:
            merged.append((start, end, index))
            start, end, index = s, e, i
            best = (s - e, i, s)
    merged.append((start, end, index))
    return merged
