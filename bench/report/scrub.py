"""The scrubber section of docs/benchmarks.md (issue 4, and issue 13's adversarial families), from
``sections.scrub.ScrubResults``."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from common import StoreRun
from sections.scrub import SECRETS, TARGET_KNOWN, TARGET_RATIO, TARGET_RULES, Adversarial, ScrubResults

from report import templating
from report.fmt import TIMES, Target, targets_table
from scrub_corpus.traffic import KINDS  # (tests/ is on sys.path: sections.scrub puts it there)

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
    return templating.render("scrub/adversarial.md.j2", small=small, large=large, a=a, head=head, rows=rows)


def _rate(s: ScrubResults, seconds: list[float], size: int | None = None) -> str:
    size = s.total_bytes if size is None else size
    rates = sorted(size / 1e6 / t for t in seconds)
    return f"{statistics.median(rates):.1f} ({rates[0]:.1f}-{rates[-1]:.1f})"


def _intro(s: ScrubResults) -> str:
    kinds = ", ".join(f"{kind} {s.kind_bytes[kind]:,} B" for kind in KINDS)
    return templating.render("scrub/intro.md.j2", s=s, kinds=kinds, SECRETS=SECRETS)


def _passes(s: ScrubResults) -> str:
    rows = []
    for p in s.passes:
        findings = (
            ", ".join(f"{rule} {n:,}" for rule, n in p.findings.most_common(5)) if p.findings else "none"
        )
        rows.append([p.label, p.setup, _rate(s, p.seconds), f"{p.walked:,} of {s.messages:,}", findings])
    head = ["Pass", "Scrubber", "MB/s, median (min-max)", "messages walked", "findings on this traffic"]
    return templating.render("scrub/passes.md.j2", head=head, rows=rows)


def _kinds(s: ScrubResults) -> str:
    rows = []
    for p in s.passes:
        rows.append([p.label, *(_rate(s, p.kind_seconds[kind], s.kind_bytes[kind]) for kind in KINDS)])
    head = ["Pass", *(f"{kind} MB/s" for kind in KINDS)]
    return templating.render("scrub/kinds.md.j2", head=head, rows=rows)


def _components(s: ScrubResults) -> str:
    rows = [[c.label, c.setup, _rate(s, c.seconds)] for c in s.components]
    fired = {c.key: c.walked for c in s.components if c.key.endswith("_prefilter")}
    return templating.render("scrub/components.md.j2", fired=fired, s=s, rows=rows)


def _store_cost(default: Sequence[StoreRun], unscrubbed: Sequence[StoreRun]) -> str:
    def mean(runs: Sequence[StoreRun], key: str | None) -> float:
        return statistics.fmean(t for r in runs for t in (r.extra_seconds[key] if key else r.step_seconds))

    wall = mean(default, None) - mean(unscrubbed, None)
    cpu = mean(default, "cpu") - mean(unscrubbed, "cpu")
    return templating.render(
        "scrub/store_cost.md.j2", default=default, cpu=cpu, mean=mean, unscrubbed=unscrubbed, wall=wall
    )
