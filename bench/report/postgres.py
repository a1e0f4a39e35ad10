"""The PostgreSQL section of docs/benchmarks.md, from ``sections.postgres.PgResults``."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence

from common import WINDOW, window, window_mean, window_median
from contenders.claims import LEASE_SECONDS
from contenders.raw_postgres import ROW_BYTES
from sections.postgres import BLOCK, CLAIMERS, WRITERS, PgResults, Throughput
from workloads.agent import MESSAGE_BYTES, TOOL_EVERY, TOOL_OUTPUT_BYTES

from report import templating
from report.fmt import TIMES, Target
from report.fmt import ms as _ms
from report.fmt import x as _x

ANCHOR = "postgresql"
TARGET_RAW = 0.7
TARGET_LANGGRAPH = 3.0
TARGET_GROWTH = 1.1
TARGET_SERVER_FLOOR = 1.5  # issue 17: server CPU per save / the same two rows in one bare statement


def render(pg: PgResults | None) -> str:
    if pg is None:
        return "## PostgreSQL\n\nSkipped: `--no-postgres` was given."
    if pg.skipped is not None:
        return templating.render("postgres/skipped.md.j2", pg=pg)
    parts = [
        _intro(pg),
        _targets(pg),
        _throughput(pg),
        _step_times(pg),
        _claims(pg),
        _cpu(pg),
        _settings(pg),
        _method(pg),
    ]
    return "\n\n".join(p.strip("\n") for p in parts)


# -- helpers -----------------------------------------------------------------------


def _one_rate(pg: PgResults, index: int) -> float:
    """Median over repetitions of the 1-writer rate of safepoint (0) or raw (1)."""
    return statistics.median(pair[index].rate for pair in pg.one)


def _one_ratio(pg: PgResults) -> float:
    return statistics.median(sp.rate / raw.rate for sp, raw in pg.one)


def _one_prefix(pg: PgResults, steps: int) -> float:
    return statistics.median(sp.prefix_rate(steps) for sp, _raw in pg.one)


def _growth(series: Sequence[Sequence[float]], first: int, last: int) -> tuple[float, float]:
    return (
        window_median(series, last) / window_median(series, first),
        window_mean(series, last) / window_mean(series, first),
    )


def _probes(pg: PgResults) -> tuple[int, ...]:
    return tuple(sorted({p for p in (10, 100, pg.steps) if p <= pg.steps}))


def _one_series(pg: PgResults) -> list[list[float]]:
    return [run for sp, _raw in pg.one for run in sp.op_seconds]


def _one_cpu(pg: PgResults) -> list[list[float]]:
    return [run for sp, _raw in pg.one for run in sp.op_cpu]


# -- sections -----------------------------------------------------------------------


def _intro(pg: PgResults) -> str:
    s = pg.settings
    return templating.render("postgres/intro.md.j2", s=s, pg=pg)


def targets(pg: PgResults | None) -> list[Target]:
    """Issue 3's targets as measured (none when the section was skipped)."""
    if pg is None or pg.skipped is not None:
        return []
    rows = []
    if pg.eight is not None:
        sp, raw = pg.eight
        ratio = sp.rate / raw.rate
        rows.append(
            Target(
                "#3",
                f"PostgreSQL saves/s, {WRITERS} writers / raw 1-row commits/s, {WRITERS} connections",
                f"{_x(ratio)} ({sp.rate:,.0f} / {raw.rate:,.0f})",
                f"≥ {TARGET_RAW}{TIMES}",
                ratio >= TARGET_RAW,
                ANCHOR,
            )
        )
    if pg.eight is not None and pg.langgraph_eight is not None:
        n = pg.langgraph_steps_8
        sp_rate, lg_rate = pg.eight[0].prefix_rate(n), pg.langgraph_eight.rate
        rows.append(
            Target(
                "#3",
                f"PostgreSQL saves/s, {WRITERS} writers / PostgresSaver steps/s, {WRITERS} writers "
                f"(steps 1-{n} of each run)",
                f"{_x(sp_rate / lg_rate)} ({sp_rate:,.0f} / {lg_rate:,.1f})",
                f"≥ {TARGET_LANGGRAPH:g}{TIMES}",
                sp_rate / lg_rate >= TARGET_LANGGRAPH,
                ANCHOR,
            )
        )
    rows += _floor_targets(pg)
    probes = _probes(pg)
    if pg.one and len(probes) > 1:
        first, last = probes[0], probes[-1]
        median, mean = _growth(_one_series(pg), first, last)
        for label, value in (("window median", median), ("window mean", mean)):
            rows.append(
                Target(
                    "#3",
                    f"PostgreSQL save time, step {last} / step {first}, 1 writer ({label})",
                    _x(value),
                    f"≤ {TARGET_GROWTH}{TIMES}",
                    value <= TARGET_GROWTH,
                    ANCHOR,
                )
            )
    return rows


def server_per_op(t: Throughput) -> float:
    return t.cpu.server / t.ops


def _floor_targets(pg: PgResults) -> list[Target]:
    """Issue 17: the server CPU of a save against the floor's (the same two rows, one bare statement)."""
    pairs: list[tuple[str, float, float]] = []
    if pg.one and len(pg.floor_one) == len(pg.one):
        saves = statistics.median(server_per_op(sp) for sp, _raw in pg.one)
        floor = statistics.median(server_per_op(f) for f in pg.floor_one)
        pairs.append(("1 writer (median of repetitions)", saves, floor))
    if pg.eight is not None and pg.floor_eight is not None:
        pairs.append((f"{WRITERS} writers", server_per_op(pg.eight[0]), server_per_op(pg.floor_eight)))
    return [
        Target(
            "#17",
            f"PostgreSQL server CPU per save / the same two rows in one bare statement, {label}",
            f"{_x(saves / floor)} ({_ms(saves)} / {_ms(floor)})",
            f"≤ {TARGET_SERVER_FLOOR}{TIMES}",
            saves / floor <= TARGET_SERVER_FLOOR,
            ANCHOR,
        )
        for label, saves, floor in pairs
        if floor > 0
    ]


def _targets(pg: PgResults) -> str:
    rows = targets(pg)
    info = []
    if pg.one:
        info.append(
            [
                "Saves/s, 1 writer / raw 1-row commits/s, 1 connection (median over repetitions)",
                f"{_x(_one_ratio(pg))} ({_one_rate(pg, 0):,.0f} / {_one_rate(pg, 1):,.0f})",
            ]
        )
    if pg.one and pg.langgraph_one is not None:
        n = pg.langgraph_steps
        sp_rate = _one_prefix(pg, n)
        info.append(
            [
                f"Saves/s, 1 writer / PostgresSaver steps/s, 1 writer (steps 1-{n})",
                f"{_x(sp_rate / pg.langgraph_one.rate)} ({sp_rate:,.0f} / {pg.langgraph_one.rate:,.1f})",
            ]
        )
    if pg.claims is not None:
        info.append([f"Claims/s, {CLAIMERS} workers (claim + release)", f"{pg.claims.rate:,.0f}"])
    return templating.render("postgres/targets.md.j2", rows=rows, info=info)


def _row(label: str, t: Throughput, digits: int = 0) -> list[str]:
    mean = statistics.fmean(s for run in t.op_seconds for s in run)
    return [
        label,
        str(t.writers),
        f"{t.ops:,}",
        f"{t.seconds:.2f} s",
        f"{t.rate:,.{digits}f}",
        _ms(mean),
        _ms(t.cpu.server / t.ops),
        _ms(t.cpu.clients / t.ops),
        f"{t.cpu.busy / (t.cpu.busy + t.cpu.idle):.0%}" if t.cpu.busy + t.cpu.idle else "—",
        f"{t.wal_bytes / t.ops:,.0f} B",
    ]


def _throughput(pg: PgResults) -> str:
    rows = []
    floors: list[Throughput | None] = [*pg.floor_one] + [None] * (len(pg.one) - len(pg.floor_one))
    for i, ((sp, raw), floor) in enumerate(zip(pg.one, floors, strict=True), 1):
        rows.append(_row(f"safepoint `save`, rep {i}", sp))
        rows.append(_row(f"raw INSERT commit, rep {i}", raw))
        if floor is not None:
            rows.append(_row(f"floor: the save's two rows, one statement, rep {i}", floor))
    if pg.eight is not None:
        rows.append(_row("safepoint `save`", pg.eight[0]))
        rows.append(_row("raw INSERT commit", pg.eight[1]))
    if pg.floor_eight is not None:
        rows.append(_row("floor: the save's two rows, one statement", pg.floor_eight))
    if pg.langgraph_one is not None:
        rows.append(_row(f"PostgresSaver `invoke` ({pg.langgraph_steps} steps)", pg.langgraph_one, 1))
    if pg.langgraph_eight is not None:
        rows.append(
            _row(f"PostgresSaver `invoke` ({pg.langgraph_steps_8} steps each)", pg.langgraph_eight, 1)
        )
    head = [
        "Operation",
        "writers",
        "operations",
        "phase time",
        "per second",
        "mean latency",
        "server CPU / op",
        "client CPU / op",
        "machine busy",
        "WAL / op",
    ]
    ratios = []
    if pg.one and pg.eight is not None:
        ratios.append(
            ["safepoint saves/s / raw commits/s", _x(_one_ratio(pg)), _x(pg.eight[0].rate / pg.eight[1].rate)]
        )
    if pg.one and pg.eight is not None and pg.langgraph_one is not None and pg.langgraph_eight is not None:
        one = _one_prefix(pg, pg.langgraph_steps) / pg.langgraph_one.rate
        eight = pg.eight[0].prefix_rate(pg.langgraph_steps_8) / pg.langgraph_eight.rate
        ratios.append(
            [
                f"safepoint saves/s / PostgresSaver steps/s (steps 1-{pg.langgraph_steps} with 1 writer, "
                f"1-{pg.langgraph_steps_8} with {WRITERS})",
                _x(one),
                _x(eight),
            ]
        )
    if pg.one and pg.eight is not None:
        ratios.append(
            [
                f"{WRITERS} writers / 1 writer, same operation: safepoint / raw",
                "",
                f"{_x(pg.eight[0].rate / _one_rate(pg, 0))} / {_x(pg.eight[1].rate / _one_rate(pg, 1))}",
            ]
        )
    ratio_head = ["Ratio", "1 writer", f"{WRITERS} writers"]
    return templating.render(
        "postgres/throughput.md.j2",
        WRITERS=WRITERS,
        BLOCK=BLOCK,
        head=head,
        rows=rows,
        ratio_head=ratio_head,
        ratios=ratios,
    )


def _step_times(pg: PgResults) -> str:
    if not pg.one:
        return ""
    one, cpu = _one_series(pg), _one_cpu(pg)
    eight = pg.eight[0].op_seconds if pg.eight is not None else None
    lg = pg.langgraph_one.op_seconds if pg.langgraph_one is not None else None
    probes = _probes(pg)
    steps = sorted(set(probes) | ({pg.langgraph_steps} if lg else set()))
    rows = []
    for step in steps:
        span = window(step, pg.steps if step in probes else pg.langgraph_steps)
        row = [f"{step} (steps {span.start}-{span.stop - 1})"]
        if step in probes:
            row += [_ms(window_median(one, step)), _ms(window_mean(one, step)), _ms(window_median(cpu, step))]
            row += [_ms(window_median(eight, step))] if eight is not None else ["—"]
        else:
            row += ["—", "—", "—", "—"]
        if lg is not None:
            row.append(_ms(window_median(lg, step)) if step <= pg.langgraph_steps else "—")
        rows.append(row)
    first, last = probes[0], probes[-1]
    growth = ["growth (last / first)"]
    growth += [
        _x(_growth(one, first, last)[0]),
        _x(_growth(one, first, last)[1]),
        _x(_growth(cpu, first, last)[0]),
    ]
    growth.append(_x(_growth(eight, first, last)[0]) if eight is not None else "—")
    if lg is not None:
        lg_last = pg.langgraph_steps
        growth.append(f"{_x(_growth(lg, first, lg_last)[0])} (step {lg_last} / {first})")
    rows.append(growth)
    head = [
        "Step",
        "1 writer: `save` median",
        "1 writer: mean",
        "1 writer: client CPU median",
        f"{WRITERS} writers: `save` median",
    ]
    if lg is not None:
        head.append("PostgresSaver 1 writer: `invoke` median")
    reps = len(pg.one)
    return templating.render(
        "postgres/step_times.md.j2", WINDOW=WINDOW, reps=reps, WRITERS=WRITERS, head=head, rows=rows
    )


def _claims(pg: PgResults) -> str:
    if pg.claims is None or pg.claim_save is None:
        return ""
    rows = [
        _row("`claim` + `release`", pg.claims),
        _row("`claim` + `load` + `save` + `release(status=done)`", pg.claim_save),
    ]
    claim = [s for run in pg.claims.op_seconds for s in run]
    head = [
        "Per run",
        "workers",
        "runs",
        "phase time",
        "per second",
        "mean latency",
        "server CPU / op",
        "client CPU / op",
        "machine busy",
        "WAL / op",
    ]
    checks = [[k, v] for k, v in pg.facts.items() if k.startswith("claim")]
    return templating.render(
        "postgres/claims.md.j2",
        CLAIMERS=CLAIMERS,
        pg=pg,
        LEASE_SECONDS=LEASE_SECONDS,
        claim=claim,
        head=head,
        rows=rows,
        checks=checks,
    )


def _cpu(pg: PgResults) -> str:
    rows = []
    named: list[tuple[str, Throughput | None]] = []
    if pg.one:
        named += [
            ("safepoint `save`, 1 writer (rep 1)", pg.one[0][0]),
            ("raw commit, 1 connection", pg.one[0][1]),
        ]
    if pg.floor_one:
        named += [("floor (the save's two rows), 1 writer (rep 1)", pg.floor_one[0])]
    if pg.eight is not None:
        named += [(f"safepoint `save`, {WRITERS} writers", pg.eight[0])]
        named += [(f"raw commit, {WRITERS} connections", pg.eight[1])]
    if pg.floor_eight is not None:
        named += [(f"floor (the save's two rows), {WRITERS} writers", pg.floor_eight)]
    named += [(f"PostgresSaver `invoke`, {WRITERS} writers", pg.langgraph_eight)]
    named += [(f"claim + release, {CLAIMERS} workers", pg.claims)]
    for label, t in named:
        if t is None:
            continue
        total = t.cpu.server + t.cpu.clients
        rows.append(
            [
                label,
                _ms(t.cpu.server / t.ops),
                _ms(t.cpu.clients / t.ops),
                f"{t.cpu.server / total:.0%}" if total else "—",
                _ms(t.cpu.busy / t.ops),
                f"{t.cpu.busy / (t.cpu.busy + t.cpu.idle):.0%}" if t.cpu.busy + t.cpu.idle else "—",
            ]
        )
    head = [
        "Operation",
        "server CPU / op",
        "client CPU / op",
        "server share",
        "machine CPU / op",
        "machine busy",
    ]
    return templating.render(
        "postgres/cpu.md.j2", WRITERS=WRITERS, cores=os.cpu_count(), head=head, rows=rows
    )


def _settings(pg: PgResults) -> str:
    rows = [[f"`{k}`", v] for k, v in pg.settings.items()]
    rows += [[k, v] for k, v in pg.facts.items() if not k.startswith("claim")]
    return templating.render("postgres/settings.md.j2", rows=rows)


def _method(pg: PgResults) -> str:
    return templating.render(
        "postgres/method.md.j2",
        pg=pg,
        MESSAGE_BYTES=MESSAGE_BYTES,
        TOOL_EVERY=TOOL_EVERY,
        TOOL_OUTPUT_BYTES=TOOL_OUTPUT_BYTES,
        ROW_BYTES=ROW_BYTES,
        WRITERS=WRITERS,
    )
