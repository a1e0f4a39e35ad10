"""PEM private keys split into a list of lines, which no rule sees whole in one string.

The text rule (:data:`PEM_RULE_NAME`, in the standard-format table) finds a
key inside one string; :func:`pem_line_blocks` finds one written as a list
with a line per item, and the scrubber's walk redacts those items under the
same rule name.
"""

from __future__ import annotations

import re

PEM_RULE_NAME = "private-key"  # the rule that finds PEM private keys; pem_line_blocks reports under it

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
