"""One recorded call, as the journal's flows write it: the payloads, the ways a call is recorded,
and the probe process that counts what a call costs without a clock.

    .venv/bin/python bench/sections/journal_calls.py ir URL [SCHEMA]     # under callgrind (journal.py)
    .venv/bin/python bench/sections/journal_calls.py count URL [SCHEMA]  # under strace on SQLite

The payloads are fixed and seeded: a tool result whose compact JSON is
``TOOL_BYTES`` (a ToolMessage-shaped dict), a model response of
``MODEL_BYTES`` (an AIMessage-shaped dict with a tool call, usage and
metadata), the tool's arguments (~100 B) and the model's request (~2 KB of
messages), which the journal keeps only as a digest. Each *way* is one
recorded call written as an integration writes it (``WAYS``), on a run of its
own; every call has a key of its own, shaped like an integration's (turn,
node, call order).

The probe modes run every way in one process: ``ir`` under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no``,
instrumented once the store is open and collecting only from just before a
way's ``IR_CALLS`` calls to just after them (client requests, from a
four-line C shim built with the system's compiler), the counts dumped per
way; ``count`` records, per way, the named queries
(``QueryLog``) and transactions its calls made, and marks the start and end
of its calls for ``strace`` with a ``stat`` of a path that does not exist, so
the fsyncs and the bytes written between two marks are the way's own.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:  # run as a script, under valgrind or strace
    sys.path.insert(0, str(BENCH_DIR))

from workloads.agent import random_text, random_word  # noqa: E402 - after the path above

import safepoint  # noqa: E402
from safepoint import Checkpoint, Store  # noqa: E402
from safepoint.flow import drive  # noqa: E402
from safepoint.journal import CallUsage, Place, Tally, model_call  # noqa: E402

TOOL_BYTES = 2048
MODEL_BYTES = 4096
SAVE_MESSAGE_BYTES = 200  # the small checkpoint saved for scale: one message of this size a step
IR_WARM, IR_CALLS = 10, 50  # calls before collection starts, and calls counted, per way
COUNT_WARM, COUNT_CALLS = 100, 200  # the same for the count probe (past a WAL checkpoint or two)
MARK = "/nonexistent/safepoint-bench-mark-"  # stat() of MARK + label: strace's marks
USAGE = CallUsage(tokens_in=1200, tokens_out=900, spend=0.0125)


def _sized(
    shape: dict[str, Any], field: str, size: int, rng: random.Random, words: list[str]
) -> dict[str, Any]:
    """``shape`` with ``field`` filled with words so that its compact JSON is ``size`` bytes."""
    shape[field] = ""
    rest = size - len(json.dumps(shape, separators=(",", ":")))
    shape[field] = random_text(rng, words, rest)
    return shape


@dataclass(frozen=True, slots=True)
class Payloads:
    tool_result: dict[str, Any]
    tool_args: dict[str, Any]
    model_response: dict[str, Any]
    model_request: dict[str, Any]


def payloads() -> Payloads:
    rng = random.Random(32)
    words = [random_word(rng) for _ in range(2048)]
    tool_result = _sized(
        {"type": "tool", "name": "lookup", "tool_call_id": "call_7Qx2mZ", "status": "success", "content": ""},
        "content",
        TOOL_BYTES,
        rng,
        words,
    )
    model_response = _sized(
        {
            "type": "ai",
            "id": "run-5f0c2a9e-0",
            "content": "",
            "tool_calls": [{"name": "lookup", "args": {"query": "order 1182 status"}, "id": "call_7Qx2mZ"}],
            "usage_metadata": {"input_tokens": 1200, "output_tokens": 900, "total_tokens": 2100},
            "response_metadata": {"model_name": "bench-model", "finish_reason": "tool_calls"},
        },
        "content",
        MODEL_BYTES,
        rng,
        words,
    )
    system = {"role": "system", "content": random_text(rng, words, 600)}
    turns = [{"role": "user", "content": random_text(rng, words, 600)} for _ in range(2)]
    request = {"model": "bench-model", "temperature": 0, "messages": [system, *turns]}
    args = {"name": "lookup", "args": {"query": "order 1182 status", "limit": 5, "fields": ["status", "eta"]}}
    return Payloads(tool_result, args, model_response, request)


@dataclass(frozen=True, slots=True)
class Way:
    """One recorded call written as an integration writes it: ``unit(store, key)``."""

    name: str
    label: str
    run_id: str
    unit: Callable[[Store, str], Any]
    payload: int  # the recorded result's JSON bytes (0: none)


def ways(p: Payloads) -> list[Way]:
    """What one recorded call costs, each way; ``save`` is a plain save, for scale."""
    tally = Tally()

    def tool(store: Store, key: str) -> None:
        store.call_intent("tool", key, request=p.tool_args)
        store.record_call("tool", key, p.tool_result, request=p.tool_args)

    def model(store: Store, key: str) -> None:
        store.record_call("model", key, p.model_response, request=p.model_request, usage=USAGE)

    def model_intent(store: Store, key: str) -> None:
        store.call_intent("model-intent", key, request=p.model_request)
        store.record_call("model-intent", key, p.model_response, request=p.model_request, usage=USAGE)

    def model_flow(store: Store, key: str) -> None:
        flow = model_call(
            Place("model-flow"),
            key,
            p.model_request,
            lambda: p.model_response,
            encode=_same,
            decode=_same,
            usage_of=lambda _: USAGE,
            tally=tally,
        )
        drive(store, flow)

    return [
        Way("tool", "2 KB tool result: intent + record (a non-idempotent tool)", "tool", tool, TOOL_BYTES),
        Way("model", "4 KB model response: record alone", "model", model, MODEL_BYTES),
        Way(
            "model_intent",
            "4 KB model response: intent + record",
            "model-intent",
            model_intent,
            MODEL_BYTES,
        ),
        Way(
            "model_flow",
            "4 KB model response: the whole `model_call` flow (lookup + intent + record)",
            "model-flow",
            model_flow,
            MODEL_BYTES,
        ),
    ]


def reads(p: Payloads) -> list[Way]:
    """Replay reads: ``recorded_call`` of an entry the ways above wrote (its key is passed)."""

    def tool(store: Store, key: str) -> None:
        store.recorded_call("tool", key, request=p.tool_args)

    def model(store: Store, key: str) -> None:
        store.recorded_call("model", key, request=p.model_request)

    return [
        Way("read_tool", "replay read of a 2 KB tool result (`recorded_call`)", "tool", tool, TOOL_BYTES),
        Way(
            "read_model",
            "replay read of a 4 KB model response (`recorded_call`)",
            "model",
            model,
            MODEL_BYTES,
        ),
    ]


class Saver:
    """A plain ``store.save`` of a small checkpoint a unit (one ~200-byte message a step), for scale."""

    label = "`store.save` of a small checkpoint (one 200-byte message a step), for scale"

    def __init__(self, run_id: str = "saves") -> None:
        rng = random.Random(7)
        words = [random_word(rng) for _ in range(512)]
        self.text = random_text(rng, words, SAVE_MESSAGE_BYTES)
        self.cp = Checkpoint(run_id=run_id)
        self.saved = False

    def __call__(self, store: Store, key: str) -> None:
        cp = self.cp
        if self.saved:
            cp.step += 1
        cp.messages.append({"role": "user", "content": self.text})
        store.save(cp)
        self.saved = True


def call_key(n: int) -> str:
    """The n-th call's key, shaped like an integration's: turn, node and call order."""
    return f"turn-{n // 4}/agent/{n % 4}"


def prepare(store: Store, all_ways: list[Way]) -> None:
    """The runs the ways record into (a call is recorded on a run that exists)."""
    for run_id in dict.fromkeys(way.run_id for way in all_ways):
        store.save(Checkpoint(run_id=run_id))


def open_bench_store(url: str, schema: str | None, **options: Any) -> Store:
    """The store as users open it, group commit named (the default) for the reader."""
    if url.startswith("sqlite"):
        return safepoint.open_store(url, group_commit=True, **options)
    return safepoint.open_store(url, schema=schema, **options)


def _same(value: Any) -> Any:
    return value


# -- the probe process ----------------------------------------------------------------------

_SHIM = (
    "#include <valgrind/callgrind.h>\n"
    "void sp_start(void) { CALLGRIND_START_INSTRUMENTATION; }\n"
    "void sp_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"
    "void sp_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }\n"
)


def build_shim(directory: Path) -> Path:
    """The C shim whose two functions switch callgrind's collection and dump its counts."""
    import subprocess  # noqa: PLC0415 - only the parent builds it

    source, library = directory / "shim.c", directory / "shim.so"
    source.write_text(_SHIM)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def units(
    store: Store, p: Payloads, warm: int, raw: Callable[[], None] | None = None
) -> list[tuple[str, Callable[[int], None]]]:
    """Each way's unit as a function of a call number (the reads read what the writes' first
    ``warm`` calls wrote), the save for scale, and the floor's commit when given."""

    def writing(way: Way) -> Callable[[int], None]:
        return lambda n: way.unit(store, f"{way.name}/{call_key(n)}")

    def reading(way: Way, source: str) -> Callable[[int], None]:
        # Entries the writes made in their warm-up calls (which run first), cycled.
        return lambda n: way.unit(store, f"{source}/{call_key(n % warm)}")

    out = [(way.name, writing(way)) for way in ways(p)]
    out += [(way.name, reading(way, way.run_id)) for way in reads(p)]
    saver = Saver()
    out.append(("save", lambda n: saver(store, "")))
    if raw is not None:
        out.append(("floor", lambda n: raw()))
    return out


def raw_floor(
    url: str, trace: Callable[[str], None] | None = None
) -> tuple[Callable[[], None], Callable[[], None]] | None:
    """A bare sqlite3 WAL + synchronous=FULL commit of one 2 KB row, beside the store's file."""
    if not url.startswith("sqlite"):
        return None
    path = Path(url.removeprefix("sqlite:///")).with_name("floor.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.set_trace_callback(trace)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    body = random.Random(2).randbytes(TOOL_BYTES)

    def commit() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO rows (body) VALUES (?)", (body,))
        conn.execute("COMMIT")

    return commit, conn.close


def probe(mode: str, url: str, schema: str | None) -> dict[str, Any]:
    from safepoint.testing.conformance.query_log import QueryLog  # noqa: PLC0415

    p = payloads()
    statements: list[str] = []  # SQLite's own trace: every statement, BEGIN and COMMIT included
    traced = mode == "count" and url.startswith("sqlite")
    store = open_bench_store(url, schema, **({"trace": statements.append} if traced else {}))
    prepare(store, [*ways(p), *reads(p)])
    floor = raw_floor(url, statements.append if traced else None)
    log = QueryLog(store) if mode == "count" else None
    warm, calls = (IR_WARM, IR_CALLS) if mode == "ir" else (COUNT_WARM, COUNT_CALLS)
    shim = ctypes.CDLL(os.environ["SAFEPOINT_BENCH_SHIM"]) if mode == "ir" else None
    out: dict[str, Any] = {}
    if shim is not None:  # the loop alone, to subtract: what a way's count holds besides its calls
        shim.sp_start()  # instrumented from here on (--instr-atstart=no): the imports ran at full speed
        shim.sp_toggle()
        for _ in range(calls):
            pass
        shim.sp_toggle()
        shim.sp_dump(b"empty")
    for name, unit in units(store, p, warm, None if floor is None else floor[0]):
        for n in range(warm):
            unit(n)
        if log is not None:
            log.take()
            statements.clear()
        if shim is not None:
            shim.sp_toggle()
        else:
            os.path.exists(f"{MARK}{name}-begin")
        for n in range(warm, warm + calls):
            unit(n)
        if shim is not None:
            shim.sp_toggle()
            shim.sp_dump(name.encode())
        else:
            os.path.exists(f"{MARK}{name}-end")
        if log is not None:
            queries = log.take()
            out[name] = {
                "queries": len(queries) / calls,
                "names": sorted({q.name for q in queries}),
                "statements": len(statements) / calls if traced else None,
                "commits": sum(s.startswith("COMMIT") for s in statements) / calls if traced else None,
            }
    out["calls"] = calls
    if floor is not None:
        floor[1]()
    store.close()
    return out


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    print(json.dumps(probe(mode, url, sys.argv[3] if len(sys.argv) > 3 else None)))
