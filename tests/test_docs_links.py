"""Every link in the README and docs/ can be followed from a clone, offline.

A relative link names a file (or folder) that exists, and an anchor, when it has one, names a
heading of the page it points at (GitHub's slugs). A link that needs the network (http, https,
mailto, …) is refused: an address a reader may need is written as code, where it is plain text.
Code blocks and code spans are text, never links.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
_INLINE = re.compile(r"!?\[(?P<text>[^\]]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s.*)?$", re.MULTILINE)
_AUTOLINK = re.compile(r"<(?P<target>[A-Za-z][A-Za-z0-9+.-]*:[^\s>]*)>")
_BARE_URL = re.compile(r"(?P<target>\b(?:https?|ftp)://[^\s)>\]]+|\bwww\.[^\s)>\]]+)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$", re.MULTILINE)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"(?P<anchor>[^\"]+)\"", re.IGNORECASE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose(text: str) -> str:
    """The page without its code blocks and code spans (their text is never a link)."""
    text = _FENCE.sub("", text)
    return _CODE_SPAN.sub("code", text)


def links(text: str) -> list[str]:
    """Every link target of a page's prose: inline, reference definitions, autolinks, bare URLs."""
    body = prose(text)
    found = [m["target"] for m in _INLINE.finditer(body)]
    found += [m["target"] for m in _REFERENCE.finditer(body)]
    found += [m["target"] for m in _AUTOLINK.finditer(body)]
    without_links = _AUTOLINK.sub("", _INLINE.sub(r"\g<text>", body))
    found += [m["target"] for m in _BARE_URL.finditer(without_links)]
    return found


def slug(title: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation dropped, spaces to ``-``."""
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link in a heading: its text
    title = re.sub(r"<[^>]+>", "", title).replace("*", "")
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a page has: one per heading (repeats numbered as GitHub does) and HTML anchors."""
    text = page.read_text(encoding="utf-8")
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        base = slug(match["title"])
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    found.update(m["anchor"] for m in _HTML_ANCHOR.finditer(text))
    return found


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) cannot be followed from a clone, or None."""
    if _SCHEME.match(target) or target.startswith(("//", "www.")):
        return "needs the network: write the address as `code`, or link a page of the repo"
    path_part, _, anchor = target.partition("#")
    dest = (page.parent / unquote(path_part)).resolve() if path_part else page
    if path_part.startswith("/") or not dest.is_relative_to(ROOT):
        return "points outside the repository"
    if not dest.exists():
        return f"no file {dest.relative_to(ROOT)}"
    if anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
        return f"no heading #{anchor} in {dest.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_can_be_followed_offline(page: Path) -> None:
    """Each link of the page names an existing file (and heading); none needs the network."""
    problems = [
        f"{page.relative_to(ROOT)}: ({target}) {why}"
        for target in links(page.read_text(encoding="utf-8"))
        if (why := broken(page, target)) is not None
    ]
    assert not problems, "\n".join(problems)


def test_the_checker_sees_what_it_must(tmp_path: Path) -> None:
    """The parser finds each kind of link, ignores code, and slugs headings as GitHub does."""
    text = (
        "See [the CLI](docs/cli.md#exit-codes), ![a](img.png) and [def]: other.md\n"
        "[ref]: docs/x.md\n<https://example.org> and www.example.org/x\n"
        "`[not](a-link.md)` and http://in-prose.example\n"
        "```\n[nor](this.md) https://code.example\n```\n"
    )
    assert links(text) == [
        "docs/cli.md#exit-codes",
        "img.png",
        "docs/x.md",
        "https://example.org",
        "www.example.org/x",
        "http://in-prose.example",
    ]
    assert slug("The checkpoint store on SQLite (issue 2)") == "the-checkpoint-store-on-sqlite-issue-2"
    assert slug("`safepoint gc` and [file space](x.md)") == "safepoint-gc-and-file-space"
    page = tmp_path / "p.md"
    page.write_text("# Title\n## Title\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"title", "title-1"}
