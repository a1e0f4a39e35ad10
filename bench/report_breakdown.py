"""The "Where a save's time goes" part of the SQLite section (see save_breakdown.py)."""

from __future__ import annotations

import statistics

from fmt import ms, table, x
from raw_sqlite import ROW_BYTES
from save_breakdown import PHASES, Breakdown

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
    return f"""
### Where a save's time goes

No target rests on this table; it shows where the saves/s ratio comes
from. One more run of the default store over the same {len(saves):,} steps,
each save timed phase by phase as `SQLiteDriver.run` performs them, with two
raw floors interleaved on files of their own (same durability settings):
the usual {ROW_BYTES}-byte row, and a row holding the step's own new content
(its two messages), the least any store must write durably for that step.

{table(["Phase", "What it does", "mean", "median", "share of the mean"], rows)}

Ratios from this run: raw 1 KB commit / whole save = {x(raw_1kb / save_mean)};
with the pipeline's work taken out (what the SQL and the bookkeeping around
it cost alone) = {x(raw_1kb / without_pipeline)}; the transaction alone
(`BEGIN` + statements + `COMMIT`) against a raw commit of the same content =
{x(raw_payload / sql_only)}. On this machine a durable commit costs about
{ms(raw_1kb)}, so every 10 µs of CPU a save spends moves the saves/s ratio by
several points; on a disk whose `fsync` takes a millisecond the same work
would be lost in the noise.
"""
