"""The scrubber section of docs/benchmarks.md (issue 4, and issue 13's adversarial families), from
``scrub_section.ScrubResults``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from common import StoreRun
from fmt import TIMES, Target, ms, table, targets_table
from scrub_section import SECRETS, TARGET_KNOWN, TARGET_RATIO, TARGET_RULES, Adversarial, ScrubResults

from scrub_corpus.traffic import KINDS  # (tests/ is on sys.path: scrub_section puts it there)

ANCHOR = "scrubber-throughput-issue-4"
ADVERSARIAL_ANCHOR = "adversarial-text-linear-time-issue-13"  # the heading render_adversarial writes


def targets(s: ScrubResults) -> list[Target]:
    known, rules = s.get("known").rate(s.total_bytes), s.get("rules").rate(s.total_bytes)
    return [
        Target(
            "#4",
            f"Known-value pass, {s.secrets} registered secrets (MB/s)",
            f"{known:.1f} MB/s ({known / TARGET_KNOWN:.2f}{TIMES} the target)",
            f"≥ {TARGET_KNOWN:g} MB/s",
            known >= TARGET_KNOWN,
            ANCHOR,
        ),
        Target(
            "#4",
            "Rule pass (MB/s)",
            f"{rules:.1f} MB/s ({rules / TARGET_RULES:.2f}{TIMES} the target)",
            f"≥ {TARGET_RULES:g} MB/s",
            rules >= TARGET_RULES,
            ANCHOR,
        ),
        *(adversarial_targets(s.adversarial) if s.adversarial is not None else []),
    ]


def adversarial_targets(a: Adversarial) -> list[Target]:
    worst = max(a.families, key=lambda f: (bool(f.error), f.ratio))
    failed = [f.key for f in a.families if not f.ok]
    return [
        Target(
            "#13",
            f"Scrub time, {a.sizes[-1] / 1e6:g} MB / {a.sizes[0] / 1e6:g} MB, worst of {len(a.families)} "
            "adversarial families",
            f"{worst.ratio:.2f}{TIMES} ({worst.key})" + (f"; over: {', '.join(failed)}" if failed else ""),
            f"≤ {TARGET_RATIO:g}{TIMES} for every family",
            a.ok,
            ADVERSARIAL_ANCHOR,
        ),
        Target(
            "#13",
            "Secret-rule findings per MB of ordinary agent traffic",
            f"{a.ordinary_findings_per_mb:g}",
            "0",
            a.ordinary_findings_per_mb == 0,
            ADVERSARIAL_ANCHOR,
        ),
    ]


def render(s: ScrubResults, default: Sequence[StoreRun], unscrubbed: Sequence[StoreRun]) -> str:
    parts = [_intro(s), targets_table(targets(s)), _passes(s), _kinds(s), _components(s)]
    if default and unscrubbed:
        parts.append(_store_cost(default, unscrubbed))
    if s.adversarial is not None:
        parts.append(render_adversarial(s.adversarial))
    return "\n\n".join(p.strip("\n") for p in parts)


def render_adversarial(a: Adversarial) -> str:
    """The adversarial families: time at both sizes, the ratio against the target, findings."""
    small, large = (f"{size / 1e6:g} MB" for size in (a.sizes[0], a.sizes[-1]))
    rows = []
    for f in a.families:
        if f.error:
            rows.append([f.key, f.shape, "-", "-", "-", f"FAIL ({f.error})", "-"])
            continue
        rate = a.sizes[-1] / 1e6 / f.seconds[-1] if f.seconds[-1] else 0.0
        rows.append(
            [
                f.key,
                f.shape,
                f"{f.seconds[0]:.3f}",
                f"{f.seconds[-1]:.3f}",
                f"{f.ratio:.2f}{TIMES}",
                "PASS" if f.ok else "FAIL",
                f"{rate:.1f} MB/s, {f.findings[-1]:,} findings",
            ]
        )
    head = [
        "Family",
        "Text",
        f"s at {small}",
        f"s at {large}",
        "ratio",
        f"≤ {TARGET_RATIO:g}{TIMES}",
        f"at {large}",
    ]
    return f"""
### Adversarial text: linear time (issue 13)

No input may make a save take more than linear time. One family per rule
packs that rule's triggers densely — its generated tokens, each followed by
four of its look-alikes and four bare trigger spellings, glued by nothing, a
space, a line break, an escaped `\\n`, `,` or `=`; then shapes that trigger
again and again without completing a match, values longer than any window,
marker-shaped input, ordinary agent traffic, and the load side (a registered
secret every 25 characters, saved to `open_store("memory://", secrets=…)` and
loaded with `resolve_secrets=True`). Each text is one message scrubbed with
`Scrubber().scrub` (`Scrubber(pii=(kind,))` for a PII rule): {small}, {large},
then {small} again, in process CPU seconds, each size's time the lower of its
runs; a family over the target is measured once more before it counts (on a
shared machine one busy moment in the long run tips it). Ordinary traffic: {a.ordinary_findings_per_mb:g}
findings per MB. Measured in {a.seconds:.0f} s.

{table(head, rows)}
"""


def _rate(s: ScrubResults, seconds: list[float], size: int | None = None) -> str:
    size = s.total_bytes if size is None else size
    rates = sorted(size / 1e6 / t for t in seconds)
    return f"{statistics.median(rates):.1f} ({rates[0]:.1f}-{rates[-1]:.1f})"


def _intro(s: ScrubResults) -> str:
    kinds = ", ".join(f"{kind} {s.kind_bytes[kind]:,} B" for kind in KINDS)
    return f"""
## Scrubber throughput (issue 4)

What a save pays to keep secrets out: the traffic is
`safepoint.testing.traffic.mixed_traffic({s.requested_bytes:_})`,
{s.total_bytes:,} bytes of secret-free agent text in {s.messages:,} chunks ({kinds}).
Each chunk is one message dict `{{"id", "role", "content"}}` cleaned with the
scrubber's public entry point the store uses for every field,
`Scrubber.scrub(message, "messages[i]")`: it encodes the value to canonical
JSON, runs each step's prefilter over that text, and walks the value (every
string through every step) only when a prefilter fires. A save's new
messages take the same path, with the JSON the store encodes anyway. The
{SECRETS} registered secrets are credential-shaped random values (API keys,
tokens, hex, passwords), none of them in the traffic, each looked for in all
its encodings (raw, JSON-escaped, URL-encoded, base64 …). MB/s = the
traffic's UTF-8 text bytes / 10^6 / seconds of one pass over all of it, the
median of {s.repeat} timed passes (min-max in brackets) after one untimed
warm-up pass that builds the automata; the passes of the four scrubbers are
interleaved. Measured in {s.seconds:.0f} s.
"""


def _passes(s: ScrubResults) -> str:
    rows = []
    for p in s.passes:
        findings = (
            ", ".join(f"{rule} {n:,}" for rule, n in p.findings.most_common(5)) if p.findings else "none"
        )
        rows.append([p.label, p.setup, _rate(s, p.seconds), f"{p.walked:,} of {s.messages:,}", findings])
    head = ["Pass", "Scrubber", "MB/s, median (min-max)", "messages walked", "findings on this traffic"]
    return f"""
"Messages walked" are those where some prefilter fired and the value was
walked string by string; "findings" are what the pass replaced in this
secret-free traffic (its false positives, except emails, which are PII the
traffic does hold).

{table(head, rows)}
"""


def _kinds(s: ScrubResults) -> str:
    rows = []
    for p in s.passes:
        rows.append([p.label, *(_rate(s, p.kind_seconds[kind], s.kind_bytes[kind]) for kind in KINDS)])
    return f"""
The same passes by kind of chunk (time inside `scrub` for the chunks of one
kind, over that kind's bytes):

{table(["Pass", *(f"{kind} MB/s" for kind in KINDS)], rows)}
"""


def _components(s: ScrubResults) -> str:
    rows = [[c.label, c.setup, _rate(s, c.seconds)] for c in s.components]
    fired = {c.key: c.walked for c in s.components if c.key.endswith("_prefilter")}
    return f"""
Where a pass's time goes: the pieces of the "known values + rules" scrubber,
each timed alone over the same messages through the step protocol the
scrubber runs (each step's `might_match` prefilter over a message's canonical
JSON text, and the step itself, `step(text, found)`, on a string). A message
is walked when any prefilter fires: the known-value prefilter fired on
{fired.get("known_prefilter", 0):,} and the rule prefilter on {fired.get("rules_prefilter", 0):,}
of the {s.messages:,} messages; every string of a walked message goes through
both steps.

{table(["Piece", "Call", "MB/s, median (min-max)"], rows)}
"""


def _store_cost(default: Sequence[StoreRun], unscrubbed: Sequence[StoreRun]) -> str:
    def mean(runs: Sequence[StoreRun], key: str | None) -> float:
        return statistics.fmean(t for r in runs for t in (r.extra_seconds[key] if key else r.step_seconds))

    wall = mean(default, None) - mean(unscrubbed, None)
    cpu = mean(default, "cpu") - mean(unscrubbed, "cpu")
    return f"""
**Cost per save in the store benchmark.** In the SQLite section's simulated
agent (two ~500-byte messages per step, a 50 KB tool output every 10th),
the default store (token rules on, no secret registered) against
`scrubber=False`, same blob settings, {len(default)} repetition(s) each, interleaved:
the scrubber adds {ms(cpu)} of CPU per save on average ({ms(mean(default, "cpu"))} against
{ms(mean(unscrubbed, "cpu"))}) and {ms(wall)} of wall time ({ms(mean(default, None))} against
{ms(mean(unscrubbed, None))}).
"""
