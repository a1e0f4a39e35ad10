"""The scrubber: a list of plain callables every checkpoint passes before any byte is written.

Each *step* is a callable ``step(text, found) -> value`` applied to every
string (dict keys included) of a checkpoint field, in order: registered
secrets first (so they become references), then the token rules, then any
steps the user adds. A step reports what it replaced with ``found.add(rule)``;
the scrubber knows the path and the policy:

* ``reference`` (default) — registered secrets become ``{"$secret": NAME}``
  or ``[SECRET:NAME]`` markers (resolvable on load); rule matches become
  ``[REDACTED:<rule>]``;
* ``redact`` — registered secrets become ``[REDACTED:NAME]`` too, for good;
* ``raise`` — the save is refused with ``SecretLeak`` naming path and rule.

Speed: a field is first encoded to JSON (which the store does anyway) and
each step's ``might_match`` looks at that one text — an automaton pass in C.
Only a field where something might match is walked value by value. A step
without ``might_match`` makes every field walk (correct, just slower).

The scrubber is deterministic and idempotent — scrubbing scrubbed data
changes nothing — which is what lets the store compare a checkpoint's
messages with the scrubbed ones it holds (DESIGN: pitfalls).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from safepoint import codec
from safepoint.errors import InvalidArgument, SecretLeak
from safepoint.model import ScrubReport

from .known import Secrets, find_known, marker

if TYPE_CHECKING:
    from .rules import RuleScanner

Policy = Literal["reference", "redact", "raise"]
_CACHE_MAX_TEXT = 256  # characters: longer strings are rarely repeated, and cost more to hash
_CACHE_SIZE = 8192  # entries; cleared when full (a save rarely needs more than a few dozen)
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
        out = str(self.parts[0])
        for part in self.parts[1:]:
            if isinstance(part, int):
                out += f"[{part}]"
            elif part.isidentifier():
                out += f".{part}"
            else:
                out += f"[{part!r}]"
        return out

    def add(self, rule: str, count: int = 1) -> None:
        if self.names is not None:
            self.names.append(rule)
        path = self.path()
        if self.policy == "raise":
            raise SecretLeak(path, rule)
        self.counts[(rule, path)] += count


class Step(Protocol):
    def __call__(self, text: str, found: Found) -> Any: ...


class KnownSecretsStep:
    """Registered secret values, in every encoding, via one automaton."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets

    def might_match(self, text: str) -> bool:
        automaton = self.secrets.prefilter()
        return automaton is not None and automaton.any(text)

    def __call__(self, text: str, found: Found) -> Any:
        hits = find_known(self.secrets.automaton(), text)
        if not hits:
            return text
        for hit in hits:
            found.add(f"secret:{hit.name}")
        reference = found.policy == "reference"
        whole = hits[0]
        is_whole = len(hits) == 1 and whole.encoding == "raw" and whole.start == 0 and whole.end == len(text)
        if reference and is_whole and not found.as_key:
            return {"$secret": whole.name}
        pieces, last = [], 0
        for hit in hits:
            pieces.append(text[last : hit.start])
            pieces.append(marker(hit.name, hit.encoding) if reference else f"[REDACTED:{hit.name}]")
            last = hit.end
        pieces.append(text[last:])
        return "".join(pieces)


class RulesStep:
    """Well-known token formats (and opt-in PII) from the rule table."""

    def __init__(self, scanner: RuleScanner) -> None:
        self.scanner = scanner

    def might_match(self, text: str) -> bool:
        # The scanner's own prefilter: exact-case prefixes and key spellings,
        # valid on a field's JSON text too (no trigger holds a quote or backslash).
        return self.scanner.might_match(text)

    def __call__(self, text: str, found: Found) -> Any:
        redacted, names = self.scanner.redact(text)
        for name in names:
            found.add(name)
        return redacted


class Scrubber:
    """The pipeline a store runs on every checkpoint before writing it.

    ``Scrubber(secrets=Secrets().add_env("OPENAI_API_KEY"), policy="reference",
    pii=("email",))``: registered secrets, the token rules (``rules=False``
    turns them off), PII kinds to redact (``"email"``, ``"phone"``, ``"card"``,
    ``"iban"``, ``"ssn"``, or ``pii=True`` for all), and ``steps``: your own
    callables, run after the built-in ones.
    """

    def __init__(
        self,
        *,
        secrets: Secrets | None = None,
        policy: Policy | str = "reference",
        rules: bool = True,
        pii: bool | Iterable[str] = (),
        steps: Sequence[Step] = (),
    ) -> None:
        if policy not in POLICIES:
            raise InvalidArgument(f"secret policy {policy!r} is not one of {', '.join(POLICIES)}")
        if secrets is not None and not isinstance(secrets, Secrets):
            raise InvalidArgument(f"secrets must be a safepoint.Secrets, not {type(secrets).__name__}")
        self.policy = str(policy)
        self.secrets = secrets if secrets is not None else Secrets()
        built: list[Step] = [KnownSecretsStep(self.secrets)]
        if rules or pii:
            # The rule table compiles its patterns on first use: only stores that scrub pay.
            from .rules import PII_KINDS, RuleScanner, default_scanner, pii_rules  # noqa: PLC0415

            kinds = PII_KINDS if pii is True else () if pii is False else tuple(pii)
            scanner = default_scanner(pii=kinds) if rules else RuleScanner(pii_rules(kinds))
            built.append(RulesStep(scanner))
        for step in steps:
            if not callable(step):
                raise InvalidArgument(f"scrubber step {step!r} is not callable")
        self.steps: tuple[Step, ...] = (*built, *steps)
        # Only the built-in steps are known to be deterministic enough to cache.
        self._cacheable = not steps
        self._cache: dict[tuple[str, bool], tuple[Any, tuple[str, ...]]] = {}
        self._cache_version = self.secrets.version

    # -- whole fields ------------------------------------------------------

    def scrub(
        self, value: Any, root: str, found: Found | None = None, *, checked: bool = False
    ) -> tuple[Any, Found]:
        """``value`` scrubbed (the same object when nothing matched) and the findings.

        ``checked``: the caller already saw ``might_match`` say yes for a text
        holding this value, so the value is walked without a look of its own.
        """
        found = found if found is not None else Found(self.policy, root)
        if not checked and not self._might_match(codec.encode(value).decode()):
            return value, found
        found.parts = [root]
        return self._walk(value, found), found

    def scrub_encoded(self, value: Any, encoded: bytes, root: str, found: Found) -> tuple[Any, bytes]:
        """``value`` scrubbed and its canonical bytes, given its canonical bytes ``encoded``
        (the same two objects back when nothing was replaced).

        A large value (a long tool output) is walked without the look first:
        some trigger is then almost always somewhere in it, and the look would
        only scan the text a second time before the walk scans it again.
        """
        if len(encoded) <= _LOOK_FIRST_MAX_BYTES and not self._might_match(encoded.decode()):
            return value, encoded
        found.parts = [root]
        scrubbed = self._walk(value, found)
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
        if not checked and not self._might_match(codec.encode(mapping).decode()):
            return mapping, found
        cache = self._live_cache()
        out: dict[str, Any] = {}
        for key, value in mapping.items():
            hit = cache.get((key, True)) if cache is not None and len(key) <= _CACHE_MAX_TEXT else None
            new_key = hit[0] if hit is not None and not hit[1] else self._scrub_key(key, found)
            new_value = value
            if values_too and isinstance(value, str):
                found.parts.append(new_key)
                found.as_key = True
                new_value = self._scrub_str(value, found)
                found.as_key = False
                found.parts.pop()
            out[new_key] = new_value
        return out, found

    def scrub_text(self, text: str) -> str:
        """One string scrubbed as a dict key would be (always a str; findings dropped)."""
        found = Found("redact" if self.policy == "raise" else self.policy, "text")
        found.as_key = True
        return cast(str, self._scrub_str(text, found))

    def might_match(self, text: str) -> bool:
        """Whether any step might replace something in this (JSON) text."""
        return self._might_match(text)

    def _might_match(self, text: str) -> bool:
        for step in self.steps:
            check = getattr(step, "might_match", None)
            if check is None or check(text):
                return True
        return False

    # -- the walk ------------------------------------------------------------

    def _walk(self, value: Any, found: Found) -> Any:
        if isinstance(value, str):
            return self._scrub_str(value, found)
        if isinstance(value, dict):
            # Fast path for what most dicts hold: keys and short values the
            # cache knows to be clean, and numbers — no path bookkeeping.
            cache = self._live_cache()
            out: dict[str, Any] = {}
            for key, child in value.items():
                hit = cache.get((key, True)) if cache is not None and len(key) <= _CACHE_MAX_TEXT else None
                new_key = hit[0] if hit is not None and not hit[1] else self._scrub_key(key, found)
                kind = type(child)
                if kind is str:
                    if cache is not None and len(child) <= _CACHE_MAX_TEXT:
                        hit = cache.get((child, False))
                        if hit is not None and not hit[1]:
                            out[new_key] = hit[0]
                            continue
                elif kind is int or kind is float or kind is bool or child is None:
                    out[new_key] = child
                    continue
                found.parts.append(new_key)
                out[new_key] = self._walk(child, found)
                found.parts.pop()
            return out
        if isinstance(value, list):
            items = []
            for index, child in enumerate(value):
                found.parts.append(index)
                items.append(self._walk(child, found))
                found.parts.pop()
            return items
        return value

    def _scrub_key(self, key: str, found: Found) -> str:
        found.parts.append("<key>")
        found.as_key = True
        try:
            return cast(str, self._scrub_str(key, found))
        finally:
            found.as_key = False
            found.parts.pop()

    def _live_cache(self) -> dict[tuple[str, bool], tuple[Any, tuple[str, ...]]] | None:
        """The short-string cache, emptied if secrets changed since; None if not cacheable."""
        if not self._cacheable:
            return None
        if self._cache_version != self.secrets.version:
            self._cache.clear()
            self._cache_version = self.secrets.version
        return self._cache

    def _scrub_str(self, text: str, found: Found) -> Any:
        # Short strings repeat from save to save (keys, labels, statuses, tool
        # names): the built-in steps are deterministic, so their result for a
        # short string is remembered, with the rules it reported.
        cacheable = self._cacheable and len(text) <= _CACHE_MAX_TEXT
        if cacheable:
            self._live_cache()
            hit = self._cache.get((text, found.as_key))
            if hit is not None:
                for name in hit[1]:
                    found.add(name)
                return hit[0]
            found.names = []
        try:
            value: Any = text
            for step in self.steps:
                value = step(value, found)
                if not isinstance(value, str):
                    break
            if found.as_key and not isinstance(value, str):
                raise InvalidArgument("a scrubber step must return a str for dict keys and labels")
            if cacheable:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.clear()
                assert found.names is not None
                self._cache[(text, found.as_key)] = (value, tuple(found.names))
            return value
        finally:
            found.names = None


def report_of(founds: Iterable[Found]) -> ScrubReport:
    return ScrubReport.merge(f.counts for f in founds)
