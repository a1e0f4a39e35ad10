"""The scrubber's throughput on agent traffic (issue 4), through the entry point a save uses.

    .venv/bin/python bench/scrub_section.py [--mb 5] [--repeat 5]   # this section alone

The traffic is ``safepoint.testing.traffic.mixed_traffic(total_bytes)``:
secret-free prose, code, JSON tool outputs and logs, in chunks. Each chunk
becomes one message dict (``{"id", "role", "content"}``) and is cleaned with
``Scrubber.scrub(message, "messages[i]")`` — the public call a store makes for
each field of a checkpoint, which encodes the value to canonical JSON, runs
every step's prefilter over that text and walks the value only where
something might match. A save's messages take the same path (given the bytes
the store encodes anyway), so these rates are what a save pays per byte.

Passes, each with a fresh ``Scrubber`` built before timing:

* **known values**: ``Scrubber(secrets=<100 registered>, rules=False)``;
* **rules**: ``Scrubber(rules=True)``, no secret registered;
* **both**: ``Scrubber(secrets=<100>)`` — what a store with secrets runs;
* **both + all PII**: ``Scrubber(secrets=<100>, pii=True)``.

One untimed warm-up pass each (the automata and the rule table are built on
first use), then ``repeat`` timed passes, the passes of all scrubbers
interleaved so a busy moment on the machine hits them alike. MB/s is the
traffic's UTF-8 text bytes (10^6 bytes per MB) over the pass's time.
The components table times the pieces a pass is made of (each step's
prefilter and the step itself, through the scrubber's step protocol), for
profiling.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from safepoint import codec
from safepoint.scrub import Found, KnownSecretsStep, RulesStep, Scrubber, Secrets
from safepoint.testing.traffic import KINDS, mixed_traffic, traffic_by_kind

SECRETS = 100
TARGET_KNOWN = 50.0  # MB/s with 100 registered secrets
TARGET_RULES = 20.0  # MB/s
_ROLE = {"prose": "assistant", "code": "tool", "json": "tool", "logs": "tool"}


@dataclass(slots=True)
class Pass:
    """One scrubber over the whole traffic: seconds per timed pass, and per kind of chunk."""

    key: str
    label: str
    setup: str
    seconds: list[float] = field(default_factory=list)
    kind_seconds: dict[str, list[float]] = field(default_factory=dict)
    findings: Counter[str] = field(default_factory=Counter)  # rule -> count, over one pass
    walked: int = 0  # messages whose value was walked (some step's prefilter fired)

    def rate(self, total_bytes: int) -> float:
        """Median MB/s over the timed passes."""
        return total_bytes / 1e6 / statistics.median(self.seconds)


@dataclass(slots=True)
class ScrubResults:
    requested_bytes: int  # mixed_traffic's argument
    total_bytes: int  # what it made
    messages: int
    kind_bytes: dict[str, int]
    secrets: int
    repeat: int
    passes: list[Pass]
    components: list[Pass]
    seconds: float = 0.0

    def get(self, key: str) -> Pass:
        return next(p for p in self.passes if p.key == key)


def make_secrets(count: int = SECRETS, seed: int = 4) -> Secrets:
    """``count`` credential-shaped values (API keys, tokens, passwords), the same for the same seed."""
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits
    shapes: list[Callable[[], str]] = [
        lambda: "sk-proj-" + "".join(rng.choice(alnum) for _ in range(48)),
        lambda: "ghp_" + "".join(rng.choice(alnum) for _ in range(36)),
        lambda: rng.randbytes(16).hex(),
        lambda: "".join(rng.choice(alnum + "+/") for _ in range(40)),
        lambda: "".join(rng.choice(alnum + "!#%&*-_") for _ in range(rng.randint(12, 20))),
    ]
    secrets = Secrets()
    for i in range(count):
        secrets.add(f"SECRET_{i:03d}", shapes[i % len(shapes)]())
    return secrets


def traffic(total_bytes: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages (in ``mixed_traffic`` order) and each one's kind of chunk."""
    chunks = mixed_traffic(total_bytes, seed)
    kind_of = {chunk: kind for kind, found in traffic_by_kind(total_bytes, seed).items() for chunk in found}
    kinds = [kind_of[chunk] for chunk in chunks]
    messages = [
        {"id": f"m{i:05d}", "role": _ROLE[kind], "content": chunk}
        for i, (kind, chunk) in enumerate(zip(kinds, chunks, strict=True))
    ]
    return messages, kinds


def run(total_bytes: int = 5_000_000, repeat: int = 5, seed: int = 0) -> ScrubResults:
    began = time.perf_counter()
    messages, kinds = traffic(total_bytes, seed)
    kind_bytes = Counter[str]()
    for message, kind in zip(messages, kinds, strict=True):
        kind_bytes[kind] += len(message["content"].encode())
    size = sum(kind_bytes.values())
    secrets = make_secrets()
    scrubbers = {
        "known": Scrubber(secrets=secrets, rules=False),
        "rules": Scrubber(rules=True),
        "both": Scrubber(secrets=secrets),
        "both_pii": Scrubber(secrets=secrets, pii=True),
    }
    passes = [
        Pass("known", "known values", f"`Scrubber(secrets=<{SECRETS} registered>, rules=False)`"),
        Pass("rules", "rules", "`Scrubber(rules=True)`, no secret registered"),
        Pass("both", "known values + rules", f"`Scrubber(secrets=<{SECRETS} registered>)`"),
        Pass("both_pii", "known values + rules + all PII", f"`Scrubber(secrets=<{SECRETS}>, pii=True)`"),
    ]
    for p in passes:
        _scrub_pass(scrubbers[p.key], messages, kinds, p, timed=False)
    for _ in range(repeat):
        for p in passes:
            _scrub_pass(scrubbers[p.key], messages, kinds, p, timed=True)
    components = _components(scrubbers["both"], messages, repeat)
    return ScrubResults(
        requested_bytes=total_bytes,
        total_bytes=size,
        messages=len(messages),
        kind_bytes=dict(kind_bytes),
        secrets=len(secrets),
        repeat=repeat,
        passes=passes,
        components=components,
        seconds=time.perf_counter() - began,
    )


def _scrub_pass(
    scrubber: Scrubber, messages: list[dict[str, Any]], kinds: list[str], into: Pass, *, timed: bool
) -> None:
    per_kind = dict.fromkeys(KINDS, 0.0)
    findings: Counter[str] = Counter()
    walked = 0
    clock = time.perf_counter
    began = clock()
    for i, (message, kind) in enumerate(zip(messages, kinds, strict=True)):
        start = clock()
        value, found = scrubber.scrub(message, f"messages[{i}]")
        per_kind[kind] += clock() - start
        if found.counts:
            for (rule, _path), count in found.counts.items():
                findings[rule] += count
        walked += value is not message  # a new object: some prefilter fired, the value was walked
    total = clock() - began
    if not timed:
        into.findings, into.walked = findings, walked
        return
    into.seconds.append(total)
    for kind, seconds in per_kind.items():
        into.kind_seconds.setdefault(kind, []).append(seconds)


def _components(scrubber: Scrubber, messages: list[dict[str, Any]], repeat: int) -> list[Pass]:
    """The pieces of a "known values + rules" pass, each timed alone over the same traffic,
    through the step protocol (``might_match(text)`` and ``step(text, found)``)."""
    texts = [codec.encode(m).decode() for m in messages]
    contents = [m["content"] for m in messages]
    known = next(step for step in scrubber.steps if isinstance(step, KnownSecretsStep))
    rules = next(step for step in scrubber.steps if isinstance(step, RulesStep))
    found = Found("redact", "content")  # nothing is found in this traffic but PII the rules leave alone
    pieces: list[tuple[Pass, Callable[[], object]]] = [
        (
            Pass("encode", "canonical JSON of each message", "`codec.encode(message).decode()`"),
            lambda: [codec.encode(m).decode() for m in messages],
        ),
        (
            Pass("known_prefilter", "known values: prefilter", "`KnownSecretsStep.might_match(json_text)`"),
            lambda: [known.might_match(t) for t in texts],
        ),
        (
            Pass(
                "known_step",
                "known values: the step on every content string",
                "`KnownSecretsStep(content, found)`",
            ),
            lambda: [known(c, found) for c in contents],
        ),
        (
            Pass("rules_prefilter", "rules: prefilter", "`RulesStep.might_match(json_text)`"),
            lambda: [rules.might_match(t) for t in texts],
        ),
        (
            Pass("rules_step", "rules: the step on every content string", "`RulesStep(content, found)`"),
            lambda: [rules(c, found) for c in contents],
        ),
    ]
    for _piece, action in pieces:
        action()  # warm-up
    for _ in range(repeat):
        for piece, action in pieces:
            start = time.perf_counter()
            action()
            piece.seconds.append(time.perf_counter() - start)
    piece_list = [piece for piece, _ in pieces]
    for piece in piece_list:
        step = known if piece.key == "known_prefilter" else rules if piece.key == "rules_prefilter" else None
        if step is not None:
            piece.walked = sum(step.might_match(t) for t in texts)
    return piece_list


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=float, default=5.0, help="traffic to scrub, in MB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = run(int(args.mb * 1_000_000), args.repeat, args.seed)
    size = results.total_bytes
    print(f"{results.messages} messages, {size:,} bytes of text, {results.secrets} registered secrets")
    for p in [*results.passes, *results.components]:
        rates = sorted(size / 1e6 / s for s in p.seconds)
        print(f"  {p.label:58} {p.rate(size):7.1f} MB/s  (min {rates[0]:.1f}, max {rates[-1]:.1f})")
        if p.findings:
            print(f"  {'':58} findings: {dict(p.findings.most_common(6))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
