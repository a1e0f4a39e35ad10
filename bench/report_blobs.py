"""The blob section of docs/benchmarks.md (issue 5), from ``blob_section.BlobResults``."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from blob_section import TARGET_BYTES, TARGET_SAME_SPEED, BlobResults, Series
from common import DiskUsage
from fmt import TIMES, Target, ms, p95, size, table, targets_table, x

ANCHOR = "large-tool-outputs-issue-5"
KIND_LABELS = {
    "small": "no tool output (two ~500 B messages)",
    "new": "a 1 MB tool output not stored before",
    "repeat": "a 1 MB tool output seen before",
}


def _bytes_ratio(b: BlobResults) -> float:
    return statistics.median(d.total for d in b.series["default"].disk) / b.unique_bytes


def _speed_ratio(b: BlobResults, kind: str = "small", cpu: bool = False) -> float:
    default = statistics.median(b.series["default"].values(b.kinds, kind, cpu))
    inline = statistics.median(b.series["inline"].values(b.kinds, kind, cpu))
    return default / inline


def targets(b: BlobResults) -> list[Target]:
    ratio, speed = _bytes_ratio(b), _speed_ratio(b)
    return [
        Target(
            "#5",
            f"Bytes stored / unique content bytes after {b.steps} steps (db + WAL + blob files)",
            x(ratio),
            f"≤ {TARGET_BYTES}{TIMES}",
            ratio <= TARGET_BYTES,
            ANCHOR,
        ),
        Target(
            "#5",
            "Save with no new blob: default store / `blobs=False` (median, interleaved)",
            x(speed),
            f"≤ {TARGET_SAME_SPEED}{TIMES}",
            speed <= TARGET_SAME_SPEED,
            ANCHOR,
        ),
    ]


def render(b: BlobResults) -> str:
    parts = [_intro(b), targets_table(targets(b)), _times(b), _bytes(b)]
    return "\n\n".join(p.strip("\n") for p in parts)


def _intro(b: BlobResults) -> str:
    lg = f" and {b.langgraph_steps} steps of LangGraph's `SqliteSaver`" if b.langgraph else ""
    return f"""
## Large tool outputs (issue 5)

The simulated agent of `bench/blob_workload.py`: {b.steps} steps, each a user
message (or, every 10th step, a tool message with a
{b.output_bytes:,}-byte output) and a ~500-byte assistant reply; every second tool
call returns an output seen before (seeded), so {b.distinct} of the
{b.kinds.count("new") + b.kinds.count("repeat")} outputs are distinct. Unique content bytes =
{b.unique_bytes:,} B:
compact JSON of every message, a repeated output's text counted once (all
content, repeats included: {b.content_bytes:,} B). safepoint ran {b.reps} repetition(s)
with two fresh SQLite stores side by side: the **default** store
(`open_store(url)`: scrubbing on, strings over 64 KiB to content-addressed
files beside the database) and **`blobs=False`** (everything inline), every
step saved to both, alternating which goes first, only `store.save` timed{lg}
({b.seconds:.0f} s in all).
"""


def _stats(values: list[float]) -> list[str]:
    return [ms(statistics.median(values)), ms(p95(values))] if values else ["—", "—"]


def _times(b: BlobResults) -> str:
    default, inline = b.series["default"], b.series["inline"]
    lg = b.langgraph
    rows = []
    for kind, label in KIND_LABELS.items():
        d, i = default.values(b.kinds, kind), inline.values(b.kinds, kind)
        d_cpu, i_cpu = default.values(b.kinds, kind, cpu=True), inline.values(b.kinds, kind, cpu=True)
        row = [f"{label} ({len(d):,} saves)", *_stats(d), ms(statistics.median(d_cpu))]
        row += [*_stats(i), ms(statistics.median(i_cpu))]
        row.append(x(statistics.median(d) / statistics.median(i)))
        if lg is not None:
            steps = [t for t, k in zip(lg.step_seconds, b.kinds, strict=True) if k == kind]
            puts = [t for t, k in zip(lg.extra_seconds["put"], b.kinds, strict=True) if k == kind]
            row += [*_stats(steps), ms(statistics.median(puts))]
        rows.append(row)
    head = [
        "Step",
        "default: median",
        "default: p95",
        "default: CPU median",
        "`blobs=False`: median",
        "`blobs=False`: p95",
        "`blobs=False`: CPU median",
        "default / `blobs=False` (median)",
    ]
    if lg is not None:
        head += ["SqliteSaver `invoke`: median", "SqliteSaver: p95", "SqliteSaver `put` median"]
    return f"""
### Time per save, by kind of step

Wall time of `store.save` (median and 95th percentile over every
repetition's steps of that kind) and the saving thread's CPU time. Every
save also runs the scrubber, which reads a 1 MB output in full, the same
work in both stores. A repeated output is hashed and found already stored
(no write) by the default store; `blobs=False` writes it inline again.
SqliteSaver's time is one `graph.invoke` (which loads the previous checkpoint
and writes the new ones) and the summed `put` calls of the step.

{table(head, rows)}
"""


def _bytes(b: BlobResults) -> str:
    columns: list[tuple[str, DiskUsage]] = [
        ("safepoint default", _median_disk(b.series["default"])),
        ("safepoint `blobs=False`", _median_disk(b.series["inline"])),
    ]
    if b.langgraph is not None:
        columns.append((f"SqliteSaver ({b.langgraph_steps} steps)", b.langgraph.disk))
    fields: list[tuple[str, Callable[[DiskUsage], str]]] = [
        ("database file", lambda d: size(d.db)),
        ("`-wal` + `-shm` files", lambda d: size(d.wal + d.shm)),
        ("blob files", lambda d: f"{size(d.blobs)} in {d.blob_files} file(s)"),
        ("total", lambda d: size(d.total)),
        ("total / unique content bytes", lambda d: x(d.total / b.unique_bytes)),
        ("total / all content bytes (repeats included)", lambda d: x(d.total / b.content_bytes)),
    ]
    rows = [[label, *(show(d) for _name, d in columns)] for label, show in fields]
    head = ["After all steps, store closed", *(name for name, _d in columns)]
    return f"""
### Bytes stored after {b.steps} steps

Sizes of the files after the store (or connection) is closed, the median
repetition for safepoint. The blob files hold each distinct output once,
uncompressed; checkpoints hold a reference (digest, size, media type).
SqliteSaver stores every checkpoint's full channel values, every message
again at each of its writes.

{table(head, rows)}
"""


def _median_disk(series: Series) -> DiskUsage:
    ordered = sorted(series.disk, key=lambda d: d.total)
    return ordered[(len(ordered) - 1) // 2]
