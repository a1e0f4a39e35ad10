"""The rule engine: find well-known token formats (and opt-in PII) in text, in linear time.

A :class:`Rule` is data: a name, a regex for one occurrence, and *triggers* —
literal substrings one of which lies inside every match. :class:`RuleScanner`
puts every trigger of every rule into one Aho-Corasick automaton, so text with
no trigger costs one pass in C. Only where a trigger is found does a rule's
regex run: anchored at the trigger (``pattern.match`` there), or, for rules
whose match may begin before the trigger (``reach_before``), one
``pattern.search`` over each cluster of nearby triggers — never the whole
table over the whole text.

Trigger case: ``Rule.triggers`` are lowercase, so any prefilter may lower the
text and look for them. The scanner itself does not lower the text (a copy of
every string, and a slow one for non-ASCII text): it looks for exact
*spellings*. A rule with ``spellings`` (the token prefixes, whose case is part
of the documented format, e.g. ``AIza``) is looked for in exactly those; a rule
without is looked for in each trigger's lower, UPPER, Capitalized, Title_Case,
camelCase and PascalCase spellings (``api_key``: ``API_KEY``, ``apiKey``,
``ApiKey`` …), which covers how key names are written. A key in an odd mixed
case such as ``PaSsWoRd`` is not seen.

**Linear time, whatever the input.** Per rule, a trigger inside the last match
is not looked at again, and a rule whose value is unbounded (``max_length``
None) says so with ``covers_refused``: a value it refused covers its span too,
so a later trigger inside it is not judged again on a suffix of the same
value. Where a rule's triggers come closer than 32 characters apart
(``eyJeyJeyJ…``), one ``pattern.search`` in C looks ahead several windows and
the triggers it shows to start no match are skipped — counting only matches
that start at a spelling, so the findings are the same either way. Value
checks look for typed stand-ins in a value's first 256 characters only.
Overlapping findings are merged into one, named after the longest (then
earliest-listed rule, then leftmost) match, in one sort and sweep — so every
character any rule matched is redacted; markers are located with one regex
pass and bisection, never compared pairwise. :meth:`RuleScanner.redact`
repeats only near the markers it just wrote, and only on a side glued to the
text (see there).

**Markers.** Only markers the store wrote are exempt, and the caller names
them: ``keep``, the sorted spans of genuine markers. They are never matched
again and no finding overlaps one (a rule's regex sees each stretch between
them as a text of its own, so a marker also reads as a boundary). Any other
marker-shaped text (``[REDACTED:…]``, ``[SECRET:…]``) is untrusted input and
switches nothing off: the rules judge the text as if it were not there (a
*view* with it removed, spans mapped back, so a finding may cover it), and
what it holds is scanned too. The engine never logs and never puts matched
text in an exception.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from safepoint.errors import InvalidArgument

from .matcher import Matcher

if TYPE_CHECKING:
    from safepoint.scrub.token_rules import SECRET_RULES  # noqa: F401  (see __getattr__ below)

PII_KINDS: tuple[str, ...] = ("email", "phone", "card", "iban", "ssn")
PEM_RULE_NAME = "private-key"  # the rule that finds PEM private keys; pem_line_blocks reports under it
_MARKER = re.compile(r"\[(?:REDACTED|SECRET):[^\]\s]{1,160}\]")
_RULE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # so that every marker is recognised as one
_MAX_ROUNDS = 32
_LOOK_AROUND = 64  # more than any rule's lookbehind or lookahead reaches past its match (the longest is ~20)
# A rule whose triggers come closer than _DENSE characters apart is searched ahead _HORIZON characters
# at a time (in C) instead of matched at each trigger (a Python call per trigger: 1-2 us).
_DENSE, _HORIZON = 32, 4096
# Characters no rule's token, value or key runs through and no lookaround needs to see past ("[" and
# "]" are not among them: a marker next to a new one may hide a glued token from the view).
_SEPARATORS = frozenset(" \t\r\n\f\v\"'`,;(){}<>")

Span = tuple[int, int]
_Candidate = tuple[int, int, int]  # start, end, rule index


@dataclass(frozen=True, slots=True)
class Rule:
    """One detectable format; see the module docstring for how it is run."""

    name: str  # appears in the marker [REDACTED:<name>]
    pattern: re.Pattern[str]  # one occurrence; group "secret", if any, is all that is redacted
    triggers: tuple[str, ...]  # lowercase literals, one inside every match; () = regex over the whole text
    kind: str = "secret"  # "secret" or a PII kind
    validate: Callable[[str], bool] | None = None  # extra check on the redacted value
    description: str = ""  # the documented format it targets, in one line
    spellings: tuple[str, ...] = ()  # exact-case trigger spellings; () = the usual case variants
    reach_before: int = 0  # how far before a trigger a match may begin (0: it begins at the trigger)
    max_length: int | None = 256  # longest match, from its start (bounds what the regex sees); None: any
    # A match the rule refuses (``secret`` group absent or empty, or ``validate`` saying no) still
    # covers its span: no trigger inside it is tried again. For unbounded values, whose later triggers
    # would each judge a suffix of the same value again (quadratic); the pattern should then match,
    # without a ``secret`` group, wherever it would otherwise fail after reading a value.
    covers_refused: bool = False


@dataclass(frozen=True, slots=True)
class Finding:
    """A span of text a rule matched (the part to redact)."""

    start: int
    end: int
    rule: str


def case_variants(trigger: str) -> set[str]:
    """The spellings a lowercase key-name trigger is looked for in."""
    parts = re.split(r"[_\-]", trigger)
    camel = parts[0] + "".join(p.capitalize() for p in parts[1:])
    return {
        trigger,
        trigger.upper(),
        trigger.capitalize(),
        trigger.title(),
        camel,
        camel[:1].upper() + camel[1:],
    }


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
        anchored: dict[str, list[_Probe]] = {}
        searched: dict[str, list[int]] = {}
        self._searches: list[_Search] = []
        self._whole_text: list[tuple[int, re.Pattern[str], int, Callable[[str], bool] | None]] = []
        right = _LOOK_AROUND
        for index, rule in enumerate(self.rules):
            group = rule.pattern.groupindex.get("secret", 0)
            if not rule.triggers and not rule.spellings:
                self._whole_text.append((index, rule.pattern, group, rule.validate))
                continue
            spellings = set(rule.spellings) or {v for t in rule.triggers for v in case_variants(t)}
            # +1: boundary lookaheads see the character after the longest match.
            window = rule.reach_before + rule.max_length + 1 if rule.max_length is not None else 0
            right = max(right, rule.reach_before + max(map(len, spellings)) + _LOOK_AROUND)
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
        self._prefilter: Matcher[bool] = Matcher(dict.fromkeys([*words, *sorted(escaped)], True))
        # How far from a new marker the next redaction round looks (see redact): to its right, as far
        # as a trigger whose match a lookbehind there could change; to its left, as far as lookaheads
        # (and a short match ending at it) reach.
        self._left_reach, self._right_reach = _LOOK_AROUND, right

    def might_match(self, text: str) -> bool:
        """Cheap prefilter, on text or its JSON: False means :meth:`find` would certainly return nothing."""
        if self._whole_text or "[REDACTED:" in text or "[SECRET:" in text:
            return True  # (marker-shaped input is judged as if it were not there: it may join a trigger)
        return self._prefilter.any(text)

    def find(self, text: str, keep: Sequence[Span] = ()) -> list[Finding]:
        """Non-overlapping findings sorted by start, none overlapping a ``keep`` span.

        ``keep``: the sorted spans of the markers the store wrote in ``text``. Overlapping matches
        are merged into one finding, named after the longest, then earliest-listed rule, then the
        leftmost match — so every character any rule matched is redacted.
        """
        found = self._find(text, _checked(keep, len(text)), None)
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
        marks = _checked(keep, len(text))
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
            text, marks, new = _splice(
                text, marks, [(s, e, f"[REDACTED:{self.rules[i].name}]") for s, e, i in found]
            )
            size = len(text)
            regions = _union(
                [
                    (max(0, s - self._left_reach), s)
                    for (s, _), (left, _) in zip(new, glued, strict=True)
                    if left
                ]
                + [
                    (e, min(size, e + self._right_reach))
                    for (_, e), (_, right) in zip(new, glued, strict=True)
                    if right
                ]
            )
            if not regions:
                break
        return text, names, marks

    # -- inside ---------------------------------------------------------------------

    def _find(self, text: str, marks: list[Span], regions: list[Span] | None) -> list[_Candidate]:
        """Merged candidates in ``text``, judged as if input markers were not there."""
        text = _masked(text, marks)
        inputs = _input_markers(text)
        if not inputs:
            return _merge(self._scan(text, _gaps(marks, len(text)), regions))
        view = _View(text, inputs)
        view_marks = [(view.inward(s), view.inward(e)) for s, e in marks]
        view_regions = (
            None if regions is None else _union([(view.inward(a), view.inward(b)) for a, b in regions])
        )
        found = [
            (view.start(s), view.end(e), index)
            for s, e, index in self._scan(view.text, _gaps(view_marks, len(view.text)), view_regions)
        ]
        if regions is None:  # what an input marker holds is data too (it never changes between rounds)
            contents = [(text.index(":", s) + 1, e - 1) for s, e in inputs]
            found += self._scan(text, contents, contents)
        return _merge(found)

    def _scan(self, text: str, stretches: list[Span], regions: list[Span] | None) -> list[_Candidate]:
        """Raw candidates wholly inside one of the sorted ``stretches``, probing only triggers that
        start inside ``regions`` (None: everywhere)."""
        found: list[_Candidate] = []
        if not stretches:
            return found
        if len(self._automaton):
            self._scan_triggers(text, stretches, regions, found)
        for index, pattern, group, validate in self._whole_text:
            for lo, hi in _intersect(stretches, regions):
                for match in pattern.finditer(text, lo, hi):
                    s, e = match.span(group)
                    if e > s and (validate is None or validate(text[s:e])):
                        found.append((s, e, index))
        return found

    def _scan_triggers(
        self, text: str, stretches: list[Span], regions: list[Span] | None, found: list[_Candidate]
    ) -> None:
        size = len(text)
        # A few regions are searched apart; many small ones (markers packed densely) in one pass.
        spans = regions if regions is not None and len(regions) <= 1 + size // 2048 else [(0, size)]
        reached = [0] * len(self.rules)  # per rule, where its last match (or covering refusal) ended
        last = [-_DENSE] * len(self.rules)  # per rule, its last trigger looked at
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
        found: list[_Candidate],
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
    text: str, search: _Search, cluster: list[int], stretches: list[Span], found: list[_Candidate]
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


def _merge(found: list[_Candidate]) -> list[_Candidate]:
    """Sort, and merge overlapping candidates into one, named after the longest (then the
    earliest-listed rule, then the leftmost): one sweep, whatever their number."""
    if len(found) < 2:
        return found
    found.sort()
    merged: list[_Candidate] = []
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


def _checked(keep: Sequence[Span], size: int) -> list[Span]:
    marks = [(int(s), int(e)) for s, e in keep]
    last = 0
    for s, e in marks:
        if not last <= s < e <= size:
            raise InvalidArgument("keep must hold sorted, disjoint (start, end) spans inside the text")
        last = e
    return marks


def _gaps(marks: list[Span], size: int) -> list[Span]:
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


def _union(spans: list[Span]) -> list[Span]:
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


def _intersect(stretches: list[Span], regions: list[Span] | None) -> Iterator[Span]:
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


def _masked(text: str, marks: list[Span]) -> str:
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


def _input_markers(text: str) -> list[Span]:
    """Marker-shaped spans of a masked ``text``: none is, or overlaps, a kept marker (those are
    blanked out, and no marker-shaped text holds whitespace)."""
    if "[REDACTED:" not in text and "[SECRET:" not in text:
        return []
    return [match.span() for match in _MARKER.finditer(text)]


class _View:
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


def _splice(
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


# -- value checks shared by the validators ---------------------------------------

# Typed stand-ins, looked for in any case. Only long or punctuated ones for generated tokens, where a
# short word such as "todo" turns up by chance in one of a few thousand.
_TYPED_PARTS = ("example", "changeme", "placeholder", "redacted", "your-", "your_", "${", "<", ">", "....")
_PLACEHOLDER_PARTS = (
    *_TYPED_PARTS, "change_me", "change-me", "yourkey", "yourtoken", "yoursecret", "****", "dummy",
    "notreal", "not_real", "not-a-real", "sample", "replace_me", "replaceme", "insert", "fixme", "{{",
    "}}", "$(", "%(", "%s",
)  # fmt: skip
# (No marker text among them: a marker in input never makes a value look typed — the rules judge the
# text as if it were not there, and a value never holds a kept one.)
# Stand-in words and typed runs are looked for in this many leading characters: a person types short
# values, and in a long generated one (judged whole, however long) some five-letter word turns up by
# chance — in a megabyte of base64, "dummy" or "fixme" almost surely does.
_TYPED_LOOK = 256
_NUMERIC = re.compile(r"[\d\s.:/+TZ-]+")  # numbers, amounts, dates, times
# Words (lower, Capitalized, camelCase or UPPER) with small numbers, joined by separators:
# my_db_pass, read-only, user1.password, hunter22, settings.DB_PASSWORD, rfc6750. Random mixed case
# ("xLMboGuEsBO14") is not made of words.
_WORD = r"(?:[A-Z]?[a-z]+(?:[A-Z][a-z]+)*\d{0,4}|[A-Z]+\d{0,4}|\d+)"
_WORDS = re.compile(_WORD + r"(?:[_.\-/:]" + _WORD + ")*")
_CAMEL = re.compile(r"[a-z]*(?:[A-Z][a-z]+)*")


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    n = len(value)
    if not n:
        return 0.0
    # log2(n) - sum(c * log2(c)) / n: for a short value, the counts by str.count and the sum by table
    # lookups, all in C (a Counter and a loop of log2 calls cost several times more).
    if n < len(_XLOG2X):
        total = sum(map(_XLOG2X.__getitem__, map(value.count, set(value))))
    else:
        total = sum(c * math.log2(c) for c in Counter(value).values())
    return math.log2(n) - total / n


# The value checks run once per candidate, and a dense text has many: each is C-level work (one
# automaton pass for the stand-in words, map/filter over str methods), not a Python loop per character.
_TYPED_WORDS: Matcher[bool] = Matcher(dict.fromkeys(_TYPED_PARTS, True))
_PLACEHOLDER_WORDS: Matcher[bool] = Matcher(dict.fromkeys(_PLACEHOLDER_PARTS, True))
_NEXT_BYTE = bytes((i + 1) & 0xFF for i in range(256))
_XLOG2X = [0.0, *(c * math.log2(c) for c in range(1, 4097))]


def is_placeholder(value: str) -> bool:
    """A value a person typed to stand for a secret: changeme, <your-key>, ${X}, ********, 123456…"""
    head = value[:_TYPED_LOOK]
    return _PLACEHOLDER_WORDS.any(head.lower()) or _typed_shape(head)  # (the typed words are among them)


def _is_typed(value: str, low: str) -> bool:
    return _TYPED_WORDS.any(low[:_TYPED_LOOK]) or _typed_shape(value[:_TYPED_LOOK])  # low: lowered head


def _typed_shape(head: str) -> bool:
    if len(set(head)) <= 3 or "xxxxx" in head or "XXXXX" in head or "*****" in head:
        return True
    return _has_ascending_run(head)


def _has_ascending_run(value: str) -> bool:
    """Six characters in a row, each the next code point: 123456, abcdef (typed, not generated)."""
    if value.isascii():
        # Each byte plus one, compared with the next byte: five equal bytes in a row make a run of six.
        data = value.encode("ascii")
        if len(data) < 6:
            return False
        steps = int.from_bytes(data[:-1].translate(_NEXT_BYTE)) ^ int.from_bytes(data[1:])
        return bytes(5) in steps.to_bytes(len(data) - 1)
    run = 1
    for a, b in itertools.pairwise(value):
        run = run + 1 if ord(b) - ord(a) == 1 else 1
        if run >= 6:
            return True
    return False


def looks_random(value: str) -> bool:
    """A prefixed token: not a typed stand-in, and at least 2.5 bits of entropy per character."""
    return not _is_typed(value, value[:_TYPED_LOOK].lower()) and shannon_entropy(value) >= 2.5


def has_mixed_case(value: str) -> bool:
    """Generated keys mix cases at random: upper and lower, and not in CamelCaseWords (unless digits too)."""
    letters = "".join(filter(str.isalpha, value))
    if letters.islower() or letters.isupper() or not letters:
        return False
    return any(map(str.isdigit, value)) or _CAMEL.fullmatch(letters) is None


def looks_like_secret_value(value: str) -> bool:
    """A value assigned to a secret-sounding key that is a real credential, not code or a placeholder."""
    n = len(value)
    if n < 8 or is_placeholder(value):  # no upper bound: a long value is a secret too, redacted whole
        return False
    if "://" in value or value[0] in "$%/.~#@" or value[:4].lower() == "arn:":
        return False  # env references, format strings, paths, URLs, ARNs
    if _NUMERIC.fullmatch(value) or _WORDS.fullmatch(value):
        return False
    has_digit = any(map(str.isdigit, value))
    has_letter = any(map(str.isalpha, value))
    if not has_letter or (not has_digit and (n < 16 or not has_mixed_case(value))):
        return False
    return shannon_entropy(value) >= (3.0 if n >= 16 else 2.5)


# -- PEM keys split into a list of lines ---------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# A line of a PEM body: base64 (a PGP checksum "=abcd" too), an RFC 1421 header (Proc-Type: …,
# DEK-Info: …, PGP's Version: …), or blank. Atomic per line (its end included): a line that fails
# never makes the lines before it try other splits (exponential backtracking).
_PEM_BODY = re.compile(
    r"(?>[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z0-9-]*: [^\r\n]*)?[ \t]*(?:\r?\n|\r|\Z))*"
)
_PEM_MATERIAL = re.compile(r"[A-Za-z0-9+/]{32}")  # as the text rule asks: key material, not "..."


def pem_line_blocks(items: list[object]) -> list[tuple[int, int]]:
    """The ``(first, last)`` index ranges (inclusive) of consecutive ``str`` items that together
    form a PEM private key: a ``-----BEGIN … PRIVATE KEY-----`` line, body lines, and the
    ``-----END … PRIVATE KEY-----`` line (or none: a truncated key), with or without trailing
    newlines — a key split into a list of lines, which no rule sees whole in one string.

    The first item may hold text before its BEGIN line and the last text after its END line; an
    item holding a whole block is left to the text rule (:data:`PEM_RULE_NAME`). Each item is read
    once: linear time.
    """
    blocks: list[tuple[int, int]] = []
    count, i = len(items), 0
    while i < count:
        rest = _pem_opening(items[i])
        if rest is None:
            i += 1
            continue
        material = _PEM_MATERIAL.search(rest) is not None
        j = i + 1
        while j < count and isinstance(item := items[j], str) and _pem_body(item):
            material = material or _PEM_MATERIAL.search(item) is not None
            j += 1
        last = j - 1
        if j < count and (before := _pem_closing(items[j])) is not None:
            material = material or _PEM_MATERIAL.search(before) is not None
            last = j
            j += 1
        if last > i and material:
            blocks.append((i, last))
        i = max(j, i + 1) if last > i else i + 1
    return blocks


def _pem_body(text: str) -> bool:
    return _PEM_BODY.fullmatch(text) is not None


def _pem_opening(item: object) -> str | None:
    """What follows the BEGIN line of an item that opens a key and does not close it, else None."""
    if not isinstance(item, str):
        return None
    at = item.rfind("-----BEGIN")
    match = _PEM_BEGIN.match(item, at) if at >= 0 else None
    if match is None:
        return None
    rest = item[match.end() :]
    return rest if _pem_body(rest) else None


def _pem_closing(item: object) -> str | None:
    """What precedes the END line of an item that closes a key, else None."""
    if not isinstance(item, str):
        return None
    at = item.find("-----END")
    if at < 0 or _PEM_END.match(item, at) is None:
        return None
    before = item[:at]
    return before if _pem_body(before) else None


# -- the tables ---------------------------------------------------------------------


def pii_rules(kinds: Iterable[str]) -> tuple[Rule, ...]:
    """The rules for the given PII kinds, in table order; an unknown kind is an error."""
    wanted = set(kinds)
    unknown = sorted(wanted - set(PII_KINDS))
    if unknown:
        raise InvalidArgument(f"unknown PII kind; known kinds: {', '.join(PII_KINDS)}")
    # pii.py builds Rule objects from this module, so it is imported when first needed.
    from safepoint.scrub.pii import PII_RULES  # noqa: PLC0415

    return tuple(rule for rule in PII_RULES if rule.kind in wanted)


def default_scanner(pii: Iterable[str] = ()) -> RuleScanner:
    """The secret rules plus the chosen PII kinds; built once per distinct set of kinds."""
    kinds = frozenset(pii)
    pii_rules(kinds)  # validates the kinds before anything is cached
    return _scanner_for(kinds)


@functools.lru_cache(maxsize=64)
def _scanner_for(kinds: frozenset[str]) -> RuleScanner:
    from safepoint.scrub.token_rules import SECRET_RULES  # noqa: PLC0415  (the table imports Rule from here)

    return RuleScanner((*SECRET_RULES, *pii_rules(kinds)))


def __getattr__(name: str) -> tuple[Rule, ...]:
    # ``SECRET_RULES`` is re-exported lazily: token_rules imports ``Rule`` from this module.
    if name == "SECRET_RULES":
        from safepoint.scrub.token_rules import SECRET_RULES  # noqa: PLC0415

        return SECRET_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
