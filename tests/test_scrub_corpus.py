"""Measured quality of the rule table: recall on a labelled corpus, false positives per MB on clean traffic.

The labelled corpus plants generated secrets (tests/scrub_corpus/fakes.py) in
the places an agent run puts them — an env file, code, a JSON tool output, a
log line, prose, or bare — and records where each secret sits. The clean side
is ``scrub_corpus.traffic``: real standard-library prose and code plus
generated JSON tool outputs and logs, full of hashes, ids and placeholders;
and look-alike traffic (tests/scrub_corpus/clean.py) shaped like what the newer
rules look for — CSV exports, URL-encoded and JSON-escaped URLs without a
password, base64 of indented JSON, long values under keys that hold no secret.
The secret rules must fire zero times per MB on all of it. Run with ``-s`` to
see the numbers.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass
from random import Random

import pytest

from safepoint.scrub.engine.scanner import RuleScanner
from safepoint.scrub.pii import PII_KINDS
from safepoint.scrub.rules import SECRET_RULES, default_scanner
from scrub_corpus.clean import lookalike_traffic
from scrub_corpus.fakes import FAKES
from scrub_corpus.traffic import KINDS, traffic_by_kind

SEEDS_PER_CELL = 12
CLEAN_BYTES = 4_000_000  # 1 MB of each kind
# Bare tokens get a key that names no secret, so that only the token's own format can find them.
CONTEXTS = {
    "env": "# service settings\nexport {line}\nexport PATH=/usr/local/bin:$PATH\n",
    "code": "def connect():\n    client = Client(host='db.internal')\n    {line}\n    return client\n",
    "json": "{json}",
    "log": "2024-05-09 07:35:25,123 DEBUG outgoing request {line} (attempt 1)",
    "prose": "Sure - here is what the config holds: {line}. Rotate it after the demo.",
    "bare": "{line}",
}
KEYED = {
    "aws-secret-access-key",
    "twilio-auth-token",
    "credential-assignment",
    "authorization-header",
    "bearer-token",
}


@dataclass(frozen=True)
class Sample:
    text: str
    start: int  # where the secret sits in text
    end: int
    rule: str
    context: str


def plant(name: str, context: str, seed: int) -> Sample:
    snippet, secret = FAKES[name](Random(seed))
    line = snippet if name in KEYED or context == "bare" else f"SERVICE_ENDPOINT_CONFIG={snippet}"
    if context == "json":
        text = json.dumps({"tool": "bash", "exit_code": 0, "stdout": f"loaded settings\n{line}\ndone"})
        secret = json.dumps(secret)[1:-1]
    else:
        text = CONTEXTS[context].format(line=line)
    start = text.index(secret)
    return Sample(text, start, start + len(secret), name, context)


def labelled_corpus(names: list[str]) -> list[Sample]:
    return [
        plant(name, context, seed) for name in names for context in CONTEXTS for seed in range(SEEDS_PER_CELL)
    ]


def covered(scanner: RuleScanner, sample: Sample) -> tuple[bool, bool]:
    """Whether every character of the secret is redacted, and whether by the expected rule."""
    spans = [f for f in scanner.find(sample.text) if f.start < sample.end and sample.start < f.end]
    chars = set()
    for f in spans:
        chars.update(range(max(f.start, sample.start), min(f.end, sample.end)))
    return len(chars) == sample.end - sample.start, any(f.rule == sample.rule for f in spans)


def recall(scanner: RuleScanner, samples: list[Sample], label: str) -> float:
    found, by_rule = Counter[str](), Counter[str]()
    missed: Counter[tuple[str, str]] = Counter()
    for sample in samples:
        ok, right_rule = covered(scanner, sample)
        found[sample.context] += ok
        by_rule[sample.context] += ok and right_rule
        if not ok:
            missed[sample.rule, sample.context] += 1
    per_context = {c: len([s for s in samples if s.context == c]) for c in CONTEXTS}
    total = sum(found.values()) / len(samples)
    print(f"\n{label} recall: {total:.2%} of {len(samples)} planted values")
    for context, n in per_context.items():
        named = by_rule[context] / n
        print(f"  {context:6} {found[context] / n:7.2%}   (named by the expected rule: {named:.2%})")
    for (rule, context), count in missed.most_common(10):
        print(f"  missed: {rule} in {context} x{count}")
    return total


def test_secret_recall_on_the_labelled_corpus() -> None:
    """At least 99% of secrets planted in env files, code, JSON, logs, prose and bare are redacted."""
    samples = labelled_corpus([rule.name for rule in SECRET_RULES])
    assert recall(default_scanner(), samples, "secret rules") >= 0.99


def test_pii_recall_on_the_labelled_corpus() -> None:
    """At least 99% of emails, phone, card, IBAN and SSN numbers planted the same way are redacted."""
    samples = labelled_corpus(list(PII_KINDS))
    assert recall(default_scanner(PII_KINDS), samples, "PII rules") >= 0.99


@functools.cache
def clean_traffic() -> dict[str, list[str]]:
    return traffic_by_kind(CLEAN_BYTES, seed=0)


def false_positives_per_mb(scanner: RuleScanner, rules: set[str]) -> dict[str, float]:
    rates = {}
    for kind in KINDS:
        chunks = clean_traffic()[kind]
        megabytes = sum(len(chunk.encode()) for chunk in chunks) / 1e6
        hits = sum(1 for chunk in chunks for f in scanner.find(chunk) if f.rule in rules)
        rates[kind] = hits / megabytes
    return rates


def test_secret_rules_false_positives_per_mb() -> None:
    """On secret-free prose, code, JSON and logs, the secret rules fire zero times per MB."""
    rates = false_positives_per_mb(default_scanner(), {rule.name for rule in SECRET_RULES})
    print("\nsecret rules, false positives per MB: " + ", ".join(f"{k} {v:.2f}" for k, v in rates.items()))
    assert all(rate == 0 for rate in rates.values()), rates


def test_secret_rules_leave_look_alike_traffic_alone() -> None:
    """CSV exports, encoded and escaped URLs without a password, base64 JSON and long values under keys
    that hold no secret: zero findings per MB."""
    chunks = lookalike_traffic(2_000_000, seed=5)
    scanner = default_scanner()
    hits = [f.rule for chunk in chunks for f in scanner.find(chunk)]
    megabytes = sum(len(chunk.encode()) for chunk in chunks) / 1e6
    print(f"\nlook-alike traffic: {len(hits) / megabytes:.2f} findings per MB over {megabytes:.1f} MB")
    assert hits == []


@pytest.mark.parametrize("kind", ["phone", "card", "iban", "ssn"])
def test_pii_false_positives_per_mb(kind: str) -> None:
    """Dates, versions, IPs, ids and order numbers in clean traffic are not taken for PII numbers."""
    # (Email is left out: the traffic holds addresses on purpose; they are PII, not secrets.)
    rates = false_positives_per_mb(default_scanner([kind]), {kind})
    print(f"\n{kind}, false positives per MB: " + ", ".join(f"{k} {v:.2f}" for k, v in rates.items()))
    assert all(rate <= 1.0 for rate in rates.values()), rates
