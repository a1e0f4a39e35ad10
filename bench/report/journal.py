"""The call journal's section (issue 32): per recorded call, bytes per call, the LangGraph turn."""

from __future__ import annotations

from datetime import UTC, datetime

from sections.journal import BYTES_AT, CALLS, Backend, Result
from sections.journal_calls import COUNT_CALLS, IR_CALLS, TOOL_BYTES
from sections.journal_turn import EARLY, LATE, WARM_TURNS

from report import journal_before
from report.fmt import TIMES, table, verdict

LOAD = "Load average (1, 5, 15 min) at the start"
TARGET_MS = 1.0  # issue 32: at most 1 ms wall per recorded call on SQLite
RECORDED = ("tool", "model", "model_intent", "model_flow")  # the target's rows
ROWS = (*RECORDED, "model_unscrubbed", "read_tool", "read_model", "save", "floor")


def render(result: Result, *, command: str) -> str:
    d = result.described
    lite = result.backends[0]
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "## The call journal: what a recorded call costs (issue 32)",
        "",
        f"`{command}` (`bench/sections/journal.py`), run alone on {date} in {result.seconds:.0f} s: "
        f"{d['CPU']}, {d['Cores']} cores, {d['RAM']}, {d['Filesystem (bench files)']}, {d['OS']}, "
        f"Python {d['Python']}, SQLite {d['SQLite']}; {d['Packages']}; safepoint measured: "
        f"{d['safepoint measured']}. Load average (1, 5, 15 min) at the start {d[LOAD]}, "
        f"at the end {result.load_end}: the machine's 2 cores were shared with other work, which moves "
        "wall times (the floor beside each row moved with them); instructions do not move.",
        "",
        _method(),
        "",
        table(["Measure", "Measured", "Target", "Result"], _targets(lite)),
        "",
    ]
    for backend in result.backends:
        parts += _backend(backend, result.labels)
    parts += journal_before.render(lite, result.labels)
    parts += _why(lite)
    parts += _why_postgres(result.backends[1] if len(result.backends) > 1 else None)
    parts += _bytes(result.backends)
    parts += _turn(result)
    return "\n".join(parts) + "\n"


def _method() -> str:
    return (
        f"Each row is one recorded call written as an integration writes it, {CALLS:,} calls of each "
        "after 100 untimed ones, in blocks of 50 whose order rotates, on a run of its own in one store, "
        "beside the floor (a bare `sqlite3` `BEGIN IMMEDIATE` + `INSERT` of a 2 KB row + `COMMIT` on its "
        "own file, WAL and `synchronous=FULL`: one fsync; on PostgreSQL an autocommit `INSERT` of a 2 KB "
        "row through psycopg) and a plain `store.save`, for scale. Wall is `time.perf_counter` around the "
        "whole recorded call (every store call it makes), CPU `time.process_time`; both the median of "
        f"{CALLS:,}. The payloads are seeded: a tool result whose JSON is {TOOL_BYTES:,} B (a "
        "ToolMessage-shaped dict) with ~100 B of arguments as its request, and a model response of "
        "4,096 B (an AIMessage-shaped dict with a tool call, usage and metadata) whose request is "
        "~2 KB of messages (the journal keeps a request only as its digest). Instructions: callgrind, "
        f"collection switched on just before {IR_CALLS} calls of a way (after 10) and off after them, "
        "less an empty loop's, in a process of their own (on PostgreSQL: the client's only; SHA-256 "
        "counts at OpenSSL's portable speed there, ~28 instructions a byte, as valgrind hides the CPU's "
        "SHA extensions). "
        f"Queries, statements, transactions, fsyncs and bytes written: {COUNT_CALLS} calls of each way "
        "in another process, statements by SQLite's trace callback, fsyncs (`fsync` + `fdatasync`) and "
        "bytes written (`pwrite64`: WAL frames, and the WAL checkpoints' copies into the database file) "
        "by `strace` between marks around the calls. SQLite: the store's defaults (WAL, `synchronous=FULL`, "
        "group commit on, scrubbing on, blobs to files above 16 KiB); PostgreSQL: the server below, a "
        "schema of its own, dropped after."
    )


def _targets(lite: Backend) -> list[list[str]]:
    rows = []
    for name in RECORDED:
        series = lite.series.get(name)
        if series is None:
            continue
        wall = series.ms()
        rows.append(
            [
                f"SQLite wall per recorded call, {_short(name)} (median)",
                f"{wall:.3f} ms",
                f"≤ {TARGET_MS:g} ms",
                verdict(wall <= TARGET_MS),
            ]
        )
    return rows


def _short(name: str) -> str:
    return {
        "tool": "2 KB tool result, intent + record",
        "model": "4 KB model response, record alone",
        "model_intent": "4 KB model response, intent + record",
        "model_flow": "4 KB model response, the `model_call` flow",
    }[name]


def _backend(backend: Backend, labels: dict[str, str]) -> list[str]:
    out = [f"### Per recorded call: {backend.name}", ""]
    if backend.skipped:
        return [*out, f"Not measured: {backend.skipped}.", ""]
    out += ["Settings: " + "; ".join(f"{k} {v}" for k, v in backend.settings.items()) + ".", ""]
    floor = backend.series.get("floor")
    rows = []
    for name in ROWS:
        series = backend.series.get(name)
        if series is None:
            continue
        counts = backend.counts.get(name, {})
        ir = backend.ir.get(name) if isinstance(backend.ir, dict) else None
        rows.append(
            [
                labels[name],
                f"{series.ms():.3f} ms",
                f"{series.ms('cpu'):.3f} ms",
                "—" if ir is None else f"{ir:,.0f}",
                "—" if floor is None else f"{series.ms() / floor.ms():.2f}{TIMES}",
                _count(counts, "commits"),
                _count(counts, "fsyncs"),
                "—" if counts.get("written") is None else f"{counts['written']:,.0f} B",
                _queries(counts),
            ]
        )
    head = [
        "Recorded call",
        "wall",
        "CPU",
        "instructions",
        "wall / floor",
        "transactions",
        "fsyncs",
        "bytes written",
        "statements (named queries)",
    ]
    out += [table(head, rows), ""]
    if isinstance(backend.ir, str):
        out += [f"Instructions not counted: {backend.ir}.", ""]
    return out


def _count(counts: dict[str, object], key: str) -> str:
    value = counts.get(key)
    return "—" if not isinstance(value, float | int) else f"{value:.2f}".rstrip("0").rstrip(".")


def _queries(counts: dict[str, object]) -> str:
    queries, statements = counts.get("queries"), counts.get("statements")
    if queries is None:
        return "—"
    named = f"{queries:g}: {', '.join(counts.get('names', []))}" if queries else "0"  # type: ignore[arg-type]
    return named if statements is None else f"{statements:g} ({named})"


def _why(lite: Backend) -> list[str]:
    """What the SQLite numbers say about the 1 ms target, from this run's own counts."""
    s, c = lite.series, lite.counts
    if not {"tool", "model", "floor", "model_unscrubbed"} <= s.keys() or "tool" not in c:
        return []
    floor, tool, model, bare = s["floor"], s["tool"], s["model"], s["model_unscrubbed"]
    written = c["tool"].get("written")
    floor_written = c.get("floor", {}).get("written")
    lines = [
        "### Where a recorded call's time goes (SQLite)",
        "",
        "- **Statements.** A journal write is `BEGIN IMMEDIATE`, `call_run` (the run's row: its head "
        "step and its lease, checked as a save checks it), the put (`call_intent`, or `call_done`, which "
        "gives back the entry as it now stands: an intent's step, writer and times) and `COMMIT`. A write "
        "that stored its entry builds what it returns from what it wrote; it reads the entry "
        "(`call_get`) only when the put finds the key taken, so a second writer still learns the first "
        "result, and a record whose intent was written at an earlier step puts again at that step.",
        f"- **Durable commits.** Intent + record is two transactions, each its own durable commit "
        f"({_count(c['tool'], 'fsyncs')} fsyncs per call, WAL checkpoints included, against the floor's "
        f"{_count(c.get('floor', {}), 'fsyncs')}): its floor is two bare commits, {2 * floor.ms():.3f} ms "
        "in this run. That is inherent for a non-idempotent tool: its intent must be durable before its "
        "effect. A model response recorded alone, and an idempotent tool's result, is one commit. The "
        "`model_call` flow writes an intent before it sends the request, so that a crash mid-request "
        "counts the request as re-sent (`Tally.resent`, the lost-spend estimate): two commits. That "
        "intent needs no fsync of its own (nothing but the count depends on it; the record's commit "
        "makes it durable with it, and a SIGKILL loses no WAL frame already written), but a commit "
        "without an fsync is the driver's to offer (SQLite: `synchronous=NORMAL` around that one "
        "transaction, which SQLite refuses to change inside it; PostgreSQL: `SET LOCAL "
        "synchronous_commit = off`), not yet done.",
    ]
    if written is not None and floor_written:
        lines.append(
            f"- **Pages written.** A 2 KB tool result's intent + record writes {written:,.0f} B to disk "
            f"(WAL frames and their checkpoint copies), a 4 KB record alone "
            f"{c['model'].get('written', 0):,.0f} B, "
            f"the floor's 2 KB row {floor_written:,.0f} B. `safepoint_calls` is a `WITHOUT ROWID` table: "
            "its rows live in an index b-tree, which keeps at most ~1 KB of a row on its leaf page on "
            "4 KiB pages and puts the rest of a 2 KB result in an overflow page of its own (the bytes "
            "table below), and the record rewrites the row the intent wrote."
        )
    ir = lite.ir if isinstance(lite.ir, dict) else {}
    lines += [
        f"- **CPU.** A 4 KB record alone uses {model.ms('cpu'):.3f} ms of CPU "
        f"({bare.ms('cpu'):.3f} ms with `scrubber=False`: scrubbing the result is "
        f"{model.ms('cpu') - bare.ms('cpu'):.3f} ms of it; the model response's `*_tokens` keys wake the "
        "token rule's prefilter, so its strings are walked); a 2 KB intent + record "
        f"{tool.ms('cpu'):.3f} ms, against {floor.ms('cpu'):.3f} ms for the floor's commit (most of "
        "which is the kernel's: the fsync and the writes). "
        + (
            ""
            if "model" not in ir or "floor" not in ir
            else f"In instructions a 4 KB record is {ir['model']:,.0f} and the floor's commit "
            f"{ir['floor']:,.0f}; SHA-256 over the stored result and the request counts ~28 instructions "
            "a byte under valgrind, which hides the CPU's SHA extensions (a few microseconds a call on "
            "the CPU itself). "
        )
        + "What is left on the client is the scrubber (its look and, for the model response, its walk), "
        "the result encoded and digested once, and each statement's binding and stepping.",
        "",
    ]
    return lines


def _why_postgres(pg: Backend | None) -> list[str]:
    """Round trips: what decides a journal write's wall time on PostgreSQL."""
    if pg is None or pg.skipped or not {"tool", "save", "floor"} <= pg.series.keys():
        return []
    s, c = pg.series, pg.counts
    queries = c.get("tool", {}).get("queries")
    if queries is None:
        return []
    return [
        "On PostgreSQL a journal write is a transaction whose statements go in one pipeline, and the "
        "write waits for each named query whose rows it reads — `call_run` (`FOR SHARE`: no claim or "
        "save moves the lease before it commits) and the put's `RETURNING` — and for its COMMIT: "
        f"intent + record of a 2 KB tool result makes {queries:g} named queries in two transactions, "
        f"{s['tool'].ms():.3f} ms wall and {s['tool'].ms('cpu'):.3f} ms of client CPU, where a `store.save` "
        f"is one statement (`save_next`, one round trip: {s['save'].ms():.3f} ms) and the floor's INSERT "
        f"{s['floor'].ms():.3f} ms. The lease check and the put stay two statements: on an encrypted "
        "store the result is sealed for its step, which the op learns from `call_run` before the put.",
        "",
    ]


def _bytes(backends: list[Backend]) -> list[str]:
    out = [
        "### Journal bytes per call",
        "",
        f"A fresh store records 2 KB tool results (intent + record, keys as above), "
        f"{', '.join(f'{n:,}' for n in BYTES_AT)} of them; after each count, the journal's pages: on SQLite "
        "its table and index (`dbstat`: pages in use, overflow pages among them) and the blob folder; "
        "on PostgreSQL `pg_total_relation_size` (heap, TOAST and indexes; no VACUUM between, so the intents "
        "the records replaced may still hold space). Linear: the bytes a call adds stay the same as the "
        "journal grows.",
        "",
    ]
    rows = []
    for backend in backends:
        sizes = backend.sizes
        if not sizes:
            continue
        marks = sorted(sizes)
        for n in marks:
            part = sizes[n]
            total = part["table"] + part["index"] + part["blobs"]
            rows.append(
                [
                    backend.name,
                    f"{n:,}",
                    f"{part['table']:,}",
                    f"{part['index']:,}",
                    f"{part['overflow']:,}" if "overflow" in part else "—",
                    f"{part['blobs']:,}",
                    f"{total:,}",
                    f"{total / n:,.0f}",
                ]
            )
        first, mid, last = (_total(sizes[n]) for n in marks)
        early = (mid - first) / (marks[1] - marks[0])
        late = (last - mid) / (marks[2] - marks[1])
        out.append(
            f"{backend.name}: {early:,.0f} B a call between {marks[0]:,} and {marks[1]:,} calls, "
            f"{late:,.0f} B between {marks[1]:,} and {marks[2]:,} "
            f"({late / early:.2f}{TIMES}; 1.00{TIMES} is linear), "
            f"for {TOOL_BYTES:,} B of result JSON a call."
        )
    head = ["Store", "calls", "table B", "index B", "overflow pages B", "blobs B", "total B", "B per call"]
    return [*out, "", table(head, rows), ""]


def _total(part: dict[str, int]) -> int:
    return part["table"] + part["index"] + part["blobs"]


def _turn(result: Result) -> list[str]:
    turn = result.turn
    out = ["### A whole LangGraph turn, with and without the journal (SQLite)", ""]
    if turn.skipped:
        return [*out, f"Not measured in this run: {turn.skipped}.", ""]
    without, with_ = turn.median_ms("without"), turn.median_ms("with")
    names = {
        "without": "`SafepointSaver(store)`",
        "with": "`SafepointSaver(store, journal=True)`, tools through " + turn.tools,
    }
    rows = [
        [
            label,
            f"{turn.median_ms(name):.3f} ms",
            f"{turn.median_ms(name, 'cpu'):.3f} ms",
            f"{turn.median_ms(name, 'cpu', EARLY):.3f} ms",
            f"{turn.median_ms(name, 'cpu', LATE):.3f} ms",
            "—" if name == "without" else f"{turn.entries_per_turn:.1f}",
        ]
        for name, label in names.items()
    ]
    early, late = (
        turn.median_ms("with", "cpu", part) - turn.median_ms("without", "cpu", part) for part in (EARLY, LATE)
    )
    head = [
        "Graph",
        "wall per turn",
        "CPU per turn",
        "CPU, first 10 turns",
        "CPU, last 10 turns",
        "entries per turn",
    ]
    out += [
        f"One turn: a user message, the model asking for two tools (a ~500 B reply), both tools run by "
        f"the ToolNode (~2 KB results each; `lookup` idempotent, `charge` marked `non_idempotent`), the "
        f"model's ~4 KB answer; one `invoke` at LangGraph's default durability, the two graphs taking "
        f"turns on files of their own, one thread each, {turn.turns} turns each after {WARM_TURNS} "
        "(`bench/sections/journal_turn.py`). Medians per turn (of all turns, and of the first and last "
        "ten); CPU counts every thread.",
        "",
        table(head, rows),
        "",
        f"The journal adds {with_ - without:.3f} ms wall a turn ({with_ / without:.2f}{TIMES}) and "
        f"{turn.median_ms('with', 'cpu') - turn.median_ms('without', 'cpu'):.3f} ms of CPU; its CPU "
        f"a turn is {early:.3f} ms over the first ten counted turns (the thread's turns "
        f"{WARM_TURNS + 1} to {WARM_TURNS + 10}) and {late:.3f} ms over the last ten (turns "
        f"{WARM_TURNS + turn.turns - 9} to {WARM_TURNS + turn.turns})"
        + (
            " (each model call's request digest reads the whole conversation so far: "
            "`adapters/langgraph/calls.request_digest`)."
            if late > 1.5 * early
            else "."
        ),
        "",
    ]
    return out
