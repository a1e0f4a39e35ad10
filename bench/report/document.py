"""Turn the measurements into the Markdown report (docs/benchmarks.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from common import StoreRun
from sections.blobs import BlobResults
from sections.postgres import PgResults
from sections.save_breakdown import Breakdown
from sections.scrub import ScrubResults

from report import adapter as report_adapter
from report import blobs as report_blobs
from report import postgres as report_postgres
from report import scrub as report_scrub
from report import sqlite as report_sqlite
from report import templating

NO_SCRUB = "scrubber=False"  # the variant the scrubber section compares with (sqlite_store's options label)


@dataclass(frozen=True, slots=True)
class Results:
    command: str
    date: str
    machine: dict[str, str]
    steps: int
    probes: tuple[int, ...]
    content_json_bytes: int
    content_text_bytes: int
    safepoint: list[StoreRun]
    langgraph: list[StoreRun]
    seconds: float
    postgres: PgResults | None = None  # None: skipped with --no-postgres
    variants: dict[str, list[StoreRun]] = field(default_factory=dict)  # options label -> repetitions
    adapter: list[StoreRun] = field(default_factory=list)  # SafepointSaver under the same graph
    scrub: ScrubResults | None = None
    blobs: BlobResults | None = None
    load: str = ""  # load average while the run went on
    content_at: dict[int, int] = field(default_factory=dict)  # probe step -> content bytes so far (JSON)
    breakdown: Breakdown | None = None  # one save, phase by phase


def render(r: Results) -> str:
    """The whole report: a header, every target at a glance, then each section in turn."""
    if r.adapter and r.langgraph:
        adapter = report_adapter.render(r.adapter, r.langgraph[0], r.probes, r.content_at, r.postgres)
    else:
        adapter = templating.render("document/adapter_skipped.md.j2")
    unscrubbed = r.variants.get(NO_SCRUB, [])
    parts = {
        "header": _header(r),
        "summary": _summary(r),
        "sqlite": report_sqlite.render(r),
        "scrub": "" if r.scrub is None else report_scrub.render(r.scrub, r.safepoint, unscrubbed),
        "blobs": "" if r.blobs is None else report_blobs.render(r.blobs, r.postgres),
        "adapter": adapter,
        "postgres": report_postgres.render(r.postgres),
    }
    return templating.render("document/document.md.j2", **{k: v.strip("\n") for k, v in parts.items()})


def _header(r: Results) -> str:
    machine = "\n".join(f"- **{k}:** {v}" for k, v in r.machine.items())
    return templating.render(
        "document/header.md.j2",
        r=r,
        report_sqlite=report_sqlite,
        report_scrub=report_scrub,
        report_blobs=report_blobs,
        report_adapter=report_adapter,
        machine=machine,
    )


def _summary(r: Results) -> str:
    rows = report_sqlite.targets(r)
    if r.scrub is not None:
        rows += report_scrub.targets(r.scrub)
    if r.blobs is not None:
        rows += report_blobs.targets(r.blobs)
    if r.adapter and r.langgraph:
        rows += report_adapter.targets(r.adapter, r.langgraph[0], r.probes)
    rows += report_postgres.targets(r.postgres)
    missed = sum(not t.ok for t in rows)
    return templating.render("document/summary.md.j2", rows=rows, missed=missed)
