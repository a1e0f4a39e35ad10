"""Registered secrets in the encodings other serializers write: found, exactly spanned, restorable.

Every encoder below is written from the producing library's behaviour (the
standard library where it has one), not from ``known.py``: a positive case
plants the secret, in that encoding, inside text and checks the one hit
(name, exact span, the text ``encode_as`` rebuilds); a negative case checks
that near misses and ordinary text — also in these encodings — stay unflagged.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
from collections.abc import Callable
from random import Random
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safepoint
from safepoint import Checkpoint, codec
from safepoint.scrub import Secrets
from safepoint.scrub.automata import Hit, find_known
from safepoint.scrub.encodings import encode_as, every_encoding
from safepoint.scrub.known import MARKER
from scrub_corpus.traffic import mixed_traffic

KEY = "sk-proj-Zq81mXc0PfLw2RkT9vYbH4nJ6tGd3sQe"  # 40 characters
# Every character the encoders treat differently: / < > & ' = " + % space, non-ASCII, astral.
PASSWORD = "p@ss/w<rd>&'=\"+% é😀x"
WINDOWS = "C:\\svc\\backup-Pw0rd!"  # backslashes, which only the all-punctuation style writes as \u005c
LONG = "".join(
    Random(5).choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(200)
)
SECRETS = {"API_KEY": KEY, "DB_PASSWORD": PASSWORD, "SVC": WINDOWS, "LONG": LONG}


@functools.cache
def registry() -> Secrets:
    """One registry for the module: building its automaton is the slow part."""
    return Secrets(SECRETS)


def find(text: str) -> list[Hit]:
    return find_known(registry().automaton(), text)


def prefilter_says_yes(text: str) -> bool:
    """What the scrubber's look at a field gives for a field holding ``text``."""
    prefilter = registry().prefilter()
    assert prefilter is not None
    return prefilter.any(codec.encode({"content": text}).decode())


# -- encoders, as the libraries that produce them write ---------------------------------


def json_once(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def json_ascii(value: str) -> str:
    return json.dumps(value)[1:-1]


def upper_hex(text: str) -> str:
    return re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)


def hexed(text: str, chars: str, *, upper: bool = False) -> str:
    """``text`` (a JSON string body) with each of ``chars`` written \\u00XX."""
    for ch in chars:
        text = text.replace(ch, ("\\u%04X" if upper else "\\u%04x") % ord(ch))
    return text


def every_punctuation(value: str, *, upper: bool = False) -> str:
    """Each character but ASCII letters and digits as \\uXXXX (UTF-16 units)."""
    unit = "\\u%04X" if upper else "\\u%04x"
    out = []
    for ch in value:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            data = ch.encode("utf-16-be")
            out.extend(unit % int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    return "".join(out)


def dotnet(value: str) -> str:
    """System.Text.Json's default encoder: HTML-sensitive characters, quotes and non-ASCII
    as upper-case \\uXXXX, backslash and control characters as JSON's short escapes."""
    out = []
    for ch in value:
        if ch in "<>&'\"+`" or not ch.isascii():
            out.append(upper_hex(every_punctuation(ch)))
        else:
            out.append(json_ascii(ch))
    return "".join(out)


def lower_percent(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def numeric_entities(value: str, entity: str) -> str:
    return "".join(ch if ch.isascii() and ch.isalnum() else entity % ord(ch) for ch in value)


ENCODERS: dict[str, Callable[[str], str]] = {
    "json": json_ascii,
    "json twice": lambda v: json_ascii(json_ascii(v)),
    "json unicode twice": lambda v: json_once(json_once(v)),
    "json \\/ (JS)": lambda v: json_once(v).replace("/", "\\/"),
    "json \\/ ascii (PHP json_encode)": lambda v: json_ascii(v).replace("/", "\\/"),
    "json \\/ twice": lambda v: json_ascii(json_ascii(v).replace("/", "\\/")),
    "json upper-case hex (Jackson)": lambda v: upper_hex(json_ascii(v)),
    "json <>& (Go encoding/json)": lambda v: hexed(json_once(v), "<>&"),
    "json <>& twice": lambda v: json_once(hexed(json_once(v), "<>&")),
    "json <>&'= (Gson)": lambda v: hexed(json_once(v), "<>&='"),
    "json <>&'= upper-case": lambda v: hexed(json_once(v), "<>&='", upper=True),
    "json <>&' quote (Newtonsoft)": lambda v: hexed(json_once(v).replace('\\"', '"'), "<>&'\""),
    "json .NET System.Text.Json": dotnet,
    "json every punctuation": every_punctuation,
    "json every punctuation upper-case": lambda v: every_punctuation(v, upper=True),
    "json every punctuation twice": lambda v: json_ascii(every_punctuation(v)),
    "url twice (%2540)": lambda v: quote(quote(v, safe=""), safe=""),
    "url twice, lower-case hex": lambda v: quote(lower_percent(quote(v, safe="")), safe=""),
    "url path twice": lambda v: quote(quote(v)),
    "form twice": lambda v: quote_plus(quote_plus(v)),
    "html (Python html.escape: &quot; &#x27;)": html.escape,
    "html text (&amp; &lt; &gt; only)": lambda v: html.escape(v, quote=False),
    "html &#39; (Rails, lodash)": lambda v: html.escape(v).replace("&#x27;", "&#39;"),
    "html &#34; &#39; (Go, MarkupSafe)": lambda v: (
        html.escape(v).replace("&quot;", "&#34;").replace("&#x27;", "&#39;")
    ),
    "html &#039; (PHP)": lambda v: html.escape(v).replace("&#x27;", "&#039;"),
    "html &apos; (XML)": lambda v: html.escape(v).replace("&#x27;", "&apos;"),
    "html &#x2F; (OWASP)": lambda v: html.escape(v).replace("/", "&#x2F;"),
    "html decimal entities": lambda v: numeric_entities(v, "&#%d;"),
    "html hex entities": lambda v: numeric_entities(v, "&#x%x;"),
    "html hex entities upper-case": lambda v: numeric_entities(v, "&#x%X;"),
}


def planted(encoded: str) -> tuple[str, int, int]:
    text = f"tool said: {encoded} (end)"
    return text, len("tool said: "), len("tool said: ") + len(encoded)


@pytest.mark.parametrize("name", sorted(SECRETS))
@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_secret_in_each_encoding_is_found_exactly_and_restorable(name: str, encoder: str) -> None:
    """The secret, written by that encoder inside text, is one hit under its name spanning
    exactly the encoded text, which its encoding name rebuilds; the field's look sees it."""
    value = SECRETS[name]
    encoded = ENCODERS[encoder](value)
    text, start, end = planted(encoded)
    hits = find(text)
    assert [(h.name, h.start, h.end) for h in hits] == [(name, start, end)]
    assert encode_as(value, hits[0].encoding) == encoded
    assert prefilter_says_yes(text)


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_secret_in_each_encoding_comes_back_through_a_store(encoder: str) -> None:
    """Saved, the encoded secret is a marker and no encoding of it is stored; loaded with
    resolve_secrets=True, the text is back byte for byte."""
    store = safepoint.open_store("memory://", secrets=registry())
    state = {name: planted(ENCODERS[encoder](value))[0] for name, value in SECRETS.items()}
    store.save(Checkpoint(run_id="r", state=state))
    stored = json.dumps(store.load("r").to_dict())
    for value in SECRETS.values():
        assert ENCODERS[encoder](value) not in stored
    assert store.load("r", resolve_secrets=True).state == state


def near_misses(value: str) -> list[str]:
    """Values one edit away from ``value``: a middle character changed, the last one dropped,
    one inserted."""
    middle = len(value) // 2
    changed = "Q" if value[middle] != "Q" else "R"
    return [value[:middle] + changed + value[middle + 1 :], value[:-1], value[:middle] + "Z" + value[middle:]]


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_near_misses_in_each_encoding_are_not_flagged(encoder: str) -> None:
    """A value one edit away from a secret, in the same encoding, is not taken for it."""
    for value in SECRETS.values():
        for miss in near_misses(value):
            text, _, _ = planted(ENCODERS[encoder](miss))
            assert find(text) == [], miss
            assert not prefilter_says_yes(text)


# -- base64 wrapped in lines (MIME, PEM) -------------------------------------------------


def wrap(stream: str, width: int, first: int, newline: str) -> tuple[str, list[int]]:
    """``stream`` in lines of ``width``, the first ``first`` long; and where each
    stream character lands in the wrapped text."""
    lines = [stream[:first], *(stream[i : i + width] for i in range(first, len(stream), width))]
    positions, at = [], 0
    for line in lines:
        positions.extend(range(at, at + len(line)))
        at += len(line) + len(newline)
    return newline.join(line for line in lines if line), positions


@pytest.mark.parametrize("value", [KEY, PASSWORD, LONG], ids=["40-char-key", "password", "200-char"])
@pytest.mark.parametrize("width", [76, 64], ids=["mime", "pem"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("align", [0, 1, 2])
def test_wrapped_base64_is_found_at_every_break_position(
    value: str, width: int, newline: str, align: int
) -> None:
    """Base64 wrapped in lines, with a break at each position inside the secret's
    characters, at each byte alignment: one hit spanning exactly the characters
    that carry the secret's bits (the breaks between included), never restorable."""
    data = value.encode()
    prefix, suffix = b"attach:" + bytes(range(align)), b"\x00trailing bytes"
    stream = base64.b64encode(prefix + data + suffix).decode()
    first_char = 8 * len(prefix) // 6  # the first character holding one of the secret's bits
    end_char = -(-8 * (len(prefix) + len(data)) // 6)  # one past the last
    for at in range(first_char + 1, end_char):  # a break just before stream character ``at``
        wrapped, positions = wrap(stream, width, at % width or width, newline)
        text = "Content-Transfer-Encoding: base64\n\n" + wrapped + "\n--boundary--"
        offset = text.index(wrapped)
        hits = find(text)
        want = (offset + positions[first_char], offset + positions[end_char - 1] + 1)
        assert [(h.start, h.end) for h in hits] == [want], at
        assert hits[0].encoding == "base64-wrapped"
        assert prefilter_says_yes(text), at
    assert encode_as(value, "base64-wrapped") is None


@pytest.mark.parametrize("value", [KEY, PASSWORD], ids=["key", "password"])
def test_real_mime_and_pem_wrapping_is_found(value: str) -> None:
    """What base64.encodebytes (MIME, 76 columns) and a PEM writer (64, CRLF) produce is
    found: raw in a string, and inside JSON text held as a string (escaped breaks)."""
    body = b"-" * 45 + value.encode() + b"\n-----end-----\n"  # the secret straddles columns 64 and 76
    stream = base64.b64encode(body).decode()
    pem = "\r\n".join(stream[i : i + 64] for i in range(0, len(stream), 64))
    for text in (base64.encodebytes(body).decode(), pem, json.dumps({"attachment": pem})):
        hits = find(text)
        assert [h.encoding for h in hits] == ["base64-wrapped"]
        assert SECRETS[hits[0].name] == value
        assert prefilter_says_yes(text)


def test_whole_base64_of_a_secret_wrapped_is_spanned_with_its_padding() -> None:
    """The full base64 of a secret, broken over lines, is one hit from its first
    character to its padding."""
    stream = base64.b64encode(KEY.encode()).decode()
    assert stream.endswith("==")
    text = "x " + stream[:10] + "\r\n" + stream[10:] + " y"
    assert [(h.start, h.end, h.encoding) for h in find(text)] == [(2, len(text) - 2, "base64-wrapped")]


def test_wrapped_near_misses_are_not_flagged() -> None:
    """Wrapped base64 of values one edit away from a secret is not flagged."""
    for value in SECRETS.values():
        for miss in near_misses(value):
            assert find(base64.encodebytes(b"attach:" + miss.encode() + b"\x00").decode()) == []


NEWLINES = ["\n", "\r\n"]


@settings(max_examples=200, deadline=None)
@given(
    value=st.text(min_size=8, max_size=40),
    around=st.tuples(st.binary(max_size=12), st.binary(max_size=12)),
    # width (from 11 columns: MIME has 76, PEM 64), first line's length, line break, held as JSON text
    layout=st.tuples(st.integers(11, 100), st.integers(1, 100), st.sampled_from(NEWLINES), st.booleans()),
)
def test_any_secret_wrapped_at_any_width_is_covered(
    value: str, around: tuple[bytes, bytes], layout: tuple[int, int, str, bool]
) -> None:
    """Any value's base64, wrapped at any width from 11 columns, is covered by hits under
    its name, and the field's look says to walk it."""
    (prefix, suffix), (width, first, newline, json_held) = around, layout
    secrets = Secrets().add("S", value)
    data = value.encode()
    stream = base64.b64encode(prefix + data + suffix).decode()
    # Held as JSON text in a string, the breaks are escaped: \\n or \\r\\n, two or four characters.
    line_break = json.dumps(newline)[1:-1] if json_held else newline
    wrapped, positions = wrap(stream, width, min(first, width), line_break)
    first_char, end_char = 8 * len(prefix) // 6, -(-8 * (len(prefix) + len(data)) // 6)
    hits = find_known(secrets.automaton(), wrapped)
    covered = {i for h in hits for i in range(h.start, h.end)}
    assert {positions[i] for i in range(first_char, end_char)} <= covered
    assert {h.name for h in hits} == {"S"}
    prefilter = secrets.prefilter()
    assert prefilter is not None
    assert prefilter.any(codec.encode({"content": wrapped}).decode())


# -- any secret, any encoding -------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=st.text(min_size=8, max_size=30), data=st.data())
def test_any_secret_in_any_known_encoding_is_covered(value: str, data: st.DataObject) -> None:
    """Any value, in any encoding the scrubber names, planted in text, is covered by hits
    under its name, and the field's look says to walk it."""
    secrets = Secrets().add("S", value)
    encoding = data.draw(st.sampled_from(sorted(every_encoding(value))))
    encoded = every_encoding(value)[encoding]
    text = "«" + encoded + "»"
    hits = find_known(secrets.automaton(), text)
    covered = {i for h in hits for i in range(h.start, h.end)}
    assert set(range(1, 1 + len(encoded))) <= covered
    assert {h.name for h in hits} == {"S"}
    prefilter = secrets.prefilter()
    assert prefilter is not None
    assert prefilter.any(codec.encode({"content": text}).decode())


def test_every_encoding_name_is_a_marker_name_and_rebuilds_its_text() -> None:
    """Each encoding name fits a marker and encode_as gives its exact text; the two base64
    fragment names are not restorable."""
    for value in SECRETS.values():
        for encoding, text in every_encoding(value).items():
            assert MARKER.fullmatch(f"[SECRET:X|{encoding}]")
            assert encode_as(value, encoding) == text
        assert encode_as(value, "base64-part") is None
        assert encode_as(value, "base64-wrapped") is None


# -- ordinary text, sizes, dense hits -----------------------------------------------------


@functools.cache
def ordinary_text() -> tuple[str, ...]:
    return tuple(mixed_traffic(1_000_000, seed=13))


ORDINARY_FORMS: dict[str, Callable[[str], str]] = {
    "as is": lambda t: t,
    "json": json_ascii,
    "json twice": lambda t: json_ascii(json_ascii(t)),
    "json \\/ upper-case <>&'=": lambda t: hexed(
        upper_hex(json_ascii(t)).replace("/", "\\/"), "<>&='", upper=True
    ),
    "json every punctuation": every_punctuation,
    "url twice": lambda t: quote(quote(t, safe=""), safe=""),
    "html": html.escape,
    "html decimal entities": lambda t: numeric_entities(t, "&#%d;"),
    "mime base64": lambda t: base64.encodebytes(t.encode()).decode(),
    "pem base64": lambda t: "\r\n".join(re.findall(".{1,64}", base64.b64encode(t.encode()).decode())),
}


@pytest.mark.parametrize("form", list(ORDINARY_FORMS))
def test_ordinary_text_in_each_form_is_not_flagged(form: str) -> None:
    """1 MB of ordinary agent traffic (prose, code, JSON tool output, logs), written in
    each encoding the scrubber looks into, gives no hit and no walk: 0 false positives per MB."""
    secrets = registry()
    automaton, prefilter = secrets.automaton(), secrets.prefilter()
    assert prefilter is not None
    hits = walks = 0
    for chunk in ordinary_text():
        text = ORDINARY_FORMS[form](chunk)
        hits += len(find_known(automaton, text))
        walks += prefilter.any(codec.encode({"content": text}).decode())
    assert (hits, walks) == (0, 0)


def test_automaton_size_is_bounded_by_the_secret_length() -> None:
    """A secret adds a fixed number of automaton words, at most a few times its length each;
    the field's look adds one short word per base64 character: linear in the value."""
    hostile = "p@ss/w<rd>&'=\"+% é😀\\`~!#$^*()[]{}|;:,.?x"
    for value in (KEY + "-0123456789ab", LONG, hostile, hostile * 5):
        secrets = Secrets().add("S", value)
        automaton, prefilter = secrets.automaton(), secrets.prefilter()
        assert automaton is not None
        assert prefilter is not None
        assert len(automaton) <= 64
        base64_chars = -(-4 * len(value.encode()) // 3)
        assert len(prefilter) <= len(automaton) + 6 * base64_chars


def test_dense_hits_are_merged_in_one_pass() -> None:
    """100,000 adjacent hits, and 100,000 hits that all overlap, come back right (the
    merge compares each hit with the last kept one, never all pairs)."""
    secrets = Secrets().add("KEY", KEY).add("AB", "abababab")
    automaton = secrets.automaton()
    adjacent = (KEY + " ") * 100_000
    hits = find_known(automaton, adjacent)
    assert len(hits) == 100_000
    assert hits[-1] == Hit(len(adjacent) - len(KEY) - 1, len(adjacent) - 1, "KEY", "raw")
    overlapping = "ab" * 100_003  # a hit starts at every even position
    assert automaton is not None
    assert len(automaton.find(overlapping)) >= 100_000
    assert find_known(automaton, overlapping) == [Hit(0, len(overlapping), "AB", "base64-part")]


def test_lone_surrogate_secret_is_refused_without_quoting_it() -> None:
    """A value no encoding can write (a lone surrogate) is refused at registration, not
    when the automaton is built, and the error does not quote it."""
    with pytest.raises(safepoint.InvalidArgument) as caught:
        Secrets().add("X", "abc\ud800defgh")
    assert "defgh" not in str(caught.value)
