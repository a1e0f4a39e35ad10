"""Linear time, counted rather than timed: on dense adversarial text the rule engine's regex calls,
validator calls and validated characters grow in proportion to the text, and overlap resolution is a
sort and a sweep (the benchmark times it: bench/sections/scrub.py)."""

from __future__ import annotations

import base64
import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterator
from random import Random
from typing import Any

import pytest

from safepoint.scrub.engine import scanner as engine_scan
from safepoint.scrub.engine.rule import Finding, Rule
from safepoint.scrub.engine.scanner import RuleScanner
from safepoint.scrub.pii import PII_RULES
from safepoint.scrub.rules import SECRET_RULES
from scrub_corpus.fakes import FAKES, b62


class CountingPattern:
    """A compiled pattern that counts its calls (the scanner needs only these four members)."""

    def __init__(self, pattern: re.Pattern[str], counts: Counter[str]) -> None:
        self._pattern, self._counts = pattern, counts
        self.groupindex = pattern.groupindex

    def match(self, text: str, pos: int = 0, endpos: int = 2**62) -> re.Match[str] | None:
        self._counts["regex"] += 1
        return self._pattern.match(text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int = 2**62) -> re.Match[str] | None:
        self._counts["regex"] += 1
        return self._pattern.search(text, pos, endpos)

    def finditer(self, text: str, pos: int = 0, endpos: int = 2**62) -> Iterator[re.Match[str]]:
        self._counts["regex"] += 1
        return self._pattern.finditer(text, pos, endpos)


def counted(rules: tuple[Rule, ...]) -> tuple[RuleScanner, Counter[str]]:
    counts: Counter[str] = Counter()

    def wrap(validate: Callable[[str], bool] | None) -> Callable[[str], bool] | None:
        if validate is None:
            return None

        def counting(value: str) -> bool:
            counts["validate"] += 1
            counts["validated chars"] += len(value)
            return validate(value)

        return counting

    proxies = [
        dataclasses.replace(rule, pattern=CountingPattern(rule.pattern, counts), validate=wrap(rule.validate))  # type: ignore[arg-type]
        for rule in rules
    ]
    return RuleScanner(proxies), counts


def dense(make: Callable[[Random], str]) -> Callable[[int], str]:
    """A text of ``size`` characters: pieces from ``make``, packed end to end."""

    def build(size: int) -> str:
        rng, pieces, total = Random(size), [], 0
        while total < size:
            pieces.append(make(rng))
            total += len(pieces[-1])
        return "".join(pieces)

    return build


def b64(rng: Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()[:n]


FAMILIES: dict[str, Callable[[int], str]] = {
    "eyJ repeated": dense(lambda r: "eyJ"),
    "JWT-like runs": dense(lambda r: "eyJ" + b64(r, 300).replace("+", "-").replace("/", "_") + "."),
    "BEGIN, no END": dense(lambda r: "-----BEGIN RSA PRIVATE KEY-----\n"),
    "PEM bodies, no END": dense(
        lambda r: "-----BEGIN PRIVATE KEY-----\n" + b64(r, 64) + "\n" + b64(r, 64) + "\n"
    ),
    "password= no value": dense(lambda r: "password="),
    "password= words": dense(lambda r: "password=changeme_" + "x" * r.randrange(1, 9)),
    "password= long values": dense(lambda r: "password=" + b64(r, 700) + "\n"),
    "dense assignments": dense(lambda r: f"DB_PASSWORD={b62(r, 20)}\n"),
    "sk- repeated": dense(lambda r: "sk-"),
    ":// repeated": dense(lambda r: "://"),
    "secret repeated": dense(lambda r: "secret"),
    "authorization repeated": dense(lambda r: "Authorization: "),
    "tokens of every rule": dense(lambda r: FAKES[r.choice(sorted(FAKES))](r)[0] + r.choice(["", " ", "\n"])),
    "marker-shaped input": dense(lambda r: f"password=[REDACTED:x]{b62(r, 12)}[SECRET:Y]"),
    "odd-case keys among dense ones": dense(lambda r: f"password=x PaSsWoRd={b62(r, 16)} token "),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_work_grows_linearly_with_dense_text(family: str) -> None:
    """Ten times the text costs at most about ten times the regex calls, validator calls and validated
    characters, however densely the triggers are packed."""
    scanner, counts = counted((*SECRET_RULES, *PII_RULES))
    small, large = 20_000, 200_000
    scanner.redact(FAMILIES[family](small))
    at_small = dict(counts)
    counts.clear()
    scanner.redact(FAMILIES[family](large))
    for measure in ("regex", "validate", "validated chars"):
        assert counts[measure] <= 10 * at_small.get(measure, 0) * 1.1 + 100, (measure, at_small, dict(counts))
    assert counts["validated chars"] <= 4 * large  # each value judged a bounded number of times


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_searching_ahead_finds_what_matching_at_each_trigger_finds(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where triggers are dense the engine searches ahead in C; it finds exactly the findings that
    matching at every trigger finds (no odd-case key word a trigger would not see)."""
    scanner = RuleScanner((*SECRET_RULES, *PII_RULES))
    text = FAMILIES[family](30_000)
    searched_ahead = scanner.redact(text)
    monkeypatch.setattr(engine_scan, "_DENSE", 0)  # every trigger matched where it stands
    assert scanner.redact(text) == searched_ahead


def test_a_refused_unbounded_value_is_judged_once() -> None:
    """password=password=…: one value, refused, is read once — not once per trigger inside it."""
    scanner, counts = counted(SECRET_RULES)
    text = "password=" * 50_000
    assert scanner.find(text) == []
    assert counts["validate"] <= 2
    assert counts["validated chars"] <= 2 * len(text)


def test_overlap_resolution_is_a_sweep() -> None:
    """A chain of 200,000 mutually overlapping candidates merges into one finding (all-pairs
    resolution would compare them 10^10 times)."""
    even = Rule("even", re.compile("aa"), ("a",), spellings=("a",))
    odd = Rule("odd", re.compile("(?<=a)aa"), ("a",), spellings=("a",))
    text = "a" * 200_001
    assert RuleScanner([even, odd]).find(text) == [Finding(0, len(text), "even")]


def test_merged_findings_keep_the_winner_rule() -> None:
    """Overlapping matches merge into one span named after the longest, then earliest-listed match."""
    short = Rule("short", re.compile(r"abc"), ("abc",))
    long = Rule("long", re.compile(r"bc\d+"), ("bc",))
    assert RuleScanner([short, long]).find("x abc123 y") == [Finding(2, 8, "long")]
    assert RuleScanner([short, long]).find("x abc1 y") == [Finding(2, 6, "short")]  # a tie: listed first
    assert RuleScanner([long, short]).find("x abc1 y") == [Finding(2, 6, "long")]


def test_redaction_rounds_look_only_near_new_markers() -> None:
    """The rounds after the first look within reach of the markers just written, not at the whole text."""
    scanner, counts = counted(SECRET_RULES)
    filler = "ordinary words about the weather " * 30_000  # a long text with no trigger at all
    token = FAKES["github-token"](Random(1))[0]
    glued = FAKES["private-key"](Random(0))[0] + FAKES["anthropic-api-key"](Random(0))[0]
    _, names, _ = scanner.redact(filler + token + " " + glued + filler)
    assert names == ["github-token", "private-key", "anthropic-api-key"]
    assert counts["regex"] < 40


def test_huge_single_values_are_redacted_whole() -> None:
    """A megabyte-long value after a secret key is one finding covering all of it."""
    value = base64.b64encode(Random(2).randbytes(750_000)).decode()
    text = f'{{"client_secret": "{value}"}}'
    assert default_findings(text) == [Finding(19, 19 + len(value), "credential-assignment")]


def default_findings(text: str, **kwargs: Any) -> list[Finding]:
    return RuleScanner(SECRET_RULES).find(text, **kwargs)
