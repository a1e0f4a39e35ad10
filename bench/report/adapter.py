"""The LangGraph adapter section of docs/benchmarks.md (issue 8): SafepointSaver against
SqliteSaver (and PostgresSaver, when the PostgreSQL section ran it)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from common import WINDOW, StoreRun, window, window_median
from sections.langgraph_sqlite import BLOCK, FLOOR
from sections.postgres import AdapterRun, PgResults

from report import templating
from report.fmt import TIMES, Target, ms, size, targets_table, x

ANCHOR = "langgraph-adapter-issue-8"
TARGET_BYTES = 50.0  # SqliteSaver bytes / SafepointSaver bytes after 1,000 turns
TARGET_FLAT = 1.1  # per-turn latency, last turn / turn 10
SAVER_CALLS = ("get_tuple", "put", "put_writes")


def _series(run: StoreRun, key: str | None) -> list[float]:
    return run.step_seconds if key is None else run.extra_seconds[key]


def _saver_series(run: StoreRun, cpu: bool = False, prefix: str = "") -> list[float]:
    """Per turn, the time spent inside the saver: get_tuple + put + put_writes, wall or thread CPU."""
    keys = [prefix + (f"{k} cpu" if cpu else k) for k in SAVER_CALLS]
    return [sum(parts) for parts in zip(*(run.extra_seconds[k] for k in keys), strict=True)]


def _added_series(ours: StoreRun) -> list[float]:
    """Per turn, SafepointSaver's invoke minus the floor's (the same turn, run in the same block)."""
    return [a - b for a, b in zip(ours.step_seconds, ours.extra_seconds[FLOOR + "invoke"], strict=True)]


def _ratio(series: list[float], first: int, last: int) -> float:
    return _pooled_ratio([series], first, last)


def _pooled_ratio(series: list[list[float]], first: int, last: int) -> float:
    """Growth from turn ``first`` to ``last``, each window's values pooled over repetitions."""
    return window_median(series, last) / window_median(series, first)


def _growth(run: StoreRun | AdapterRun, first: int, last: int, key: str | None = None) -> float:
    if isinstance(run, AdapterRun):
        return _ratio(run.seconds, first, last)
    return _ratio(_series(run, key), first, last)


def _bases(probes: tuple[int, ...]) -> list[int]:
    """The turns growth is measured from: the first probe (the targets' turn 10), and the one
    before the last — turn 10's window still holds a fresh database's first, slower commits."""
    return sorted({probes[0], probes[-2] if len(probes) > 2 else probes[0]})


def has_floor(run: StoreRun) -> bool:
    return FLOOR + "invoke" in run.extra_seconds


def targets(runs: list[StoreRun], theirs: StoreRun, probes: tuple[int, ...]) -> list[Target]:
    """The issue's two measures: bytes, and flat per-turn latency.

    A LangGraph turn's latency grows with the conversation whatever the
    checkpointer (the floor's ``invoke`` shows LangGraph's own growth), so
    "flat" is judged on what the saver controls: the latency it adds to a
    turn (its ``invoke`` minus the floor's). It must hold from every base
    turn (``_bases``), so a slow first window cannot pass it alone. Without a
    floor (an older run), the whole ``invoke`` is judged instead. ``runs``
    are SafepointSaver's repetitions; each window pools their turns.
    """
    ours = runs[0]
    last = probes[-1]
    bases = _bases(probes)
    ratio = theirs.probe_bytes[last] / ours.probe_bytes[last]
    out = [
        Target(
            "#8",
            f"Bytes stored after {last:,} turns: SqliteSaver / SafepointSaver",
            f"{x(ratio)} ({size(theirs.probe_bytes[last])} / {size(ours.probe_bytes[last])})",
            f"≥ {TARGET_BYTES:g}{TIMES}",
            ratio >= TARGET_BYTES,
            ANCHOR,
        )
    ]
    if has_floor(ours):
        series = [_added_series(run) for run in runs]
        at = ", ".join(f"turn {t:,}: {ms(window_median(series, t))}" for t in (*bases, last))
        name = "Per-turn latency SafepointSaver adds (its `invoke` - the floor's)"
    else:
        at, name = "", "Whole `invoke` per turn with SafepointSaver"
        series = [run.step_seconds for run in runs]
    if len(runs) > 1:
        name += f", {len(runs)} repetitions pooled"
    ratios = [_pooled_ratio(series, base, last) for base in bases]
    measured = ", ".join(f"{x(r)} (/ {base:,})" for r, base in zip(ratios, bases, strict=True))
    out.append(
        Target(
            "#8",
            f"{name}, turn {last:,} / {' and / '.join(f'{b:,}' for b in bases)}",
            f"{measured}{'; ' + at if at else ''}",
            f"≤ {TARGET_FLAT}{TIMES}",
            max(ratios) <= TARGET_FLAT,
            ANCHOR,
        )
    )
    return out


def _context(runs: list[StoreRun], theirs: StoreRun, probes: tuple[int, ...]) -> str:
    """Growth rows that explain the latency target, with no target of their own (pooled like it)."""
    ours = runs[0]
    last = probes[-1]
    bases = _bases(probes)

    def growth(pick: Callable[[StoreRun], list[float]]) -> str:
        series = [pick(run) for run in runs]
        return ", ".join(f"{x(_pooled_ratio(series, base, last))} (/ {base:,})" for base in bases)

    first = bases[0]
    rows = [
        [
            "Whole `invoke` per turn, SafepointSaver",
            growth(lambda run: run.step_seconds),
            f"SqliteSaver: {x(_growth(theirs, first, last))} (/ {first})",
        ]
    ]
    if has_floor(ours):
        rows.append(
            [
                "Whole `invoke` per turn, the floor (LangGraph's own work)",
                growth(lambda run: run.extra_seconds[FLOOR + "invoke"]),
                "every checkpointer pays this growth",
            ]
        )
    rows += [
        [
            "Time inside SafepointSaver per turn, CPU of its calls (thread CPU time)",
            growth(lambda run: _saver_series(run, cpu=True)),
            f"SqliteSaver: {x(_ratio(_saver_series(theirs, cpu=True), first, last))} (/ {first})",
        ],
        [
            "Time inside SafepointSaver per turn, wall (get_tuple + put + put_writes)",
            growth(_saver_series),
            f"SqliteSaver: {x(_ratio(_saver_series(theirs), first, last))} (/ {first}); "
            "includes waiting for the GIL behind the graph's growing work",
        ],
    ]
    head = ["Measure", f"Growth to turn {last:,}", "Beside it"]
    return templating.render("adapter/context.md.j2", last=last, head=head, rows=rows)


def render(
    runs: list[StoreRun],
    theirs: StoreRun,
    probes: tuple[int, ...],
    content_at: dict[int, int],
    pg: PgResults | None,
) -> str:
    """``runs``: SafepointSaver's repetitions; the targets pool them, the detail tables show the first."""
    ours = runs[0]
    parts = [
        _intro(ours, theirs, probes),
        _repetitions(len(runs)),
        targets_table(targets(runs, theirs, probes)),
        _context(runs, theirs, probes),
        _bytes(ours, theirs, probes, content_at),
        _latency(ours, theirs, probes),
        _loads(ours, theirs, probes),
        _settings(ours, theirs),
    ]
    if pg is not None and pg.skipped is None and pg.adapter:
        parts.append(_postgres(pg))
    return "\n\n".join(p.strip("\n") for p in parts)


def _repetitions(count: int) -> str:
    if count == 1:
        return ""
    return (
        f"SafepointSaver and the floor ran {count} times (a fresh database each time); the "
        "latency target and the context rows pool the turns of every repetition in each window, "
        "as the SQLite section pools its repetitions; the detail tables below show the first."
    )


def _intro(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> str:
    return templating.render("adapter/intro.md.j2", ours=ours, BLOCK=BLOCK)


def _bytes(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...], content_at: dict[int, int]) -> str:
    rows = []
    for turn in probes:
        a, b, content = ours.probe_bytes[turn], theirs.probe_bytes[turn], content_at.get(turn, 0)
        rows.append(
            [f"{turn:,}", size(content), size(a), size(b), x(b / a), x(a / content) if content else "—"]
        )
    a, b = ours.disk.total, theirs.disk.total
    rows.append(["files after the last turn, saver closed", "", size(a), size(b), x(b / a), ""])
    last, before = probes[-1], probes[-2] if len(probes) > 1 else probes[0]
    turns = max(1, last - before)

    def per_turn(counts: dict[int, int]) -> str:
        return f"{(counts.get(last, 0) - counts.get(before, 0)) / turns:,.0f} B"

    rows.append(
        [
            f"per turn, turns {before + 1:,}-{last:,}",
            per_turn(content_at),
            per_turn(ours.probe_bytes),
            per_turn(theirs.probe_bytes),
            "",
            "",
        ]
    )
    head = [
        "After turn",
        "content (JSON of the messages)",
        "SafepointSaver",
        "SqliteSaver",
        "SqliteSaver / SafepointSaver",
        "SafepointSaver / content",
    ]
    return templating.render("adapter/bytes.md.j2", head=head, rows=rows)


def _latency(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> str:
    last = probes[-1]
    floor = has_floor(ours)
    invoke_rows = []
    for turn in probes:
        steps = window(turn, ours.steps)
        row = [f"{turn:,} (turns {steps.start}-{steps.stop - 1})"]
        row += [
            ms(window_median([ours.step_seconds], turn)),
            ms(window_median([ours.extra_seconds["invoke cpu"]], turn)),
        ]
        if floor:
            row += [
                ms(window_median([ours.extra_seconds[FLOOR + "invoke"]], turn)),
                ms(window_median([ours.extra_seconds[FLOOR + "invoke cpu"]], turn)),
                ms(window_median([_added_series(ours)], turn)),
            ]
        row += [
            ms(window_median([theirs.step_seconds], turn)),
            ms(window_median([theirs.extra_seconds["invoke cpu"]], turn)),
        ]
        invoke_rows.append(row)
    for base in _bases(probes):
        growth = [
            f"growth ({last:,} / {base:,})",
            x(_growth(ours, base, last)),
            x(_growth(ours, base, last, "invoke cpu")),
        ]
        if floor:
            growth += [
                x(_growth(ours, base, last, FLOOR + "invoke")),
                x(_growth(ours, base, last, FLOOR + "invoke cpu")),
                x(_ratio(_added_series(ours), base, last)),
            ]
        growth += [x(_growth(theirs, base, last)), x(_growth(theirs, base, last, "invoke cpu"))]
        invoke_rows.append(growth)
    invoke_head = ["Turn", "SafepointSaver `invoke`", "its thread's CPU"]
    if floor:
        invoke_head += ["floor `invoke`", "its thread's CPU", "added by SafepointSaver (`invoke` - floor's)"]
    invoke_head += ["SqliteSaver `invoke`", "its thread's CPU"]

    saver_rows = []
    for turn in probes:
        row = [f"{turn:,}"]
        for run in (ours, theirs):
            for key in SAVER_CALLS:
                wall = window_median([run.extra_seconds[key]], turn)
                cpu = window_median([run.extra_seconds[f"{key} cpu"]], turn)
                row.append(f"{ms(wall)} / {ms(cpu)}")
            row.append(
                f"{ms(window_median([_saver_series(run)], turn))} / "
                f"{ms(window_median([_saver_series(run, cpu=True)], turn))}"
            )
        saver_rows.append(row)
    for base in _bases(probes):
        growth = [f"growth ({last:,} / {base:,})"]
        for run in (ours, theirs):
            for key in SAVER_CALLS:
                growth.append(
                    f"{x(_growth(run, base, last, key))} / {x(_growth(run, base, last, f'{key} cpu'))}"
                )
            wall = _ratio(_saver_series(run), base, last)
            growth.append(f"{x(wall)} / {x(_ratio(_saver_series(run, cpu=True), base, last))}")
        saver_rows.append(growth)
    saver_head = ["Turn"]
    for name in ("SafepointSaver", "SqliteSaver"):
        saver_head += [f"{name} `get_tuple`", "`put` (summed)", "`put_writes` (summed)", "all three"]
    puts = ours.facts.get("checkpoint puts per step", "?")
    writes = ours.facts.get("put_writes calls per step", "?")
    return templating.render(
        "adapter/latency.md.j2",
        WINDOW=WINDOW,
        invoke_head=invoke_head,
        invoke_rows=invoke_rows,
        puts=puts,
        writes=writes,
        saver_head=saver_head,
        saver_rows=saver_rows,
    )


def _loads(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> str:
    methods = [(run, m) for run in (ours, theirs) for m in run.loads]
    rows = []
    for turn in probes:
        row = [f"{turn:,}"]
        for run, method in methods:
            probe = next(p for p in run.loads[method] if p.step == turn)
            row.append(f"{ms(probe.median)} · {probe.statements} stmts ({probe.selects} SELECT)")
        rows.append(row)
    head = ["After turn", *(f"{run.name}: `{m}`" for run, m in methods)]
    return templating.render("adapter/loads.md.j2", head=head, rows=rows)


def _settings(ours: StoreRun, theirs: StoreRun) -> str:
    rows = [[f"{run.name}: {k}", v] for run in (ours, theirs) for k, v in run.facts.items()]
    return templating.render("adapter/settings.md.j2", rows=rows)


def _postgres(pg: PgResults) -> str:
    ours, theirs = pg.adapter["safepoint"], pg.adapter["postgres"]
    turns = sorted(set(ours.probe_bytes) | set(theirs.probe_bytes))
    rows = []
    for turn in turns:
        row = [f"{turn:,}"]
        for run in (ours, theirs):
            if turn in run.probe_bytes:
                row += [
                    size(run.probe_bytes[turn]),
                    ms(window_median([run.seconds], turn)),
                    ms(statistics.median(run.get_state[turn])),
                ]
            else:
                row += ["—", "—", "—"]
        if turn in ours.probe_bytes and turn in theirs.probe_bytes:
            row.append(x(theirs.probe_bytes[turn] / ours.probe_bytes[turn]))
        else:
            row.append("—")
        rows.append(row)
    growth = ["growth (last / turn 10)"]
    for run in (ours, theirs):
        last = max(run.probe_bytes)
        growth += ["", x(_growth(run, 10, last)) if last > 10 else "—", ""]
    growth.append("")
    rows.append(growth)
    head = [
        "After turn",
        "SafepointSaver: bytes",
        "`invoke` (window median)",
        "`get_state`",
        "PostgresSaver: bytes",
        "`invoke` (window median)",
        "`get_state`",
        "PostgresSaver / SafepointSaver bytes",
    ]
    return templating.render("adapter/postgres.md.j2", ours=ours, theirs=theirs, head=head, rows=rows)
