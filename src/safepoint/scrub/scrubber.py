"""The scrubber: a list of plain callables every checkpoint passes before any byte is written —
:class:`Scrubber`, and its built-in steps :class:`KnownSecretsStep` and :class:`RulesStep`.

Each *step* is a callable ``step(text, found) -> value`` applied to every
string (dict keys included) of a checkpoint field, in order: registered
secrets first (so they become references), then the token rules, then any
steps the user adds. A step reports what it replaced with ``found.add(rule)``
(:class:`Found`), which knows the path and the policy:

* ``reference`` (default) — registered secrets become a ``SecretRef``
  (``{"$secret": NAME}``) or ``[SECRET:NAME]`` markers (resolvable on load);
  rule matches become ``[REDACTED:<rule>]``;
* ``redact`` — registered secrets become ``[REDACTED:NAME]`` too, for good;
* ``raise`` — the save is refused with ``SecretLeak`` naming path and rule.

Only what the scrubber writes is ever interpreted (``safepoint.refs``). A step
that writes markers returns a ``ScrubbedText`` recording where they are, so
the next step never matches them again and a load can resolve exactly those;
marker-shaped text from input is plain text, judged like any other. Input
dict keys beginning with ``$`` are escaped (one more ``$``) so no input can
pass for a reference. ``bytes`` are scanned too (as UTF-8, bad bytes
replaced) and, if anything matches, replaced whole by a ``bytes`` placeholder.
A user step gets a ``ScrubbedText`` when earlier steps wrote markers; if it
returns a plain ``str`` instead, those markers become plain text (never
resolved — safe, only less useful). A step may offer ``might_match(text)``,
a cheap look at a field's JSON text (False: it would replace nothing there).

Speed: a field is first encoded to JSON (which the store does anyway) and
one automaton pass over those bytes looks for everything the built-in steps
look for and the stored shapes (:mod:`.look`); a user's step is asked through
its ``might_match`` on the text. Only a field where something might match, or
that holds ``$`` keys or markers, is walked value by value. A step without
``might_match`` makes every field walk (correct, just slower). Counter names
that came out unchanged are not looked at again on the next save of the same
names (:mod:`.proven`).

The scrubber is deterministic and idempotent — scrubbing a loaded (scrubbed)
value gives back its stored form — which is what lets the store compare a
checkpoint's messages with the scrubbed ones it holds (DESIGN: pitfalls).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from safepoint import codec
from safepoint.errors import InvalidArgument, SecretLeak
from safepoint.refs import ScrubbedText, SecretRef, Span

from .automata import Hit, find_known
from .engine.marks import splice
from .known import Secrets, marker
from .look import STORED_SHAPES, Look
from .proven import ProvenNames
from .walk import Report, Step, Walk

if TYPE_CHECKING:
    from .engine.scanner import RuleScanner

Policy = Literal["reference", "redact", "raise"]
POLICIES: tuple[str, ...] = ("reference", "redact", "raise")
_LOOK_FIRST_MAX_BYTES = 8192  # larger encoded values are walked straight away (see scrub_encoded)


class Found:
    """Where a step reports a replacement: records ``(rule, path)`` or, under
    the ``raise`` policy, refuses the save naming them."""

    __slots__ = ("as_key", "counts", "names", "parts", "policy")

    def __init__(self, policy: str, root: str) -> None:
        self.policy = policy
        self.counts: Counter[tuple[str, str]] = Counter()
        self.parts: list[str | int] = [root]
        self.as_key = False  # the text being scrubbed is a dict key or a label: it must stay a str
        self.names: list[str] | None = None  # set while the scrubber records a result for its cache

    def path(self) -> str:
        """Where the walk is, as error paths show it: keys (already scrubbed) with
        control characters escaped, a long key as ``[<long key>]``, a long path
        cut in the middle — a key can be megabytes of text."""
        segments = [str(self.parts[0])]
        for part in self.parts[1:]:
            if isinstance(part, int):
                segments.append(f"[{part}]")
            elif len(part) > codec.MAX_KEY_CHARS:
                segments.append("[<long key>]")
            else:
                segments.append(codec.key_segment(part, 0))
        return codec.join_path(segments)

    def probe(self) -> Found:
        """A fresh record for looking inside ``bytes``: markers, never references, and the rules
        it counts kept apart (``bytes`` are replaced whole, never edited, whatever the policy)."""
        probe = Found("redact", "bytes")
        probe.as_key = True
        return probe

    def add(self, rule: str, count: int = 1) -> None:
        if self.names is not None:
            self.names.extend([rule] * count)
        path = self.path()
        if self.policy == "raise":
            raise SecretLeak(path, rule)
        self.counts[(rule, path)] += count


class Scrubber:
    """The pipeline a store runs on every checkpoint before writing it.

    ``Scrubber(secrets=Secrets().add_env("OPENAI_API_KEY"), policy="reference",
    pii=("email",))``: registered secrets, the token rules (``rules=False``
    turns them off; a list of rule names keeps only those), PII kinds to
    redact (``"email"``, ``"phone"``, ``"card"``, ``"iban"``, ``"ssn"``, or
    ``pii=True`` for all), and ``steps``: your own callables, run after the
    built-in ones.
    """

    def __init__(
        self,
        *,
        secrets: Secrets | None = None,
        policy: Policy | str = "reference",
        rules: bool | Iterable[str] = True,
        pii: bool | Iterable[str] = (),
        steps: Sequence[Step] = (),
    ) -> None:
        if policy not in POLICIES:
            raise InvalidArgument(f"secret policy must be one of {', '.join(POLICIES)}")
        if secrets is not None and not isinstance(secrets, Secrets):
            raise InvalidArgument(f"secrets must be a safepoint.Secrets, not {type(secrets).__name__}")
        self.policy = str(policy)
        self.secrets = secrets if secrets is not None else Secrets()
        built: list[Step] = [KnownSecretsStep(self.secrets)]
        kinds = _pii_kinds(pii)
        scanner: RuleScanner | None = None
        if rules or kinds:
            # The rule table compiles its patterns on first use: only stores that scrub pay.
            from .engine.scanner import RuleScanner  # noqa: PLC0415
            from .rules import default_scanner, pii_rules, rules_named  # noqa: PLC0415

            if rules is True:
                scanner = default_scanner(pii=kinds)
            else:  # no secret rules, or only the named ones (a redaction's ``rules``)
                named = rules_named(_rule_names(rules)) if rules is not False else ()
                scanner = RuleScanner((*named, *pii_rules(kinds)))
            built.append(RulesStep(scanner))
        for step in steps:
            if not callable(step):
                raise InvalidArgument(f"scrubber step of type {type(step).__name__} is not callable")
        self.steps: tuple[Step, ...] = (*built, *steps)
        # Only the built-in steps are known to be deterministic enough to cache.
        self._walk = Walk(self.steps, self.secrets, cacheable=not steps)
        self._look = Look(self.secrets, scanner, steps)
        self._proven = ProvenNames(self.secrets, enabled=not steps)

    def scrub(
        self, value: Any, root: str, found: Found | None = None, *, checked: bool = False
    ) -> tuple[Any, Found]:
        """``value`` in stored form (the same object when nothing changed) and the findings.

        Stored form: secrets replaced, input dict keys beginning with ``$``
        escaped, store-written references kept (``safepoint.refs``), ``bytes``
        scanned and, with findings, replaced whole by a ``bytes`` placeholder.
        ``checked``: the caller already saw ``needs_walk`` say yes for a text
        holding this value, so the value is walked without a look of its own.
        """
        found = found if found is not None else Found(self.policy, root)
        if not checked:
            try:
                encoded: bytes | None = codec.encode(value)
            except TypeError:  # bytes inside (JSON has no bytes): always walked
                encoded = None
            if encoded is not None and not self._look(encoded):
                return value, found
        found.parts = [root]
        return self._walk.value(value, found), found

    def scrub_fields(
        self,
        values: dict[str, Any],
        labels: dict[str, str],
        counters: dict[str, Any],
        found: Found,
        *,
        checked: bool = False,
    ) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
        """A checkpoint header's fields in stored form, in one call: each of ``values``
        (field name to value) as :meth:`scrub` does it, labels (keys and values) and
        counter names as strings — queryable columns, so markers as plain text, never
        references. ``found`` records them all, each under its field's name. Counter
        names an earlier save proved (:mod:`.proven`) are kept without a look."""
        walked = {name: self.scrub(value, name, found, checked=checked)[0] for name, value in values.items()}
        labels, _ = self.scrub_strings(labels, "labels", found, values_too=True, checked=checked)
        if not self._proven.holds(counters):
            version, findings = self.secrets.version, found.counts.total()
            given = counters
            counters, _ = self.scrub_strings(given, "counters", found, values_too=False, checked=checked)
            if found.counts.total() == findings and list(counters) == list(given):
                self._proven.add(given, version)  # every name came out as it went in
        return walked, labels, counters

    def header_needs_walk(self, encoded: bytes, counters: dict[str, Any]) -> bool:
        """Whether a checkpoint header must be walked (:meth:`scrub_fields`), given its canonical
        JSON ``encoded``: a JSON array whose last item is ``counters``.

        Counter names an earlier save proved are not looked at again: the look covers the
        bytes before them (a word across the cut could only join two strings, and every
        string is scrubbed alone). A whole header the look passes proves its counter names.
        """
        if counters and self._proven.holds(counters):
            tail = codec.encode(counters) + b"]"
            if encoded.endswith(tail):
                return self._look(memoryview(encoded)[: len(encoded) - len(tail)])
        version = self.secrets.version
        if self._look(encoded):
            return True
        self._proven.add(counters, version)
        return False

    def scrub_encoded(self, value: Any, encoded: bytes, root: str, found: Found) -> tuple[Any, bytes]:
        """``value`` in stored form and its canonical bytes, given its canonical bytes ``encoded``
        (the same two objects back when nothing was replaced).

        A large value (a long tool output) is walked without the look first:
        some trigger is then almost always somewhere in it, and the look would
        only scan the text a second time before the walk scans it again.
        """
        if len(encoded) <= _LOOK_FIRST_MAX_BYTES and not self._look(encoded):
            return value, encoded
        found.parts = [root]
        scrubbed = self._walk.value(value, found)
        if scrubbed == value:
            return value, encoded  # nothing replaced: keep the bytes (and the caller's object)
        return scrubbed, codec.encode(scrubbed)

    def scrub_strings(
        self,
        mapping: dict[str, Any],
        root: str,
        found: Found | None = None,
        *,
        values_too: bool,
        checked: bool = False,
    ) -> tuple[dict[str, Any], Found]:
        """A flat mapping (labels, counters) with its keys — and string values,
        with ``values_too`` — scrubbed as strings (markers, never references).
        ``found`` and ``checked`` as for :meth:`scrub`."""
        if found is None:
            found = Found(self.policy, root)
        else:
            found.parts = [root]
        # (The look also wakes on a "$" string, which a flat mapping keeps as it is: a needless walk.)
        if not checked and not self._look(codec.encode(mapping)):
            return mapping, found
        return self._walk.mapping(mapping, found, values_too=values_too), found

    def scrub_text(self, text: str) -> str:
        """One string scrubbed as a dict key would be (always a str; findings dropped)."""
        found = Found("redact" if self.policy == "raise" else self.policy, "text")
        found.as_key = True
        return cast(str, self._walk.string(text, found))

    def might_match(self, text: str) -> bool:
        """Whether any step might replace something in this (JSON) text."""
        return self._might_match(text)

    def needs_walk(self, text: str) -> bool:
        """Whether a value with this (JSON) text must be walked: a step might
        match, or it may hold ``$`` keys to escape or store-written references.
        (A store looks at the encoded bytes instead: :meth:`needs_walk_encoded`.)"""
        return any(shape in text for shape in STORED_SHAPES) or self._might_match(text)

    def needs_walk_encoded(self, encoded: bytes | memoryview) -> bool:
        """:meth:`needs_walk` for a value's canonical JSON bytes, in one pass over them."""
        return self._look(encoded)

    def _might_match(self, text: str) -> bool:
        for step in self.steps:
            check = getattr(step, "might_match", None)
            if check is None or check(text):
                return True
        return False


def _rule_names(rules: Iterable[str]) -> tuple[str, ...]:
    """The rule names ``rules=`` gives (a list of names, not one string)."""
    return _strings(rules, "rules must be True, False or a list of rule names")


def _pii_kinds(pii: bool | Iterable[str]) -> tuple[str, ...]:
    """The PII kinds ``pii=`` names (checked against the table when the scanner is built)."""
    if pii is True:
        from .pii import PII_KINDS  # noqa: PLC0415  (the table compiles on first use)

        return PII_KINDS
    if pii is False:
        return ()
    return _strings(pii, "pii must be True, False or a list of PII kinds")


def _strings(given: Any, refusal: str) -> tuple[str, ...]:
    """``given`` as a tuple of strings: a list of them, never one string alone."""
    if isinstance(given, str) or not isinstance(given, Iterable):
        raise InvalidArgument(refusal)
    names = tuple(given)
    if not all(isinstance(name, str) for name in names):
        raise InvalidArgument(refusal)
    return names


# -- the built-in steps ---------------------------------------------------------------


class KnownSecretsStep:
    """Registered secret values, in every encoding, via one automaton."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets

    def might_match(self, text: str) -> bool:
        automaton = self.secrets.prefilter()
        return automaton is not None and automaton.any(text)

    def __call__(self, text: str, found: Report) -> Any:
        hits = find_known(self.secrets.automaton(), text)
        if not hits:
            return text
        kept = marks_of(text)
        if kept:  # a secret never hides inside a marker written earlier; skip look-alike overlaps
            hits = outside(hits, kept)
            if not hits:
                return text
        for hit in hits:
            found.add(f"secret:{hit.name}")
        reference = found.policy == "reference"
        whole = hits[0]
        is_whole = len(hits) == 1 and whole.encoding == "raw" and whole.start == 0 and whole.end == len(text)
        if reference and is_whole and not found.as_key:
            return SecretRef(whole.name)
        replacements = [
            (hit.start, hit.end, marker(hit.name, hit.encoding) if reference else f"[REDACTED:{hit.name}]")
            for hit in hits
        ]
        spliced, marks, _ = splice(text, list(kept), replacements)
        return ScrubbedText(spliced, marks)


class RulesStep:
    """Well-known token formats (and opt-in PII) from the rule table."""

    def __init__(self, scanner: RuleScanner) -> None:
        self.scanner = scanner

    def might_match(self, text: str) -> bool:
        # The scanner's own prefilter: exact-case prefixes and key spellings,
        # valid on a field's JSON text too (triggers holding a backslash are
        # looked for in their JSON-escaped form as well).
        return self.scanner.might_match(text)

    def __call__(self, text: str, found: Report) -> Any:
        # The markers earlier steps wrote are kept as they are; marker-shaped
        # text from input is judged like any other text (the engine's view).
        redacted, names, marks = self.scanner.redact(text, marks_of(text))
        if not names:
            return text
        # One add per rule, not per finding: each add builds the path (dense
        # text has tens of thousands of findings).
        for name, count in Counter(names).items():
            found.add(name, count)
        return ScrubbedText(redacted, marks)


def outside(hits: list[Hit], kept: Sequence[Span]) -> list[Hit]:
    """The hits (sorted, disjoint) that overlap none of the sorted ``kept`` spans,
    in one sweep over both."""
    out: list[Hit] = []
    at = 0
    for hit in hits:
        while at < len(kept) and kept[at][1] <= hit.start:
            at += 1
        if at < len(kept) and kept[at][0] < hit.end:
            continue
        out.append(hit)
    return out


def marks_of(text: str) -> tuple[Span, ...]:
    """The spans of the markers the store wrote in ``text`` (none in a plain ``str``)."""
    return text.marks if isinstance(text, ScrubbedText) else ()
