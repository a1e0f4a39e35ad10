"""The blob section of docs/benchmarks.md (issue 5), from ``sections.blobs.BlobResults``."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from common import DiskUsage
from sections.blobs import TARGET_BYTES, TARGET_SAME_SPEED, BlobResults, Series
from sections.postgres import PgResults

from report import templating
from report.fmt import TIMES, Target, ms, p95, size, targets_table, x

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
    return templating.render("blobs/intro.md.j2", b=b, outputs=outputs, lg=lg)


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
    return templating.render("blobs/times.md.j2", b=b, head=head, rows=rows)


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
    return templating.render("blobs/early.md.j2", b=b, lg_steps=lg_steps, head=head, rows=rows)


def _bytes(b: BlobResults) -> str:
    at_probe = [
        ("content, repeats counted once", b.probe_unique_bytes),
        ("safepoint default", statistics.median(b.series["default"].probe_bytes)),
        ("safepoint `blobs=False`", statistics.median(b.series["inline"].probe_bytes)),
    ]
    if b.langgraph is not None:
        at_probe.append(("SqliteSaver", b.langgraph.disk.total))
    probe_rows = [[name, size(n), x(n / b.probe_unique_bytes)] for name, n in at_probe]
    probe_head = [f"After step {b.probe_step}", "bytes", "/ unique content"]
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
    return templating.render(
        "blobs/bytes.md.j2", b=b, probe_head=probe_head, probe_rows=probe_rows, head=head, rows=rows
    )


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
    stored_head = [f"After step {steps}", "bytes", "/ unique content"]
    return templating.render(
        "blobs/postgres.md.j2",
        steps=steps,
        unique=unique,
        head=head,
        rows=rows,
        stored_head=stored_head,
        stored=stored,
    )


def _median_disk(series: Series) -> DiskUsage:
    ordered = sorted(series.disk, key=lambda d: d.total)
    return ordered[(len(ordered) - 1) // 2]
