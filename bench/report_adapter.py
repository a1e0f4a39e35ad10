"""The LangGraph adapter section of docs/benchmarks.md (issue 8): SafepointSaver against
SqliteSaver (and PostgresSaver, when the PostgreSQL section ran it)."""

from __future__ import annotations

import statistics

from common import WINDOW, StoreRun, window, window_median
from fmt import TIMES, Target, ms, size, table, targets_table, x
from postgres_section import AdapterRun, PgResults

ANCHOR = "langgraph-adapter-issue-8"
TARGET_BYTES = 50.0  # SqliteSaver bytes / SafepointSaver bytes after 1,000 turns
TARGET_FLAT = 1.1  # per-turn latency, last turn / turn 10
SAVER_CALLS = ("get_tuple", "put", "put_writes")


def _growth(run: StoreRun | AdapterRun, first: int, last: int, key: str | None = None) -> float:
    series = [run.seconds if isinstance(run, AdapterRun) else run.step_seconds]
    if key is not None and isinstance(run, StoreRun):
        series = [run.extra_seconds[key]]
    return window_median(series, last) / window_median(series, first)


def _saver_growth(run: StoreRun, first: int, last: int) -> float:
    """Growth of the time a turn spends inside the saver (get_tuple + put + put_writes, summed)."""
    per_turn = [sum(parts) for parts in zip(*(run.extra_seconds[k] for k in SAVER_CALLS), strict=True)]
    return window_median([per_turn], last) / window_median([per_turn], first)


def targets(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> list[Target]:
    first, last = probes[0], probes[-1]
    ratio = theirs.probe_bytes[last] / ours.probe_bytes[last]
    growth = _growth(ours, first, last)
    saver = _saver_growth(ours, first, last)
    return [
        Target(
            "#8",
            f"Bytes stored after {last:,} turns: SqliteSaver / SafepointSaver",
            f"{x(ratio)} ({size(theirs.probe_bytes[last])} / {size(ours.probe_bytes[last])})",
            f"≥ {TARGET_BYTES:g}{TIMES}",
            ratio >= TARGET_BYTES,
            ANCHOR,
        ),
        Target(
            "#8",
            f"Time per turn inside SafepointSaver (get_tuple + put + put_writes), turn {last:,} / {first}",
            f"{x(saver)} (SqliteSaver: {x(_saver_growth(theirs, first, last))})",
            f"≤ {TARGET_FLAT}{TIMES}",
            saver <= TARGET_FLAT,
            ANCHOR,
        ),
        Target(
            "#8",
            f"Whole `invoke` per turn with SafepointSaver, turn {last:,} / {first} (includes LangGraph's "
            "own work on the growing message list, ~1.8x with a checkpointer that does nothing)",
            f"{x(growth)} (SqliteSaver: {x(_growth(theirs, first, last))})",
            f"≤ {TARGET_FLAT}{TIMES}",
            growth <= TARGET_FLAT,
            ANCHOR,
        ),
    ]


def render(
    ours: StoreRun,
    theirs: StoreRun,
    probes: tuple[int, ...],
    content_at: dict[int, int],
    pg: PgResults | None,
) -> str:
    parts = [
        _intro(ours, theirs, probes),
        targets_table(targets(ours, theirs, probes)),
        _bytes(ours, theirs, probes, content_at),
        _latency(ours, theirs, probes),
        _loads(ours, theirs, probes),
        _settings(ours, theirs),
    ]
    if pg is not None and pg.skipped is None and pg.adapter:
        parts.append(_postgres(pg))
    return "\n\n".join(p.strip("\n") for p in parts)


def _intro(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> str:
    return f"""
## LangGraph adapter (issue 8)

The SQLite section's simulated agent as a real compiled LangGraph graph
(`bench/lg_graph.py`: `StateGraph` with `messages: Annotated[list,
add_messages]` plus counters, cursor and state; one node calling an offline
fake chat model, LangChain's `GenericFakeChatModel`, which answers with the
step's ~500-byte reply), {ours.steps:,} turns of `graph.invoke` on one thread at the
default durability, once with LangGraph's `SqliteSaver` (the run of the
SQLite section above) and once with safepoint's `SafepointSaver` over
`safepoint.open_store("sqlite:///…")` at its defaults (scrubbing on, blob
offload on; the 50 KB outputs stay under the 64 KiB threshold). "Bytes
stored" after turn N is read through a separate read-only connection: the
database's pages in use (WAL content included, free pages left out) plus any
blob files. The savers' `get_tuple`, `put` and `put_writes` are timed too
(`lg_graph.Timed`); `put`/`put_writes` run on LangGraph's background thread,
overlapping the rest of `invoke`.
"""


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
    return f"""
### Bytes stored

{table(head, rows)}
"""


def _latency(ours: StoreRun, theirs: StoreRun, probes: tuple[int, ...]) -> str:
    rows = []
    total = ours.steps
    for turn in probes:
        steps = window(turn, total)
        row = [f"{turn:,} (turns {steps.start}-{steps.stop - 1})"]
        for run in (ours, theirs):
            row.append(ms(window_median([run.step_seconds], turn)))
            row += [ms(window_median([run.extra_seconds[k]], turn)) for k in SAVER_CALLS]
        rows.append(row)
    first, last = probes[0], probes[-1]
    growth = ["growth (last / first)"]
    for run in (ours, theirs):
        growth.append(x(_growth(run, first, last)))
        growth += [x(_growth(run, first, last, k)) for k in SAVER_CALLS]
    rows.append(growth)
    head = ["Turn"]
    for name in ("SafepointSaver", "SqliteSaver"):
        head += [f"{name} `invoke`", "`get_tuple`", "`put` (summed)", "`put_writes` (summed)"]
    puts = ours.facts.get("checkpoint puts per step", "?")
    writes = ours.facts.get("put_writes calls per step", "?")
    return f"""
### Time per turn

Medians over the {WINDOW} turns around the turn named, of one `invoke` and
of the time the turn spent in each saver method ({puts} `put` and {writes}
`put_writes` calls per turn, summed; `get_tuple` is the load at the start of
`invoke`).

{table(head, rows)}
"""


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
    return f"""
### `get_state` and `get_tuple`

Median of 7 timed calls right after the turn (warm cache, the saver the graph
uses), and the SQL statements one call issued (SQLite's trace callback,
BEGIN/COMMIT included; for SafepointSaver, counted on a second store opened
on the same file with `trace=`).

{table(head, rows)}
"""


def _settings(ours: StoreRun, theirs: StoreRun) -> str:
    rows = [[f"{run.name}: {k}", v] for run in (ours, theirs) for k, v in run.facts.items()]
    return f"""
### Settings as measured

{table(["Setting", "Value"], rows)}
"""


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
    return f"""
### On PostgreSQL

The same graph and turns in the PostgreSQL section's server: `SafepointSaver`
over `safepoint.open_store(url, schema=…)` for {len(ours.seconds):,} turns and
`PostgresSaver` (LangGraph's defaults, `setup()` once) for {len(theirs.seconds):,}
turns — its cost grows with the conversation (every checkpoint writes the
whole message list again), so it runs the same shorter run as the PostgreSQL
section's throughput comparison. Both in one client process, alternating
blocks of 50 turns. Bytes: `pg_total_relation_size` (heap, TOAST, indexes)
of every table in the saver's schema right after the turn; `get_state`:
median of 7 calls.

{table(head, rows)}
"""
