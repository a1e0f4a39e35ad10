"""What the call journal costs a turn, in each framework it plugs into (issue 33).

    .venv/bin/python bench/run.py --section frameworks     # make bench SECTION=frameworks

Each framework's workload (``workloads/journal_<framework>.py``) is one
conversation turn of the same shape: a ~200-byte user message; a model call
answering with a ~500-byte reply and two tool calls; the tools ``lookup``
(idempotent) and ``charge`` (non-idempotent: an intent before its effect
when journaled), each returning ~2 KB; a second model call answering ~4 KB.
The models are the frameworks' own offline test models (or a scripted one
on their public model interface), so the turn is the framework's and
safepoint's work alone. Two copies of the app take turns, one turn each, on
SQLite files of their own (the store's defaults: WAL, ``synchronous=FULL``):
the app as safepoint's adapter runs it without the journal, and the same
app with the one line that turns the journal on. A change in the machine's
load falls on both.

Per framework, in a process of its own: the median CPU (``time.process_time``:
every thread, so background writers count) and wall time of a turn over
``TURNS`` turns after ``WARM`` untimed ones, and the journal entries a turn
wrote. Then the same turns counted without a clock: instructions per turn
(``valgrind --tool=callgrind``, instrumented only from the first measured
turn, every thread counted, between dumps taken around each way's turns, so
the imports and the warm-up cost nothing) — ``IR_TURNS`` turns each way.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
SRC = BENCH_DIR.parent / "src"
for _path in (BENCH_DIR, SRC):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

TURNS, WARM, IR_TURNS, IR_WARM = 60, 5, 10, 3
# (framework, workload module): each module has ``NAME`` and ``open_app(folder, journal) -> App``.
FRAMEWORKS = (
    ("LangGraph", "workloads.journal_langgraph"),
    ("OpenAI Agents SDK", "workloads.journal_openai_agents"),
    ("Pydantic AI", "workloads.journal_pydantic_ai"),
    ("Google ADK", "workloads.journal_google_adk"),
    ("Microsoft Agent Framework", "workloads.journal_agent_framework"),
)
WAYS = ("without", "with")  # the journal off, on


@dataclass(slots=True)
class App:
    """One copy of a workload's app: ``turn(n)`` runs turn ``n``; ``close()`` lets its store go."""

    turn: Callable[[int], None]
    close: Callable[[], None]


@dataclass(slots=True)
class Row:
    framework: str
    cpu: dict[str, list[float]] = field(default_factory=dict)
    wall: dict[str, list[float]] = field(default_factory=dict)
    entries: float = 0.0  # journal entries per turn
    ir: dict[str, float] | str = "not measured"  # instructions per turn, or why not
    skipped: str | None = None

    def ms(self, way: str, kind: str = "cpu") -> float:
        return statistics.median((self.cpu if kind == "cpu" else self.wall)[way]) * 1e3


@dataclass(slots=True)
class Result:
    rows: list[Row]
    turns: int = TURNS
    ir_turns: int = IR_TURNS
    seconds: float = 0.0


def run(log: Callable[[str], None] = print) -> Result:
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="safepoint-bench-journal-frameworks-") as tmp:
        folder = Path(tmp)
        shim = _shim(folder)
        for framework, module in FRAMEWORKS:
            log(f"journal cost per turn: {framework}")
            row = _timed(framework, module, folder / "time")
            if row.skipped is None:
                row.ir = _instructions(module, folder / "ir", shim)
            rows.append(row)
    return Result(rows, seconds=time.monotonic() - started)


def _probe(module: str, mode: str, folder: Path, wrap: list[str] | None = None, **env: str) -> dict[str, Any]:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(SRC), str(BENCH_DIR)])}
    command = [*(wrap or []), sys.executable, __file__, module, mode, str(folder)]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{module} {mode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _timed(framework: str, module: str, folder: Path) -> Row:
    try:
        found = _probe(module, "time", folder)
    except RuntimeError as failed:
        return Row(framework, skipped=str(failed).splitlines()[-1][:300])
    return Row(framework, cpu=found["cpu"], wall=found["wall"], entries=found["entries"])


def _instructions(module: str, folder: Path, shim: Path | None) -> dict[str, float] | str:
    if shim is None:
        return "valgrind or a C compiler missing"
    out = folder.parent / "callgrind.out"
    for old in folder.parent.glob("callgrind.out*"):
        old.unlink()
    wrap = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    wrap.append(f"--callgrind-out-file={out}")
    try:
        _probe(module, "ir", folder, wrap, SAFEPOINT_BENCH_SHIM=str(shim))
    except RuntimeError as failed:
        return f"callgrind run failed: {str(failed).splitlines()[-1][:200]}"
    totals: dict[str, int] = {}
    for dump in folder.parent.glob("callgrind.out.*"):
        text = dump.read_text()
        label = re.search(r"^desc: Trigger: Client Request: (\w+)", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if label and total:
            totals[label.group(1)] = int(total.group(1))
    return {way: totals[way] / IR_TURNS for way in WAYS if way in totals}


_SHIM_SOURCE = (
    "#include <valgrind/callgrind.h>\n"
    "void sp_start(void) { CALLGRIND_START_INSTRUMENTATION; }\n"
    "void sp_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }\n"
)


def _shim(folder: Path) -> Path | None:
    """The C shim that switches callgrind's collection from Python (None: no valgrind or cc)."""
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        return None
    source, library = folder / "shim.c", folder / "shim.so"
    source.write_text(_SHIM_SOURCE)
    done = subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=False)
    return library if done.returncode == 0 else None


# -- the probe: one framework's two apps, in a process of its own ----------------------------


def _entries(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT count(*) FROM safepoint_calls").fetchone()[0])


def probe(module_name: str, mode: str, folder: Path) -> dict[str, Any]:
    workload = importlib.import_module(module_name)
    apps = {way: workload.open_app(folder / way, way == "with") for way in WAYS}
    try:
        if mode == "time":
            return _time(apps, folder)
        return _count(apps)
    finally:
        for app in apps.values():
            app.close()


def _time(apps: dict[str, App], folder: Path) -> dict[str, Any]:
    cpu: dict[str, list[float]] = {way: [] for way in apps}
    wall: dict[str, list[float]] = {way: [] for way in apps}
    for n in range(WARM + TURNS):
        for way in WAYS if n % 2 == 0 else tuple(reversed(WAYS)):
            start, used = time.perf_counter(), time.process_time()
            apps[way].turn(n)
            took, spent = time.perf_counter() - start, time.process_time() - used
            if n >= WARM:
                wall[way].append(took)
                cpu[way].append(spent)
    entries = _entries(folder / "with" / "store.db") / (WARM + TURNS)
    return {"cpu": cpu, "wall": wall, "entries": entries}


def _count(apps: dict[str, App]) -> dict[str, Any]:
    shim = ctypes.CDLL(os.environ["SAFEPOINT_BENCH_SHIM"])
    for n in range(IR_WARM):
        for way in WAYS:
            apps[way].turn(n)
    # Instrumented from here (--instr-atstart=no): imports and warm-up ran natively. Counted by
    # dumps, not by toggling collection, which is per thread: the frameworks run nodes and tools
    # in worker threads and the store commits from its own, and every thread's work counts.
    shim.sp_start()
    shim.sp_dump(b"start")  # zeroes the counts: what came before is not a way's
    for way in WAYS:
        for n in range(IR_WARM, IR_WARM + IR_TURNS):
            apps[way].turn(n)
        shim.sp_dump(way.encode())
    return {"turns": IR_TURNS}


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], sys.argv[2], Path(sys.argv[3]))))
