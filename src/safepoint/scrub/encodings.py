"""The encodings a registered secret is looked for in, by the names markers store.

A harness or a serializer writes a value in many ways: JSON-escaped (also
twice) in the styles JSON libraries write (``\\/``, ``\\u0026`` for
HTML-sensitive or all punctuation, upper- or lower-case hex, non-ASCII escaped
or not), URL-encoded (also twice, either hex case), HTML escaped (named,
decimal or hex entities), base64 and base64url. Each has a name, stored in
``[SECRET:NAME|enc]`` markers, so that ``restore`` can write back exactly the
text that was there: names are never renamed, only added. The base64
fragments of a value inside a longer base64 text (:func:`base64_cores`) are
found too, but cannot be rebuilt.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

import orjson


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


def json_escaped(value: str) -> str:
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
        "json": json_escaped,
        "json-ascii": _json_ascii,
        "json2": _then(json_escaped, json_escaped),
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
        table[name + "2"] = _then(table[name], json_escaped)
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


def every_encoding(value: str) -> dict[str, str]:
    """Every exact encoding of ``value`` the scrubber looks for, by name."""
    return {name: encode(value) for name, encode in _ENCODERS.items()}


def encode_as(value: str, encoding: str) -> str | None:
    """``value`` in the encoding a marker names, for ``restore`` (None: not restorable)."""
    encode = _ENCODERS.get(encoding)  # only the one asked for: restore calls this per marker
    return None if encode is None else encode(value)


def base64_cores(value: str) -> list[tuple[str, str, int, int]]:
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
