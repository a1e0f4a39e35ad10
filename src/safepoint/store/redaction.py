"""What a redaction takes out, and the one way a stored value is redacted: ``Redaction``, ``ValueRedactor``.

A redaction (``safepoint redact``, ``redact_store``) rescans what a store
already holds with a scrubber built for it: registered secrets (they become
references, resolvable on load like a save's), literal values (a customer's
e-mail address under a deletion request: they become ``[REDACTED:value-N]``
for good), rule names and PII kinds. Each stored value that might hold a
finding is turned back into what a save was given — its references typed
(``references.from_stored``), its blobs inlined — then scrubbed and its large
values offloaded exactly as a save does it (``prepare.py``), so what a
redaction writes is what a save with that scrubber would have written, and a
value with nothing to find keeps its bytes (and a blob its name).

Nothing here quotes a value: findings are counted by rule and by place.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from safepoint import codec
from safepoint.errors import InvalidArgument
from safepoint.scrub import Found, Scrubber, Secrets

from .blob_targets import BlobTarget
from .large_values import BLOB_MARK, BlobPolicy, BlobSink, find_refs, inline, offload
from .references import from_stored

VALUE_NAME = "value-{}"  # a literal value's name in its marker: [REDACTED:value-1]
_COUNTERS, _AFTER_COUNTERS = b'{"counters":', b',"created_at":'  # a header's first two keys
_MEMO = 10_000  # entries a memo of repeated small values keeps (label sets, counter names)


class Redaction:
    """What to take out of a store: ``secrets`` (a ``safepoint.Secrets``: each value becomes a
    reference to its name), ``values`` (literal strings, at least 8 characters: each becomes
    ``[REDACTED:value-N]``), ``rules`` (names of the scrubber's token rules, or True for all of
    them) and ``pii`` (kinds, as ``open_store``'s ``pii=``). At least one must be given."""

    def __repr__(self) -> str:  # never the values
        return f"Redaction({self.describe()!r})"

    def __init__(
        self,
        *,
        secrets: Secrets | None = None,
        values: Iterable[str] = (),
        rules: bool | Iterable[str] = (),
        pii: bool | Iterable[str] = (),
    ) -> None:
        if secrets is not None and not isinstance(secrets, Secrets):
            raise InvalidArgument(f"secrets must be a safepoint.Secrets, not {type(secrets).__name__}")
        if isinstance(values, str) or not isinstance(values, Iterable):
            raise InvalidArgument("values must be a list of strings")
        values = list(values)
        if not all(isinstance(value, str) for value in values):
            raise InvalidArgument("values must be a list of strings")
        literal = Secrets()
        for index, value in enumerate(values, 1):
            literal.add(VALUE_NAME.format(index), value)  # too short a value: InvalidArgument, unquoted
        self._literal_rules = frozenset(f"secret:{name}" for name in literal.names())
        if secrets is not None and set(secrets.names()) & set(literal.names()):
            raise InvalidArgument("secret names of the form value-N are taken by literal values: rename it")
        rule_names: tuple[str, ...] = () if rules is True or rules is False else tuple(rules)
        self.all_rules = rules is True
        self.secret_names = tuple(sorted(secrets.names())) if secrets is not None else ()
        self.rule_names = rule_names
        self.values = len(values)
        self._values = tuple(values)  # in memory only: never stored, logged or shown
        self._secrets = secrets
        scrubbers: list[Scrubber] = []
        self.pii = _kinds(pii)
        if (secrets is not None and len(secrets)) or rules is True or rule_names or self.pii:
            # Secrets become references (the default policy); rules and PII their markers.
            scrubbers.append(Scrubber(secrets=secrets, rules=True if rules is True else rule_names, pii=pii))
        if values:
            scrubbers.append(Scrubber(secrets=literal, policy="redact", rules=False))
        if not scrubbers:
            raise InvalidArgument("give secrets, values, rules or PII kinds to redact")
        self.scrubbers = tuple(scrubbers)
        self._texts: dict[str, bool] = {}  # run ids and label keys seen: the same ones recur
        self._looks = tuple(scrubber.needs_walk_encoded for scrubber in self.scrubbers)

    @property
    def id(self) -> str:
        """The request's name in the audit records: a digest of what it names (secret names,
        rules, PII kinds, how many literal values — never a value), so that a rerun of the same
        request after a kill completes the records it began instead of adding others. Two
        requests of the same shape share it on a plain store; ``id_for`` tells them apart on
        an encrypted one."""
        shape = codec.encode(self.describe())
        return hashlib.sha256(shape).hexdigest()[:16]

    def id_for(self, keyed: Callable[[bytes], bytes] | None) -> str:
        """``id`` on a plain store; on an encrypted one (``keyed``: its index key's digest, as
        the checkpoint digests are keyed), a digest of the shape *and* the values themselves,
        so that two deletion requests of one value each keep records of their own while a
        rerun of either completes its own — and nothing without the key can test a guess."""
        if keyed is None:
            return self.id
        held = self._secrets
        secret_values = sorted(held.value(name) for name in self.secret_names) if held is not None else []
        material = codec.encode([self.describe(), sorted(self._values), secret_values])
        return keyed(hashlib.sha256(material).digest()).hex()[:16]

    def describe(self) -> dict[str, Any]:
        """What the request names, for the audit record and the report: no value."""
        return {
            "secrets": list(self.secret_names),
            "rules": "all" if self.all_rules else list(self.rule_names),
            "pii": list(self.pii),
            "values": self.values,
        }

    def is_for_good(self, rule: str) -> bool:
        """Whether a finding under ``rule`` was replaced by a marker for good (a rule's, a
        literal value's), not by a reference a load resolves again (a registered secret's)."""
        return not rule.startswith("secret:") or rule in self._literal_rules

    def might_match(self, data: bytes | memoryview) -> bool:
        """Whether canonical JSON bytes might hold a finding (one look per scrubber)."""
        looks = self._looks
        return looks[0](data) if len(looks) == 1 else any(look(data) for look in looks)

    def masked(self, text: str) -> str:
        """``text`` (a run id to report) with each finding replaced by its marker: a report
        names the run whose id holds a value without printing the value."""
        for scrubber in self.scrubbers:
            found = Found("redact", "label")
            text = scrubber.scrub_strings({"": text}, "label", found, values_too=True)[0][""]
        return text

    def finds_in_text(self, text: str) -> bool:
        """Whether a label's text (a run id, a label key or value) holds a finding: its masked
        form differs (every finding becomes a marker), remembered per text."""
        known = self._texts.get(text)
        if known is not None:
            return known
        found_any = self.masked(text) != text
        if len(self._texts) >= _MEMO:
            self._texts.clear()
        self._texts[text] = found_any
        return found_any


def _kinds(pii: bool | Iterable[str]) -> tuple[str, ...]:
    if pii is True:
        from safepoint.scrub.pii import PII_KINDS  # noqa: PLC0415  (the table compiles on first use)

        return tuple(PII_KINDS)
    if pii is False:
        return ()
    return tuple(pii)  # checked by the Scrubber above


@dataclass(frozen=True, slots=True)
class RedactionRecord:
    """One redaction's audit record of one run (``Store.redactions``): when, what it named
    (secret names, rules, PII kinds, how many literal values), how many values it replaced
    by rule (``counts``) and by step (``steps``), and whether the record is as written
    (``intact``: its check value holds — keyed under the index key on an encrypted store)."""

    redaction_id: str
    at: datetime
    named: dict[str, Any]
    counts: dict[str, int]
    steps: dict[int, int]
    intact: bool

    @property
    def found(self) -> int:
        return sum(self.counts.values())

    def named_text(self) -> str:
        """What the redaction named, in words: "secrets API_KEY; rules jwt; 1 literal value"."""
        named, parts = self.named, []
        if named.get("secrets"):
            parts.append("secrets " + ", ".join(map(str, named["secrets"])))
        rules = named.get("rules")
        if rules == "all":
            parts.append("all rules")
        elif rules:
            parts.append("rules " + ", ".join(map(str, rules)))
        if named.get("pii"):
            parts.append("pii " + ", ".join(map(str, named["pii"])))
        if named.get("values"):
            parts.append(f"{named['values']} literal value{'s' if named['values'] != 1 else ''}")
        return "; ".join(parts) or "-"


Fetch = Callable[[list[str]], Mapping[str, bytes]]


class ValueRedactor:
    """Redacts stored values of one store: JSON values, message bodies, labels, counter names.

    ``fetch`` gives blobs' contents by digest (as the load does: opened, verified); new blobs
    a redaction makes collect in ``sink`` (its ``pending``, written before the rows that
    reference them commit). ``counts`` adds up the findings by rule (``total`` their sum),
    ``places`` by rule and path (a header's report); ``scanned`` counts the bytes looked at.
    An old blob a redacted value no longer references is left to ``drop_unreferenced``.
    """

    def __init__(self, redaction: Redaction, blobs: BlobTarget | None, policy: BlobPolicy) -> None:
        self.redaction = redaction
        self.blobs = blobs
        self.policy = policy
        self.fetch: Fetch = _no_blobs
        self.counts: Counter[str] = Counter()
        self.total = 0  # sum of counts, kept as they grow (asked after every row)
        self.places: Counter[tuple[str, str]] = Counter()  # findings by (rule, path): a header's report
        self.sink = BlobSink(blobs.digest_of) if blobs is not None else BlobSink()
        self.scanned = 0  # bytes of stored values looked at, over the whole redaction (its pace)
        self._strings: dict[tuple[Any, ...], tuple[dict[str, Any] | None, Counter[tuple[str, str]]]] = {}
        self._blob_might: dict[str, bool] = {}  # digest -> might its content hold a finding
        self._clean_counters: dict[bytes, bool] = {}  # a header's counters, as stored -> no finding
        self._counted: set[str] = set()  # blobs whose bytes were counted as scanned

    def start(self, fetch: Fetch) -> None:
        """A new unit of work (a run): fresh counts and pending blobs; the blob look memo stays."""
        self.fetch = fetch
        self.counts = Counter()
        self.total = 0
        self.places = Counter()
        self.sink = BlobSink(self.sink.digest_of)

    # -- the values ------------------------------------------------------------

    def might_hold(self, body: bytes) -> bool:
        """Whether a stored body might hold a finding: its bytes, or a blob it references."""
        self.scanned += len(body)
        if self.redaction.might_match(body):
            return True
        return BLOB_MARK in body and self._blobs_might(_blob_digests(body))

    def header_might_hold(self, header: bytes) -> bool:
        """Whether a stored header might hold a finding. Its counter names (``tokens_in`` wakes
        the token rule) are left out of the look and checked once per set of names, as a save
        proves them once (``scrub.proven``): canonical JSON sorts ``counters`` first and
        ``created_at`` after it, so the bytes between are the counters, found without a decode."""
        if not self.redaction.might_match(header):
            return BLOB_MARK in header and self._blobs_might(_blob_digests(header))
        end = header.find(_AFTER_COUNTERS) if header.startswith(_COUNTERS) else -1
        if end < 0:
            return True
        part, rest = header[len(_COUNTERS) : end], header[end:]
        clean = self._clean_counters.get(part)
        if clean is None:
            try:
                counters = codec.decode(part)
            except ValueError:  # a counter name holding the cut's bytes: no shortcut
                return True
            clean = (
                type(counters) is dict
                and self.strings(counters, "counters", values_too=False, tally=False) is None
            )
            if len(self._clean_counters) >= _MEMO:
                self._clean_counters.clear()
            self._clean_counters[part] = clean
        return not clean or self.redaction.might_match(rest) or BLOB_MARK in rest

    def body(self, body: bytes, root: str) -> bytes | None:
        """A stored body's canonical bytes redacted (``might_hold`` said it might hold a
        finding); None when nothing was found."""
        new = self.value(codec.decode(body), root)
        return None if new is None else bytes(codec.encode(new))

    def value(self, stored: Any, root: str, *, look: bool = False) -> Any | None:
        """A decoded stored value redacted (in stored form); None when nothing was found.
        ``look``: look at its canonical bytes first (a header field), as ``Scrubber.scrub`` does."""
        if look:
            encoded = codec.encode(stored)
            if not self.redaction.might_match(encoded) and not self._blobs_might(_blob_digests(encoded)):
                return None
        typed = from_stored(stored)
        links = find_refs(typed, [])
        if links:
            fetched = self.fetch(sorted({link.digest for link in links}))
            for digest, data in fetched.items():
                if digest not in self._counted:  # its bytes count once; the scrub below looks at them
                    self._counted.add(digest)
                    self.scanned += len(data)
            value = inline(typed, fetched)
        else:
            value = typed
        found_any = False
        for index, scrubber in enumerate(self.redaction.scrubbers):
            if index:  # the last scrubber gave the stored form (escaped keys, marked text): typed again
                value = from_stored(value)
            found = Found(scrubber.policy, root)
            # Not "checked": the value's own look first, blobs inlined (a body that woke the
            # look for its blob reference alone is walked only if its contents ask for it).
            value, found = scrubber.scrub(value, root, found)
            if found.counts:
                found_any = True
                self._tally(found.counts)
        if not found_any:
            return None
        if self.blobs is not None:
            value = offload(value, root, self.policy, self.sink)  # large values out again, as a save
        return value

    def strings(
        self, mapping: dict[str, Any], root: str, *, values_too: bool, tally: bool = True
    ) -> dict[str, Any] | None:
        """A flat mapping (labels, counters) with its values (or its keys) redacted as a save
        scrubs them: markers, never references. None when nothing was found."""
        # Every row of a run (and most runs) holds the same labels and counter names: one walk each.
        key = (root, values_too, tuple(mapping.items()))
        memo = self._strings.get(key)
        if memo is None:
            out, places = mapping, Counter[tuple[str, str]]()
            for scrubber in self.redaction.scrubbers:
                found = Found(scrubber.policy, root)
                out, found = scrubber.scrub_strings(out, root, found, values_too=values_too)
                places.update(found.counts)
            if len(self._strings) >= _MEMO:
                self._strings.clear()
            memo = self._strings[key] = (out if places else None, places)
        if tally:  # (a look that only asks does not count what it found)
            self._tally(memo[1])
        return memo[0]

    def _tally(self, places: Counter[tuple[str, str]]) -> None:
        """Findings counted by (rule, path) for the row's report, by rule, and in all."""
        self.places.update(places)
        for (rule, _path), count in places.items():
            self.counts[rule] += count
            self.total += count

    # -- blobs -----------------------------------------------------------------

    def _blobs_might(self, digests: list[str]) -> bool:
        unknown = [digest for digest in digests if digest not in self._blob_might]
        if unknown:
            for digest, data in self.fetch(unknown).items():
                self._blob_might[digest] = self._data_might(data)
                if digest not in self._counted:
                    self._counted.add(digest)
                    self.scanned += len(data)
        return any(self._blob_might.get(digest, True) for digest in digests)

    def blob_holds(self, data: bytes) -> bool:
        """Whether a blob's content holds a finding: walked, not only looked at, so that a
        loose blob is deleted only when it holds what this redaction takes out."""
        try:
            value: Any = data.decode("utf-8")
        except UnicodeDecodeError:
            value = data  # bytes, scrubbed as a save scrubs them
        return any(scrubber.scrub(value, "blob")[1].counts for scrubber in self.redaction.scrubbers)

    def _data_might(self, data: bytes) -> bool:
        try:
            encoded = orjson.dumps(data.decode("utf-8"))  # a text blob, as its JSON string
        except UnicodeDecodeError:
            return True  # bytes: walked, as a save walks every bytes value
        return self.redaction.might_match(encoded)


def _no_blobs(digests: list[str]) -> Mapping[str, bytes]:
    del digests
    return {}


def _blob_digests(body: bytes) -> list[str]:
    """The blob digests a stored body references (only bodies that show the mark are decoded)."""
    if BLOB_MARK not in body:
        return []
    from .large_values import find_stored_refs  # noqa: PLC0415

    return find_stored_refs(codec.decode(body), [])
