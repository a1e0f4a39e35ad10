"""Text from a checkpoint, made safe to show: invisible and control characters become escapes.

Every stored string may come from an attacker, and so may a run id. Printed
as is, ``\\x1b]0;…\\x07`` retitles the operator's terminal, ``\\x1b[2J``
clears it, ``\\n`` forges a log line, and a bidi override (``\\u202e``) or a
zero-width space makes text read as something it is not. So wherever stored
or handler-provided text is rendered — CLI output, log lines — it goes
through :func:`visible`, which shows those characters as Python-style
escapes (``\\x1b``, ``\\u202e``) and leaves every other character, any
script or emoji, as it is.

Which characters: Unicode categories Cc (C0 and C1 controls, DEL) and Cf
(format characters: bidi controls, zero-width characters, U+FEFF, tag
characters), plus Zl/Zp (U+2028/U+2029, line breaks to many viewers) and Cs
(a lone surrogate cannot even be encoded: printing one would crash the
output). A backslash is not doubled: the result is for reading, not for
parsing back, and doubling would garble every Windows path and regex.

All of it is linear time: printable ASCII is skipped by a regex, other runs
by ``str.isprintable`` (both in C), and only a run that does hold a
non-printable character is looked at character by character.
"""

from __future__ import annotations

import logging
import re
import traceback
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ["ID_LEN", "VisibleTracebacks", "visible", "visible_json", "visible_traceback"]

# How much of an id (run, worker) a log line or a heading shows: enough to
# tell ids apart, never the megabytes an id may hold.
ID_LEN = 200

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_OUTSIDE_ASCII = re.compile(r"[^\x20-\x7e]+")
_ELLIPSIS = "…"
# The lines ``traceback`` writes between chained exceptions.
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def visible(text: str, *, max_len: int | None = None, keep_newlines: bool = False) -> str:
    """``text`` with its control and format characters shown as escapes (``\\x1b``, ``\\u202e``, ``\\n``).

    ``max_len`` caps the result's length (an escape is never cut in half;
    a shortened result ends with ``…``), and only the first ``max_len``
    characters are looked at, so a megabyte value costs no more than its
    shown part. ``keep_newlines`` keeps ``\\n`` as a line break (for a
    multi-line body shown on its own; never for a table cell or a log line).
    """
    text = str(text)  # a str subclass (ScrubbedText) renders as the text it is
    keep = "\n" if keep_newlines else ""
    if max_len is None:
        return "".join(_escaped(text, keep, _python_escape))
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
    # Each input character gives at least one output character, so the first
    # max_len + 1 of them decide both the shown part and whether it was cut.
    shown: list[tuple[str, bool]] = []
    total = 0
    for piece, escape in _pieces(text[: max_len + 1], keep):
        shown.append((_python_escape(piece) if escape else piece, escape))
        total += len(shown[-1][0])
        if total > max_len:
            return _cut(shown, total, max_len - len(_ELLIPSIS)) + _ELLIPSIS
    return "".join(piece for piece, _ in shown)


def _cut(shown: list[tuple[str, bool]], total: int, limit: int) -> str:
    """The pieces shortened to ``limit`` characters: plain text is cut, an escape dropped whole."""
    while total > limit:
        piece, escape = shown.pop()
        total -= len(piece)
        if not escape and total < limit:
            shown.append((piece[: limit - total], False))
            total = limit
    return "".join(piece for piece, _ in shown)


def visible_json(text: str) -> str:
    """JSON text with those same characters written as ``\\uXXXX`` escapes: equal JSON, safe to print.

    ``json.dumps(..., ensure_ascii=False)`` and orjson escape C0 controls but
    write DEL, C1 controls (``\\x9b`` is a CSI to some terminals), bidi and
    zero-width characters raw. Outside strings JSON text holds only ASCII
    punctuation and whitespace, so every such character is inside a string,
    where the escape means the same character. Line breaks (``\\n``) stay.
    """
    return "".join(_escaped(text, "\n", _json_escape))


def visible_traceback(exc: BaseException) -> str:
    """``exc``'s traceback as ``logging`` prints it, each exception's own text passed through ``visible``.

    The frames (file, line, source) come from code; the messages (and notes)
    may quote a handler's or a tool's text, so each exception's text is shown
    on one line with its control characters escaped.
    """
    chain: list[tuple[str | None, traceback.TracebackException]] = []
    link: traceback.TracebackException | None = traceback.TracebackException.from_exception(exc)
    while link is not None:  # the same walk as TracebackException.format, newest first
        if link.__cause__ is not None:
            chain.append((_CAUSE, link))
            link = link.__cause__
        elif link.__context__ is not None and not link.__suppress_context__:
            chain.append((_CONTEXT, link))
            link = link.__context__
        else:
            chain.append((None, link))
            link = None
    lines: list[str] = []
    for message, te in reversed(chain):
        if message is not None:
            lines.append(message)
        if te.stack:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(te.stack.format())
        lines.append(visible("".join(te.format_exception_only()).rstrip("\n")) + "\n")
    return "".join(lines).rstrip("\n")


class VisibleTracebacks(logging.Filter):
    """A logger filter that renders a record's exception with :func:`visible_traceback`.

    ``Formatter`` uses a record's ``exc_text`` when it is already set, so
    the exception text reaches every handler escaped, while ``exc_info``
    stays on the record for handlers that report exceptions as objects.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = visible_traceback(record.exc_info[1])
        return True


def _escaped(text: str, keep: str, escape: Callable[[str], str]) -> Iterator[str]:
    for piece, is_escape in _pieces(text, keep):
        yield escape(piece) if is_escape else piece


def _pieces(text: str, keep: str) -> Iterator[tuple[str, bool]]:
    """``text`` as (plain text, False) and (one hidden character, True) pieces, in order."""
    plain_from = 0
    for match in _OUTSIDE_ASCII.finditer(text):
        run = match.group()
        if run.isprintable():  # letters, digits, emoji of any script: nothing to escape
            continue
        for at, char in enumerate(run, match.start()):
            if char in keep or unicodedata.category(char) not in _HIDDEN:
                continue
            if at > plain_from:
                yield text[plain_from:at], False
            yield char, True
            plain_from = at + 1
    if plain_from < len(text):
        yield text[plain_from:], False


def _python_escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # JSON writes a character outside the BMP as its UTF-16 surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
