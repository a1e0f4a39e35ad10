"""Registered secrets: the values a harness holds, found in every encoding.

A harness knows its own credentials (API keys, database passwords). It
registers them here by name; the scrubber then finds each value wherever it
appears — as a whole string, inside text, and in the encodings a harness or a
serializer produces: JSON-escaped (also twice) in the styles JSON libraries
write (``\\/``, ``\\u0026`` for HTML-sensitive or all punctuation, upper- or
lower-case hex, non-ASCII escaped or not), URL-encoded (also twice), HTML
escaped (named, decimal or hex entities), base64 and base64url (at any
alignment, so inside ``Authorization: Basic`` headers too, and across the line
breaks of MIME or PEM wrapping). All variants of all secrets go into one
Aho-Corasick automaton, so the cost of a scan does not grow with the number of
secrets; each value has a fixed number of variants, each a few times its
length, so the automaton's size grows only linearly with the values'.

What a match becomes (``reference`` policy):

* a string that *is* the secret → ``{"$secret": "NAME"}``
* a secret inside text → ``[SECRET:NAME]`` (raw) or ``[SECRET:NAME|enc]``
  where ``enc`` names the encoding, so ``restore`` can put back exactly the
  text that was there. A base64 match that is only part of a longer base64
  token (``user:password`` in a Basic header) becomes
  ``[SECRET:NAME|base64-part]``, and one split by line breaks
  ``[SECRET:NAME|base64-wrapped]``; both stay markers on restore: the
  surrounding bits, or where the lines broke, cannot be rebuilt.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

import orjson

from safepoint.errors import InvalidArgument, UnknownSecret

from .matcher import Matcher

MIN_SECRET_LENGTH = 8
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
# Markers are plain ASCII: they survive JSON, URL and log round trips unchanged.
MARKER = re.compile(r"\[SECRET:([A-Za-z0-9_.\-]{1,128})(?:\|([a-z0-9\-]+))?\]")
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")
_BASE64_ENCODINGS = frozenset({"base64", "base64url", "base64-part"})
_WRAPPED = "base64-wrapped"  # not an _encodings name: _encode gives None, the marker stays


@dataclass(frozen=True, slots=True)
class _Variant:
    name: str
    encoding: str  # "raw", "json", "url", "base64", "base64-part", …
    length: int
    # base64-part only: characters just outside the match that mix the value's
    # bits with its neighbours' (0 or 1 on each side, set by the alignment).
    lead: int = 0
    trail: int = 0


@dataclass(frozen=True, slots=True)
class _JsonStyle:
    """One JSON serializer's choices for the characters it does not write as themselves."""

    hex_set: str | None = ""  # written \uXXXX; None: every character but ASCII letters and digits
    upper: bool = False  # \u003C rather than \u003c
    ascii_only: bool = False  # non-ASCII as \uXXXX (UTF-16 pairs beyond the BMP)
    slash: bool = False  # "/" as \/


# Who writes each style, so a reader can judge what is covered. Sets that differ
# only by characters a value lacks give the same text, which is kept once.
_JSON_STYLES = {
    "json-slash": _JsonStyle(slash=True),  # PHP with JSON_UNESCAPED_UNICODE, JS guarding </script>
    "json-ascii-slash": _JsonStyle(ascii_only=True, slash=True),  # PHP json_encode's default
    "json-upper": _JsonStyle(upper=True),  # Jackson: control characters as \u001F
    "json-ascii-upper": _JsonStyle(upper=True, ascii_only=True),  # Jackson ESCAPE_NON_ASCII
    "json-tag": _JsonStyle("<>&\u2028\u2029"),  # Go encoding/json, Rails
    "json-tag-upper": _JsonStyle("<>&\u2028\u2029", upper=True),  # PHP JSON_HEX_TAG|JSON_HEX_AMP
    "json-html": _JsonStyle("<>&='"),  # Gson's HTML-safe default
    "json-html-upper": _JsonStyle("<>&='", upper=True),
    "json-quote": _JsonStyle("<>&'\""),  # Newtonsoft's EscapeHtml
    "json-quote-upper": _JsonStyle("<>&'\"", upper=True),
    "json-net": _JsonStyle("<>&'\"+`", upper=True, ascii_only=True),  # .NET System.Text.Json
    "json-net-lower": _JsonStyle("<>&'\"+`", ascii_only=True),
    "json-u": _JsonStyle(None, ascii_only=True),  # encoders that escape all punctuation
    "json-u-upper": _JsonStyle(None, upper=True, ascii_only=True),
}
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

# HTML escapers agree on & < > and differ on quotes (and OWASP's "/").
_HTML_BASE = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_STYLES = {
    "html": {'"': "&quot;", "'": "&#x27;"},  # Python html.escape, Django
    "html-text": {},  # html.escape(quote=False), XML text
    "html-39": {'"': "&quot;", "'": "&#39;"},  # Ruby ERB, Rails, lodash
    "html-34": {'"': "&#34;", "'": "&#39;"},  # Go html, MarkupSafe (Jinja2)
    "html-039": {'"': "&quot;", "'": "&#039;"},  # PHP htmlspecialchars(ENT_QUOTES)
    "html-apos": {'"': "&quot;", "'": "&apos;"},  # XML attributes, PHP ENT_HTML5
    "html-slash": {'"': "&quot;", "'": "&#x27;", "/": "&#x2F;"},  # the OWASP cheat sheet
}
# Numeric entities for every character but ASCII letters and digits (ESAPI-like encoders).
_HTML_NUMERIC = {"html-dec": "&#{};", "html-hex": "&#x{:x};", "html-hex-upper": "&#x{:X};"}


def _json_escaped(value: str) -> str:
    return orjson.dumps(value).decode()[1:-1]


def _json_styled(value: str, style: _JsonStyle) -> str:
    """``value`` as a JSON string body written in ``style`` (no quotes)."""
    unit = "\\u{:04X}" if style.upper else "\\u{:04x}"
    out = []
    for ch in value:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif style.hex_set is None or ch in style.hex_set or (style.ascii_only and not ch.isascii()):
            code = ord(ch)
            if code > 0xFFFF:  # JSON has only 16-bit escapes: a surrogate pair
                code -= 0x10000
                out.append(unit.format(0xD800 + (code >> 10)) + unit.format(0xDC00 + (code & 0x3FF)))
            else:
                out.append(unit.format(code))
        elif ch in _JSON_SHORT:
            out.append(_JSON_SHORT[ch])
        elif ch < " ":
            out.append(unit.format(ord(ch)))
        elif ch == "/" and style.slash:
            out.append("\\/")
        else:
            out.append(ch)
    return "".join(out)


def _html_numeric(value: str, entity: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else entity.format(ord(ch)) for ch in value)


def _html_named(value: str, quotes: Mapping[str, str]) -> str:
    table = {**_HTML_BASE, **quotes}
    return "".join(table.get(ch, ch) for ch in value)


def _lower_hex(url: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url)


def _raw(value: str) -> str:
    return value


def _json_ascii(value: str) -> str:
    return json.dumps(value)[1:-1]


def _url(value: str) -> str:
    return quote(value, safe="")


def _base64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _base64url(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


def _then(*steps: Callable[[str], str]) -> Callable[[str], str]:
    """The encoders applied in turn: an encoding of an encoding."""

    def encode(value: str) -> str:
        for step in steps:
            value = step(value)
        return value

    return encode


def _encoders() -> dict[str, Callable[[str], str]]:
    """Every exact encoding the scrubber looks for, by the name markers store.

    Order matters: when two names give the same text, the first is the one
    reported (and stored in markers), so the older names come first. Names
    are stored in checkpoints: never rename one, only add.
    """
    url: dict[str, Callable[[str], str]] = {"url": _url, "url-path": quote, "url-plus": quote_plus}
    table = {
        "raw": _raw,
        "json": _json_escaped,
        "json-ascii": _json_ascii,
        "json2": _then(_json_escaped, _json_escaped),
        **url,
        "base64": _base64,
        "base64url": _base64url,
    }
    for name, encode in url.items():
        table[name + "-lower"] = _then(encode, _lower_hex)
    for name, style in _JSON_STYLES.items():
        table[name] = functools.partial(_json_styled, style=style)
    # A JSON document kept as a string inside another (a tool's raw output).
    for name in ("json-ascii", *_JSON_STYLES):
        table[name + "2"] = _then(table[name], _json_escaped)
    # Percent-encoding applied twice (a URL passed as a query parameter): %40 -> %2540.
    for lower in ("", "-lower"):
        for name, again in url.items():
            table[name + "2" + lower] = _then(table[name + lower], again)
    for name, quotes in _HTML_STYLES.items():
        table[name] = functools.partial(_html_named, quotes=quotes)
    for name, entity in _HTML_NUMERIC.items():
        table[name] = functools.partial(_html_numeric, entity=entity)
    return table


_ENCODERS = _encoders()


def _encodings(value: str) -> dict[str, str]:
    """Every exact encoding of ``value`` the scrubber looks for, by name."""
    return {name: encode(value) for name, encode in _ENCODERS.items()}


def _encode(value: str, encoding: str) -> str | None:
    """Re-encode ``value`` for ``restore`` (None: not restorable)."""
    encode = _ENCODERS.get(encoding)  # only the one asked for: restore calls this per marker
    return None if encode is None else encode(value)


def _base64_cores(value: str) -> list[tuple[str, str, int, int]]:
    """The base64 characters that depend only on ``value``, at each of the three
    byte alignments it can have inside a longer base64-encoded text, with how
    many characters each side mix its bits with its neighbours'."""
    raw = value.encode()
    cores = []
    for align in range(3):
        encoded = base64.b64encode(bytes(align) + raw).decode()
        start = -(-8 * align // 6)  # first char made only of the value's bits
        end = (8 * (align + len(raw))) // 6  # chars after this mix in what follows
        lead, trail = int(8 * align % 6 != 0), int(8 * (align + len(raw)) % 6 != 0)
        core = encoded[start:end]
        cores.append(("base64-part", core, lead, trail))
        cores.append(("base64-part", core.replace("+", "-").replace("/", "_"), lead, trail))
    return cores


class Secrets:
    """The secrets a harness holds, by name: what the scrubber must never store.

    >>> secrets = Secrets().add("OPENAI_API_KEY", "sk-example-0123456789")
    >>> secrets.names()
    ['OPENAI_API_KEY']

    Values come from ``add`` (name and value), ``add_env`` (environment
    variable names) or ``add_source`` (a callable, e.g. a vault lookup, called
    at registration and again on ``refresh``). Names appear in stored
    references; values never leave this object except through ``value`` or a
    ``restore`` the caller asks for.
    """

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = {}
        self._sources: dict[str, Callable[[], str]] = {}
        self._lock = threading.Lock()
        self._automaton: Matcher[_Variant] | None = None
        self._prefilter: Matcher[bool] | None = None
        self.version = 0  # bumped on every change: caches of scrub results check it
        for name, value in (values or {}).items():
            self.add(name, value)

    def __repr__(self) -> str:  # never the values
        return f"Secrets({self.names()!r})"

    def add(self, name: str, value: str) -> Secrets:
        """Register ``value`` under ``name``; returns self so calls chain."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidArgument(f"secret name {name!r} must be 1-128 letters, digits, '_', '.' or '-'")
        if not isinstance(value, str):
            raise InvalidArgument(f"secret {name!r} must be a str, not {type(value).__name__}")
        if len(value) < MIN_SECRET_LENGTH:
            raise InvalidArgument(
                f"secret {name!r} is {len(value)} characters; at least {MIN_SECRET_LENGTH} are needed "
                "to find it without redacting ordinary text"
            )
        try:  # its UTF-8 bytes are what base64 and URL encodings are made of
            value.encode()
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"secret {name!r} holds a lone surrogate, which UTF-8 cannot hold"
            ) from None
        with self._lock:
            self._values[name] = value
            self._automaton = self._prefilter = None
            self.version += 1
        return self

    def add_env(self, *names: str, environ: Mapping[str, str] | None = None) -> Secrets:
        """Register environment variables by name (their current values)."""
        env = os.environ if environ is None else environ
        for name in names:
            if name not in env:
                raise InvalidArgument(f"environment variable {name!r} is not set")
            self.add(name, env[name])
        return self

    def add_source(self, name: str, fetch: Callable[[], str]) -> Secrets:
        """Register a secret fetched by ``fetch()`` (now, and again on ``refresh``)."""
        self._sources[name] = fetch
        return self.add(name, fetch())

    def refresh(self) -> None:
        """Fetch every ``add_source`` secret again (after a rotation)."""
        for name, fetch in self._sources.items():
            self.add(name, fetch())

    def names(self) -> list[str]:
        return sorted(self._values)

    def value(self, name: str) -> str:
        """The value registered under ``name``; ``UnknownSecret`` if none."""
        try:
            return self._values[name]
        except KeyError:
            raise UnknownSecret(name) from None

    def __len__(self) -> int:
        return len(self._values)

    def automaton(self) -> Matcher[_Variant] | None:
        """The Aho-Corasick automaton over every variant of every value (cached)."""
        with self._lock:
            if self._automaton is None:
                self._automaton = _build_automaton(self._values)
            return self._automaton

    def prefilter(self) -> Matcher[bool] | None:
        """An automaton for the canonical JSON text of a whole field: every variant
        as it appears once more JSON-escaped there (the same text when the
        variant holds no quote, backslash or control character), and the
        base64 variants across line breaks too."""
        with self._lock:
            if self._prefilter is None:
                self._prefilter = _build_prefilter(self._values)
            return self._prefilter


def _variants(value: str) -> list[tuple[str, str, int, int]]:
    return [*((enc, text, 0, 0) for enc, text in _encodings(value).items()), *_base64_cores(value)]


class _Automaton(Matcher[_Variant]):
    """The automaton over every variant, with one over the base64 variants alone
    for the look across line breaks (so ordinary hits never trigger that look)."""

    def __init__(self, words: Mapping[str, _Variant]) -> None:
        super().__init__(words)
        self.base64 = Matcher({text: v for text, v in words.items() if v.encoding in _BASE64_ENCODINGS})


def _build_automaton(values: Mapping[str, str]) -> Matcher[_Variant] | None:
    words: dict[str, _Variant] = {}
    # Sorted for determinism: when two names share a value, the last one wins.
    for name, value in sorted(values.items()):
        for encoding, text, lead, trail in _variants(value):
            existing = words.get(text)
            # An exact encoding beats a base64 core that happens to be the same text.
            if existing is None or existing.encoding == "base64-part":
                words[text] = _Variant(name, encoding, len(text), lead, trail)
    return _Automaton(words) if words else None


def _unwrapped(text: str) -> str:
    """``text`` without its line breaks (raw, or escaped once: base64 inside JSON
    text held as a string), so base64 wrapped in lines reads as one run.

    Every break goes, not only those between base64 characters: this only
    decides whether to look closer. str.replace runs in C, and the ``in``
    tests skip the forms a text lacks.
    """
    if "\\" in text:
        text = text.replace("\\r\\n", "").replace("\\n", "")
    if "\r" in text:
        text = text.replace("\r\n", "")
    return text.replace("\n", "")


# Base64 characters on one side of a line break that the field's look keys on:
# 11 carry 8 bytes of the value, as many as the shortest secret has, so ordinary
# text (which may share a word with a secret) does not set the look off.
_PIECE = 11
# How a field's JSON text writes a line break: escaped once (a real newline), or
# twice (JSON text held in a string).
_ESCAPED_BREAKS = ("\\n", "\\r\\n", "\\\\n", "\\\\r\\\\n")


def _broken_core(core: str) -> list[str]:
    """What a field's JSON text holds where a line break splits ``core`` (base64
    wrapped in lines at 11 columns or more, as MIME's 76 and PEM's 64), for a
    break at each position: the ``_PIECE`` characters after it with the
    escaped ``n`` every break form ends in, or when fewer follow, the ones
    before it with the backslash every form starts with; when neither side
    has that many (a short value), the whole core with each break form. A
    match only makes the scrubber walk the field, where ``find_known`` looks
    exactly."""
    words = []
    for at in range(1, len(core)):
        if len(core) - at >= _PIECE:
            words.append("\\n" + core[at : at + _PIECE])
        elif at >= _PIECE:
            words.append(core[at - _PIECE : at] + "\\")
        else:
            words.extend(core[:at] + line_break + core[at:] for line_break in _ESCAPED_BREAKS)
    return words


def _build_prefilter(values: Mapping[str, str]) -> Matcher[bool] | None:
    words: dict[str, bool] = {}
    for value in values.values():
        for encoding, text, _, _ in _variants(value):
            words[_json_escaped(text)] = True
            if encoding == "base64-part":  # base64 needs no JSON escaping
                words.update(dict.fromkeys(_broken_core(text), True))
    # One pass over the text whatever it holds: no join of lines before the look.
    return Matcher(words) if words else None


@dataclass(frozen=True, slots=True)
class Hit:
    start: int
    end: int
    name: str
    encoding: str


# A hit while hits are merged: (start, -end, is a base64 fragment, name, encoding),
# so that plain tuple order is leftmost, then longest, then exact (restorable) first.
_Span = tuple[int, int, bool, str, str]


def find_known(automaton: Matcher[_Variant] | None, text: str) -> list[Hit]:
    """Non-overlapping hits of registered values in ``text``, longest first on overlap.

    Linear in the text and the number of hits: one automaton pass (two when
    base64 may be wrapped in lines), a sort, and one merge pass that compares
    each hit with the one being built only — never hit with hit.
    """
    if automaton is None:
        return []
    spans: list[_Span] = []
    for found_at, found_end, variant in automaton.find(text):
        start, end = found_at, found_end
        if variant.encoding == "base64-part":
            start, end = _widen_base64(text, start, end, variant)
        spans.append((start, -end, variant.encoding == "base64-part", variant.name, variant.encoding))
    if "\n" in text or "\\n" in text:
        base64 = automaton.base64 if isinstance(automaton, _Automaton) else automaton
        # A quick look first (C-speed replaces and one pass); the exact one, which
        # knows where each break was, only when a base64 variant shows up.
        if base64.any(_unwrapped(text)):
            spans.extend(_wrapped_spans(base64, text))
    if not spans:
        return []
    spans.sort()
    kept = []
    start, neg_end, _, name, encoding = spans[0]
    end = -neg_end
    for next_start, next_neg_end, _, next_name, next_encoding in spans[1:]:
        if next_start >= end:
            kept.append(Hit(start, end, name, encoding))
            start, end, name, encoding = next_start, -next_neg_end, next_name, next_encoding
        elif -next_neg_end > end:  # overlapping: one hit over both, keeping the first hit's name
            end, encoding = -next_neg_end, "base64-part"
    kept.append(Hit(start, end, name, encoding))
    return kept


# A line break between two base64 characters, as MIME (76 columns) and PEM (64)
# wrap: raw, or JSON-escaped once (base64 inside a JSON text held as a string).
_LINE_BREAK = re.compile(r"(?<=[A-Za-z0-9+/_-])(?:\r?\n|(?:\\r)?\\n)(?=[A-Za-z0-9+/_-])")


def _wrapped_spans(automaton: Matcher[_Variant], text: str) -> list[_Span]:
    """Base64 variants that a line break splits: found in the text with the
    breaks between base64 characters taken out, at any width and alignment,
    and reported at their span in ``text`` (the breaks inside included)."""
    joined_at: list[int] = []  # where each break was, as an index into the joined text
    removed: list[int] = []  # characters taken out up to and including each break
    pieces: list[str] = []
    last = 0
    for match in _LINE_BREAK.finditer(text):
        pieces.append(text[last : match.start()])
        joined_at.append(match.start() - (removed[-1] if removed else 0))
        removed.append((removed[-1] if removed else 0) + match.end() - match.start())
        last = match.end()
    if not joined_at:
        return []
    pieces.append(text[last:])
    joined = "".join(pieces)

    def original(index: int) -> int:  # a joined text index -> the same character's index in text
        before = bisect_right(joined_at, index)
        return index + (removed[before - 1] if before else 0)

    spans: list[_Span] = []
    for found_at, found_end, variant in automaton.find(joined):
        if variant.encoding not in _BASE64_ENCODINGS:
            continue  # other variants hold no line breaks: the plain pass found them
        start, end = found_at, found_end
        if variant.encoding == "base64-part":
            start, end = _widen_base64(joined, start, end, variant)
        crossed = bisect_right(joined_at, start)
        if crossed == len(joined_at) or joined_at[crossed] >= end:
            continue  # on one line: the plain pass found it
        spans.append((original(start), -original(end - 1) - 1, True, variant.name, _WRAPPED))
    return spans


def _widen_base64(text: str, start: int, end: int, variant: _Variant) -> tuple[int, int]:
    """A base64 core leaves a character on either side that mixes the secret's
    bits with its neighbours' (as its alignment says); take them too, with any
    padding that follows."""
    if variant.lead and start > 0 and text[start - 1] in _B64_ALPHABET and text[start - 1] != "=":
        start -= 1
    if variant.trail and end < len(text) and text[end] in _B64_ALPHABET and text[end] != "=":
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end


def marker(name: str, encoding: str) -> str:
    return f"[SECRET:{name}]" if encoding == "raw" else f"[SECRET:{name}|{encoding}]"
