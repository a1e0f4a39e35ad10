"""The blob section of docs/benchmarks.md (issue 5), from ``blob_section.BlobResults``."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from blob_section import TARGET_BYTES, TARGET_SAME_SPEED, BlobResults, Series
from common import DiskUsage
from fmt import TIMES, Target, ms, p95, size, table, targets_table, x
from postgres_section import PgResults

ANCHOR = "large-tool-outputs-issue-5"
KIND_LABELS = {
    "small": "no tool output (two ~500 B messages)",
    "new": "a 1 MB tool output not stored before",
    "repeat": "a 1 MB tool output seen before",
}


def _bytes_ratio(b: BlobResults) -> float:
    return _median_disk(b.series["default"]).total / b.unique_bytes


def _speed_ratio(b: BlobResults, steps: range, kind: str = "small") -> float:
    default = statistics.median(b.series["default"].values(b.kinds, kind, steps=steps))
    inline = statistics.median(b.series["inline"].values(b.kinds, kind, steps=steps))
    return default / inline


def targets(b: BlobResults) -> list[Target]:
    ratio, speed = _bytes_ratio(b), _speed_ratio(b, b.warm)
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
            f"Save with no new blob: default store / `blobs=False` (median, steps {b.warm.start}-{b.steps})",
            x(speed),
            f"≤ {TARGET_SAME_SPEED}{TIMES}",
            speed <= TARGET_SAME_SPEED,
            ANCHOR,
        ),
    ]


def render(b: BlobResults, pg: PgResults | None) -> str:
    parts = [_intro(b), targets_table(targets(b)), _times(b), _early(b), _bytes(b)]
    if pg is not None and pg.skipped is None and pg.blobs:
        parts.append(_postgres(pg))
    return "\n\n".join(p.strip("\n") for p in parts)


def _intro(b: BlobResults) -> str:
    outputs = b.kinds.count("new") + b.kinds.count("repeat")
    lg = f" and the first {b.probe_step} steps with LangGraph's `SqliteSaver`" if b.langgraph else ""
    return f"""
## Large tool outputs (issue 5)

The simulated agent of `bench/blob_workload.py`: {b.steps} steps, each a user
message (or, every 10th step, a tool message with a {b.output_bytes:,}-byte
output) and a ~500-byte assistant reply; every second tool call returns an
output seen before (seeded), so {b.distinct} of the {outputs} outputs are distinct.
Unique content bytes = {b.unique_bytes:,} B: compact JSON of every message, a
repeated output's text counted once (all content, repeats included:
{b.content_bytes:,} B). safepoint ran {b.reps} repetition(s) with two fresh SQLite
stores side by side: the **default** store (`open_store(url)`: scrubbing on,
strings over 64 KiB to content-addressed files beside the database) and
**`blobs=False`** (everything inline); every step is saved to both,
alternating which goes first, and only `store.save` is timed{lg}
({b.seconds:.0f} s in all).

The speed target compares steps {b.warm.start}-{b.steps}. During a fresh database's
first commits the WAL file is still growing, and each `fdatasync` then also
writes the file's new size: the `blobs=False` store, which writes 1 MB into
its WAL at step 10, leaves that phase at once, the default store (small
commits only) only when its WAL reaches the autocheckpoint size (256 pages,
about 120 steps here). Steps 1-{b.warm_steps} are shown separately below.
"""


def _stats(values: list[float]) -> list[str]:
    return [ms(statistics.median(values)), ms(p95(values))] if values else ["—", "—"]


def _times(b: BlobResults) -> str:
    default, inline = b.series["default"], b.series["inline"]
    rows = []
    for kind, label in KIND_LABELS.items():
        d, i = default.values(b.kinds, kind, steps=b.warm), inline.values(b.kinds, kind, steps=b.warm)
        if not d:
            continue
        d_cpu = default.values(b.kinds, kind, cpu=True, steps=b.warm)
        i_cpu = inline.values(b.kinds, kind, cpu=True, steps=b.warm)
        rows.append(
            [
                f"{label} ({len(d):,} saves)",
                *_stats(d),
                ms(statistics.median(d_cpu)),
                *_stats(i),
                ms(statistics.median(i_cpu)),
                x(statistics.median(d) / statistics.median(i)),
            ]
        )
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
    return f"""
### Time per save, steps {b.warm.start}-{b.steps}, by kind of step

Wall time of `store.save` (median and 95th percentile over every
repetition's steps of that kind) and the saving thread's CPU time. Every
save also runs the scrubber, which reads a 1 MB output in full, the same
work in both stores. A repeated output is hashed and found already stored
(no write) by the default store; `blobs=False` writes it inline again.

{table(head, rows)}
"""


def _early(b: BlobResults) -> str:
    first = range(1, b.warm_steps + 1)
    lg = b.langgraph
    lg_steps = range(1, min(b.probe_step, b.warm_steps) + 1)
    rows = []
    for kind, label in KIND_LABELS.items():
        d = b.series["default"].values(b.kinds, kind, steps=first)
        i = b.series["inline"].values(b.kinds, kind, steps=first)
        if not d:
            continue
        row = [
            f"{label} ({len(d):,} saves)",
            *_stats(d),
            *_stats(i),
            x(statistics.median(d) / statistics.median(i)),
        ]
        if lg is not None:
            chosen = [s - 1 for s in lg_steps if b.kinds[s - 1] == kind]
            row += [*_stats([lg.step_seconds[s] for s in chosen])]
            row.append(ms(statistics.median(lg.extra_seconds["put"][s] for s in chosen)))
        rows.append(row)
    head = [
        "Step",
        "default: median",
        "default: p95",
        "`blobs=False`: median",
        "`blobs=False`: p95",
        "default / `blobs=False` (median)",
    ]
    if lg is not None:
        head += ["SqliteSaver `invoke`: median", "SqliteSaver: p95", "SqliteSaver `put` (summed): median"]
    return f"""
### Time per save, steps 1-{b.warm_steps} (fresh databases), with SqliteSaver

The same measures over the first {b.warm_steps} steps, while the default store's WAL
file is still growing. SqliteSaver's time is one `graph.invoke` (which loads
the previous checkpoint and writes the new ones) and its `put` calls of the
step, over its steps 1-{lg_steps.stop - 1}.

{table(head, rows)}
"""


def _bytes(b: BlobResults) -> str:
    at_probe = [
        ("content, repeats counted once", b.probe_unique_bytes),
        ("safepoint default", statistics.median(b.series["default"].probe_bytes)),
        ("safepoint `blobs=False`", statistics.median(b.series["inline"].probe_bytes)),
    ]
    if b.langgraph is not None:
        at_probe.append(("SqliteSaver", b.langgraph.disk.total))
    probe_rows = [[name, size(n), x(n / b.probe_unique_bytes)] for name, n in at_probe]
    columns: list[tuple[str, DiskUsage]] = [
        ("safepoint default", _median_disk(b.series["default"])),
        ("safepoint `blobs=False`", _median_disk(b.series["inline"])),
    ]
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
### Bytes stored

After step {b.probe_step}: safepoint's database pages in use (read-only connection,
WAL content included, free pages left out) plus its blob files, the median
repetition; SqliteSaver's files after its run (connection closed).
SqliteSaver stores every checkpoint's full channel values, so every message
again at each of its writes.

{table([f"After step {b.probe_step}", "bytes", "/ unique content"], probe_rows)}

After step {b.steps}, file sizes once the store is closed (the median repetition).
The blob files hold each distinct output once, uncompressed; checkpoints hold
a reference (digest, size, media type).

{table(head, rows)}
"""


def _postgres(pg: PgResults) -> str:
    steps, kinds, unique = pg.blob_steps, pg.blob_kinds, pg.blob_unique_bytes
    rows = []
    for kind, label in KIND_LABELS.items():
        row = [label]
        for name in ("safepoint", "postgres"):
            values = [t for t, k in zip(pg.blobs[name].seconds, kinds, strict=True) if k == kind]
            row += _stats(values)
        rows.append(row)
    stored = [
        [
            name,
            size(pg.blobs[key].stored_bytes),
            x(pg.blobs[key].stored_bytes / unique),
        ]
        for key, name in (("safepoint", "safepoint `store.save` (defaults)"), ("postgres", "PostgresSaver"))
    ]
    head = [
        "Step",
        "safepoint `save`: median",
        "safepoint: p95",
        "PostgresSaver `invoke`: median",
        "PostgresSaver: p95",
    ]
    return f"""
### On PostgreSQL

The first {steps} steps of the same agent in the PostgreSQL section's server:
a safepoint store at its defaults (`open_store(url, schema=…)`: large values
in the store's own blob table, written in the checkpoint's transaction)
saving each step, and the `lg_graph` graph over `PostgresSaver` (LangGraph's
defaults) running each step, in one client process, alternating blocks of
10 steps. Bytes: `pg_total_relation_size` (heap, TOAST, indexes) of every
table in each schema after the last step; unique content of these steps:
{unique:,} B.

{table(head, rows)}

{table([f"After step {steps}", "bytes", "/ unique content"], stored)}
"""


def _median_disk(series: Series) -> DiskUsage:
    ordered = sorted(series.disk, key=lambda d: d.total)
    return ordered[(len(ordered) - 1) // 2]
