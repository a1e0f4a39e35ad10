"""The "Where a save's time goes" part of the SQLite section (see save_breakdown.py)."""

from __future__ import annotations

import statistics

from contenders.raw_sqlite import ROW_BYTES
from sections.save_breakdown import PHASES, Breakdown

from report import templating
from report.fmt import ms

_WHAT = {
    "pipeline": "validation, scrubbing, encoding, the message delta (before the transaction)",
    "BEGIN IMMEDIATE": "take SQLite's write lock",
    "statements": "the head lookup, building the row and its digest, the one-row insert",
    "COMMIT": "the WAL write and its `fsync` (and, now and then, the WAL checkpoint)",
    "after": "record in the checkpoint what was stored",
}


def render(b: Breakdown) -> str:
    saves = b.saves
    save_mean = statistics.fmean(saves)
    raw_1kb, raw_payload = statistics.fmean(b.raw_1kb), statistics.fmean(b.raw_payload)
    rows = [
        [f"`{p}`", _WHAT[p], ms(b.mean(p)), ms(b.median(p)), f"{b.mean(p) / save_mean:.0%}"] for p in PHASES
    ]
    rows.append(["**whole save**", "", ms(save_mean), ms(statistics.median(saves)), "100%"])
    rows.append(["raw commit, 1 KB row", "the floor the saves/s target uses", ms(raw_1kb), "", ""])
    rows.append(
        [
            "raw commit, the step's content",
            f"one row of the step's two messages as JSON ({b.payload_bytes:,.0f} B on average)",
            ms(raw_payload),
            "",
            "",
        ]
    )
    without_pipeline = save_mean - b.mean("pipeline")
    sql_only = b.mean("BEGIN IMMEDIATE") + b.mean("statements") + b.mean("COMMIT")
    return templating.render(
        "breakdown/breakdown.md.j2",
        saves=saves,
        ROW_BYTES=ROW_BYTES,
        rows=rows,
        raw_1kb=raw_1kb,
        save_mean=save_mean,
        without_pipeline=without_pipeline,
        raw_payload=raw_payload,
        sql_only=sql_only,
    )
