"""The rule engine's scan: :class:`RuleScanner` runs a set of rules over text, in linear time.

:meth:`RuleScanner.find` returns the spans, :meth:`RuleScanner.redact`
replaces them by ``[REDACTED:<rule>]``; the markers the caller keeps and
marker-shaped input are handled as :mod:`.marks` describes.

Overlapping findings are merged into one, named after the longest (then
earliest-listed rule, then leftmost) match, in one sort and sweep — so every
character any rule matched is redacted. :meth:`RuleScanner.redact` repeats
only near the markers it just wrote, and only on a side glued to the text (see
there). The engine never logs and never puts matched text in an exception.

**Triggers.** Every trigger spelling of every rule goes into one Aho-Corasick
automaton (:class:`Triggers`), so text with no trigger costs one pass in C.
Only where a trigger is found does a rule's regex run: anchored at the trigger
(``pattern.match`` there), or, for rules whose match may begin before the
trigger (``reach_before``), one ``pattern.search`` over each cluster of nearby
triggers — never the whole table over the whole text. Rules without triggers
(the numeric PII kinds) run their regex over each stretch of text.

**Linear time, whatever the input.** Per rule, a trigger inside the last match
is not looked at again, and a rule whose value is unbounded (``max_length``
None) says so with ``covers_refused``: a value it refused covers its span too,
so a later trigger inside it is not judged again on a suffix of the same
value. Where a rule's triggers come closer than 32 characters apart
(``eyJeyJeyJ…``), one ``pattern.search`` in C looks ahead several windows and
the triggers it shows to start no match are skipped — counting only matches
that start at a spelling, so the findings are the same either way.

A rule's pattern is used through ``match``, ``search``, ``finditer`` and
``groupindex`` only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from safepoint.errors import InvalidArgument
from safepoint.scrub.automata import Matcher

from .marks import View, checked_marks, gaps, input_markers, intersect, masked, splice, union
from .rule import Finding, Rule, Span, case_variants

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

    def look_words(self) -> tuple[str, ...] | None:
        """The literals :meth:`might_match` looks for in a text besides the marker shapes (each
        trigger spelling, and its JSON-escaped form where it holds a backslash), for a prefilter
        that runs them in one pass with others; None when some rule has no trigger (every text
        might match)."""
        return None if self._triggers.any_text else self._triggers.prefilter_words

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


# -- the triggers: what runs where a rule's literal trigger is found --------------------------


LOOK_AROUND = 64  # more than any rule's lookbehind or lookahead reaches past its match (the longest is ~20)
# A rule whose triggers come closer than _DENSE characters apart is searched ahead _HORIZON characters
# at a time (in C) instead of matched at each trigger (a Python call per trigger: 1-2 us).
_DENSE, _HORIZON = 32, 4096

Candidate = tuple[int, int, int]  # start, end, rule index

# What to run when a spelling is found: the anchored probes, and the rules searched around it.
# Anchored probe: (rule index, window (0: to the end of the stretch), bound match, bound search, the
# rule's spellings, the number of the "secret" group (0: the whole match), validate, covers_refused).
_Finder = Callable[..., re.Match[str] | None]
_Probe = tuple[int, int, _Finder, _Finder, tuple[str, ...], int, Callable[[str], bool] | None, bool]
_OnTrigger = tuple[tuple[_Probe, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class _Search:
    """A rule whose match may begin before its trigger."""

    index: int
    pattern: re.Pattern[str]
    before: int
    after: int  # how far past the last trigger a match may end (max_length + 1 for lookaheads); 0: any
    group: int
    validate: Callable[[str], bool] | None


class Triggers:
    """A set of rules compiled for the scan: what to run at each trigger spelling."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._count = len(rules)
        anchored: dict[str, list[_Probe]] = {}
        searched: dict[str, list[int]] = {}
        self._searches: list[_Search] = []
        self._whole_text: list[tuple[int, re.Pattern[str], int, Callable[[str], bool] | None]] = []
        right = LOOK_AROUND
        for index, rule in enumerate(rules):
            group = rule.pattern.groupindex.get("secret", 0)
            if not rule.triggers and not rule.spellings:
                self._whole_text.append((index, rule.pattern, group, rule.validate))
                continue
            spellings = set(rule.spellings) or {v for t in rule.triggers for v in case_variants(t)}
            # +1: boundary lookaheads see the character after the longest match.
            window = rule.reach_before + rule.max_length + 1 if rule.max_length is not None else 0
            right = max(right, rule.reach_before + max(map(len, spellings)) + LOOK_AROUND)
            if rule.reach_before:
                slot = len(self._searches)
                after = (rule.max_length + 1) if rule.max_length is not None else 0
                self._searches.append(
                    _Search(index, rule.pattern, rule.reach_before, after, group, rule.validate)
                )
                for spelling in spellings:
                    searched.setdefault(spelling, []).append(slot)
                continue
            probe = (
                index,
                window,
                rule.pattern.match,
                rule.pattern.search,
                tuple(sorted(spellings)),
                group,
                rule.validate,
                rule.covers_refused,
            )
            for spelling in sorted(spellings):
                anchored.setdefault(spelling, []).append(probe)
        words = sorted(set(anchored) | set(searched))
        self._automaton: Matcher[_OnTrigger] = Matcher(
            {w: (tuple(anchored.get(w, ())), tuple(searched.get(w, ()))) for w in words}
        )
        # The prefilter also runs on a field's JSON text, where a spelling holding a backslash (the
        # JSON-escaped "://" of url-password) appears escaped once more.
        escaped = {w.replace("\\", "\\\\") for w in words} - set(words)
        self.prefilter_words: tuple[str, ...] = (*words, *sorted(escaped))
        self._prefilter: Matcher[bool] = Matcher(dict.fromkeys(self.prefilter_words, True))
        # How far from a new marker the next redaction round looks (see RuleScanner.redact): to its
        # right, as far as a trigger whose match a lookbehind there could change; to its left, as far
        # as lookaheads (and a short match ending at it) reach.
        self.left_reach, self.right_reach = LOOK_AROUND, right

    @property
    def any_text(self) -> bool:
        """Whether some rule has no trigger (its regex runs over every text): no prefilter can say no."""
        return bool(self._whole_text)

    def might_match(self, text: str) -> bool:
        """Cheap prefilter, on text or its JSON: False means the scan would certainly find nothing."""
        if self._whole_text or "[REDACTED:" in text or "[SECRET:" in text:
            return True  # (marker-shaped input is judged as if it were not there: it may join a trigger)
        return self._prefilter.any(text)

    def scan(self, text: str, stretches: list[Span], regions: list[Span] | None) -> list[Candidate]:
        """Raw candidates wholly inside one of the sorted ``stretches``, probing only triggers that
        start inside ``regions`` (None: everywhere)."""
        found: list[Candidate] = []
        if not stretches:
            return found
        if len(self._automaton):
            self._scan_triggers(text, stretches, regions, found)
        for index, pattern, group, validate in self._whole_text:
            for lo, hi in intersect(stretches, regions):
                for match in pattern.finditer(text, lo, hi):
                    s, e = match.span(group)
                    if e > s and (validate is None or validate(text[s:e])):
                        found.append((s, e, index))
        return found

    def _scan_triggers(
        self, text: str, stretches: list[Span], regions: list[Span] | None, found: list[Candidate]
    ) -> None:
        size = len(text)
        # A few regions are searched apart; many small ones (markers packed densely) in one pass.
        spans = regions if regions is not None and len(regions) <= 1 + size // 2048 else [(0, size)]
        reached = [0] * self._count  # per rule, where its last match (or covering refusal) ended
        last = [-_DENSE] * self._count  # per rule, its last trigger looked at
        # Per searched rule, the cluster of triggers pending for it: stretch (-1: none), first, last.
        pending = [[-1, 0, 0] for _ in self._searches]
        ends = [e for _, e in stretches]
        at_stretch, count = 0, len(stretches)
        lo, stop = stretches[0]
        for at, end, (probes, searched) in self._automaton.find_within(text, spans):
            if at >= stop:
                at_stretch += 1
                while at_stretch < count and ends[at_stretch] <= at:
                    at_stretch += 1
                if at_stretch == count:
                    break
                lo, stop = stretches[at_stretch]
            if at < lo or end > stop:
                continue  # (part of) the trigger lies outside the stretches, in a kept marker
            for index, window, run, look, starts, group, validate, covers in probes:
                if at < reached[index]:
                    continue
                if at - last[index] >= _DENSE:
                    last[index] = at
                    match = run(text, at, at + window if window and at + window < stop else stop)
                    if match is None:
                        continue
                else:
                    # Dense triggers (eyJeyJeyJ…, a key word on every line): one search in C looks
                    # ahead, and the triggers it shows to start no match are skipped by `reached`.
                    last[index] = at
                    ahead = max(_HORIZON, 4 * window) + window  # (several windows: each search moves on)
                    hi = at + ahead if window and at + ahead < stop else stop
                    match = look(text, at, hi)
                    if match is None:  # no match starts before hi - window (any, when hi is the end)
                        reached[index] = hi - window + 1 if hi < stop else stop
                        continue
                    if hi < stop and match.start() > hi - window:
                        reached[index] = match.start()  # it may be cut short at hi: look again there
                        continue
                    reached[index] = match.start() + 1
                    if not text.startswith(starts, match.start()):
                        continue  # (e.g. a key word in an odd case): only what a trigger finds counts
                s, e = match.span(group)
                if e > s and (validate is None or validate(text[s:e])):
                    found.append((s, e, index))
                    reached[index] = match.end()
                elif covers:
                    reached[index] = match.end()
            for slot in searched:
                self._pend(
                    text, slot, pending[slot], at_stretch=at_stretch, at=at, stretches=stretches, found=found
                )
        for search, cluster in zip(self._searches, pending, strict=True):
            if cluster[0] >= 0:
                _search_cluster(text, search, cluster, stretches, found)

    def _pend(
        self,
        text: str,
        slot: int,
        cluster: list[int],
        *,
        at_stretch: int,
        at: int,
        stretches: list[Span],
        found: list[Candidate],
    ) -> None:
        """Add a trigger to its searched rule's pending cluster, searching the cluster it ends."""
        search = self._searches[slot]
        if cluster[0] == at_stretch and (not search.after or at - search.before <= cluster[2] + search.after):
            cluster[2] = max(cluster[2], at)
            return
        if cluster[0] >= 0:
            _search_cluster(text, search, cluster, stretches, found)
        cluster[0] = at_stretch
        cluster[1] = cluster[2] = at


def _search_cluster(
    text: str, search: _Search, cluster: list[int], stretches: list[Span], found: list[Candidate]
) -> None:
    """Search once over a cluster of nearby triggers of one rule (``[stretch, first, last]``):
    every position where a match holding one of them may begin is tried once, however dense the
    triggers."""
    stretch, first, last = cluster
    lo, stop = stretches[stretch]
    pos = max(lo, first - search.before)
    hi = min(stop, last + search.after) if search.after else stop
    while pos <= last:
        match = search.pattern.search(text, pos, hi)
        if match is None or match.start() > last:
            return  # a match starting later holds none of these triggers
        s, e = match.span(search.group)
        if e > s and (search.validate is None or search.validate(text[s:e])):
            found.append((s, e, search.index))
            pos = max(match.end(), match.start() + 1)
        else:
            pos = match.start() + 1
