"""Close to the floor (issue 34): every SQLite target of the issue against its raw floor, in one run.

    .venv/bin/python bench/run.py --section floor      # make bench SECTION=floor

The workload and the lanes are ``floor_lanes``'s, driven by ``floor_probe`` in processes of
their own: first ``CPU_REPS`` native processes, one after the other, timing each measured call
with process CPU time (the lanes side by side, step by step); then 64 threads saving at once,
group commit on and off, beside raw durable commits and the disk's fsync time (in this
process); then the instruction counts: ``IR_GROUPS`` processes under
``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no``, side by side (counts do
not move with the machine's load), each window's calls collected alone and dumped, its count
split by object file (``by_object``) so that libcrypto's share can be left out of both sides.
Every lane's counts are less the empty lane's (the meter's own calls) of the same process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import machine
from contenders.raw_sqlite import RawWriter

import safepoint

from . import concurrency_runs, floor_lanes, floor_probe
from . import journal_calls as shim

SRC = Path(__file__).resolve().parents[2] / "src"
CPU_LANES = (
    "floor_c",
    "floor_c2",
    "save",
    "save_noscrub",
    "save_encrypted",
    "journal",
    "agent_floor_c2",
    "agent_save",
)
# Under callgrind: processes side by side, each lane in turn (the empty lane first in each).
IR_GROUPS = (
    (
        "floor_c",
        "floor_c2",
        "save",
        "save_noscrub",
        "agent_floor_c",
        "agent_save",
        "agent_save_noscrub",
        "fresh_list",
    ),
    ("langgraph", "save_encrypted", "save_tools", "fresh_deep"),
    ("fresh_list_tools", "fresh_deep_tools"),
)
CPU_REPS = 3
THREADS, THREAD_STEPS, THREAD_REPS = 64, 25, 3
FSYNCS = 200
CRYPTO = "libcrypto"  # the object file whose instructions can be left out of both sides


@dataclass
class ThreadRun:
    group_commit: bool
    rate: float  # saves per second, wall clock
    cpu_per_save: float  # process CPU (every thread) over the saves, seconds


@dataclass
class FloorResult:
    described: dict[str, str]
    ir: dict[str, dict[str, float]] | str  # label -> object file -> instructions per call; or why not
    cpu: dict[str, list[float]]  # label -> seconds per call, pooled over the processes
    peak: dict[str, list[int]]  # load label -> tracemalloc peaks
    message_bytes: dict[str, int]  # load label -> the loaded messages' compact JSON bytes
    queries: list[list[str]]  # the journal lane: named queries of each measured save
    threads: list[ThreadRun]
    raw_rates: list[float]  # raw durable 1 KB commits per second
    fsync_seconds: list[float]  # 4 KiB appended + fdatasync, each
    scale: float = 1.0
    seconds: float = 0.0
    load_end: str = ""
    ir_seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)

    def instructions(self, label: str, *, without: str | None = None) -> float:
        assert isinstance(self.ir, dict)
        return sum(n for ob, n in self.ir[label].items() if without is None or without not in ob)

    def cpu_median(self, label: str) -> float:
        return statistics.median(self.cpu[label])

    def thread_rate(self, group_commit: bool) -> float:
        return statistics.median(t.rate for t in self.threads if t.group_commit == group_commit)

    def thread_cpu(self, group_commit: bool) -> float:
        return statistics.median(t.cpu_per_save for t in self.threads if t.group_commit == group_commit)


# -- the probes ----------------------------------------------------------------------------------


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def _command(mode: str, folder: Path, lanes: tuple[str, ...], scale: float) -> list[str]:
    return [sys.executable, str(Path(floor_probe.__file__)), mode, str(folder), ",".join(lanes), str(scale)]


def cpu_probes(workdir: Path, reps: int, scale: float) -> dict[str, Any]:
    """``reps`` native processes, one after the other; their samples pooled."""
    pooled: dict[str, Any] = {
        "cpu": defaultdict(list),
        "peak": defaultdict(list),
        "message_bytes": {},
        "facts": {},
    }
    for rep in range(reps):
        folder = workdir / f"floor-cpu-{rep}"
        shutil.rmtree(folder, ignore_errors=True)
        done = subprocess.run(
            _command("cpu", folder, CPU_LANES, scale), env=_env(), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"floor cpu probe failed:\n{done.stderr[-3000:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        for label, samples in out["cpu"].items():
            pooled["cpu"][label] += samples
        for label, high in out["peak"].items():
            pooled["peak"][label].append(high)
        pooled["message_bytes"].update(out["message_bytes"])
        pooled["facts"] = out["facts"]
        shutil.rmtree(folder, ignore_errors=True)
    return pooled


def ir_probes(workdir: Path, scale: float, seconds: dict[int, float]) -> dict[str, dict[str, float]] | str:
    """Instructions per call by object file, per window label: ``IR_GROUPS`` callgrind processes
    (``seconds``: when each had finished, from the start)."""
    if shutil.which("valgrind") is None:
        return "valgrind missing (make bench installs it: the bench-deps target)"
    env = _env({"PYTHONHASHSEED": "0"})  # set and dict orders, hence counts, the same every run
    temp = Path(tempfile.mkdtemp(prefix="safepoint-floor-"))
    try:
        if os.uname().machine not in ("x86_64", "AMD64"):  # the probe's own client requests are x86-64's
            if shutil.which("cc") is None:
                return "valgrind's client requests need a C compiler on this CPU"
            env["SAFEPOINT_BENCH_SHIM"] = str(shim.build_shim(temp))
        running, began = [], time.perf_counter()
        for index, group in enumerate(IR_GROUPS):
            out = temp / f"cg-{index}.out"
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no"]
            command += [f"--callgrind-out-file={out}"]
            command += _command("ir", workdir / f"floor-ir-{index}", ("empty", *group), scale)
            process = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            running.append((out, process))
        counts: dict[str, dict[str, float]] = {}
        for index, (out, process) in enumerate(running):
            stdout, err = process.communicate()
            seconds[index] = time.perf_counter() - began
            if process.returncode != 0:
                return f"callgrind probe failed: {err.strip().splitlines()[-1] if err.strip() else '?'}"
            counts.update(_per_call(out, json.loads(stdout.strip().splitlines()[-1])["calls"]))
        return counts
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        for index in range(len(IR_GROUPS)):
            shutil.rmtree(workdir / f"floor-ir-{index}", ignore_errors=True)


def _per_call(out: Path, calls: dict[str, int]) -> dict[str, dict[str, float]]:
    """One process's dumps: per window label, instructions per call by object file, less the empty
    lane's per call (the toggles around each call)."""
    names: dict[str, str] = {}  # callgrind's compressed object names, shared by a process's dumps
    dumps = sorted(out.parent.glob(out.name + ".*"), key=lambda p: int(p.suffix[1:]))
    totals: dict[str, dict[str, int]] = {}
    for dump in dumps:
        text = dump.read_text()
        found = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        costs = by_object(text, names)
        if found is not None:
            totals[found.group(1)] = costs
    empty = {ob: n / calls["empty@main"] for ob, n in totals.pop("empty@main").items()}
    per_call: dict[str, dict[str, float]] = {}
    for label, costs in totals.items():
        obs = set(costs) | set(empty)
        per_call[label] = {ob: costs.get(ob, 0) / calls[label] - empty.get(ob, 0.0) for ob in obs}
    return per_call


def by_object(text: str, names: dict[str, str]) -> dict[str, int]:
    """A callgrind dump's instructions (its one event, Ir) by object file: the self cost lines under
    each ``ob=``, the inclusive cost line after each ``calls=`` skipped. Checked against ``totals:``."""
    costs: dict[str, int] = defaultdict(int)
    current, skip, total = "?", False, None
    for line in text.splitlines():
        if not line:
            continue
        first = line[0]
        if first.isdigit() or first in "+-*":
            if skip:
                skip = False
            else:
                parts = line.split()
                costs[current] += int(parts[1]) if len(parts) > 1 else 0
        elif line.startswith(("ob=", "cob=")):
            found = re.match(r"c?ob=\((\d+)\)(?: (.*))?$", line)
            if found is None:  # uncompressed names (--compress-strings=no)
                name = line.split("=", 1)[1]
            else:
                if found.group(2):
                    names[found.group(1)] = found.group(2)
                name = names.get(found.group(1), "?")
            if first == "o":
                current = name
        elif line.startswith("calls="):
            skip = True
        elif line.startswith("totals:"):
            total = int(line.split()[1])
    if total is not None and total != sum(costs.values()):
        raise RuntimeError(f"callgrind dump: objects sum to {sum(costs.values())}, totals {total}")
    return dict(costs)


# -- many threads at once ------------------------------------------------------------------------


def threads(workdir: Path, reps: int, steps: int) -> list[ThreadRun]:
    """64 threads, one run each, one store: group commit on and off, taking turns."""
    workload = floor_lanes.issue_steps(steps)

    def apply(cp: safepoint.Checkpoint, step: int) -> None:
        workload[step].apply(cp)

    out = []
    for rep in range(reps):
        for group_commit in (True, False) if rep % 2 == 0 else (False, True):
            path = workdir / f"floor-threads-{rep}-{group_commit}.db"
            with safepoint.open_store(f"sqlite:///{path}", group_commit=group_commit) as store:
                began = time.process_time()
                rate = concurrency_runs.threads_on(store, THREADS, steps, 1, apply)
                cpu = (time.process_time() - began) / (THREADS * steps)
            out.append(ThreadRun(group_commit, rate, cpu))
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return out


def raw_rates(workdir: Path, reps: int, commits: int = 1000) -> list[float]:
    """Raw durable commits per second (``RawWriter``: WAL, ``synchronous=FULL``, 1 KB rows, after its
    1,500 warm-up commits)."""
    rates = []
    for rep in range(reps):
        path = workdir / f"floor-raw-{rep}.db"
        writer = RawWriter(path)
        writer.burst(commits)
        rates.append(len(writer.commit_seconds) / sum(writer.commit_seconds))
        writer.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return rates


def fsync_seconds(workdir: Path, count: int = FSYNCS) -> list[float]:
    """The disk's fsync as a WAL commit meets it once the WAL has its size: 4 KiB written over a
    file's existing bytes, then ``fdatasync`` (appending would flush the file's size as well)."""
    path = workdir / "floor-fsync"
    block, slots = os.urandom(4096), 64
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    samples = []
    try:
        os.write(fd, block * slots)
        os.fsync(fd)
        for n in range(count):
            os.pwrite(fd, block, (n % slots) * len(block))
            began = time.perf_counter()
            os.fdatasync(fd)
            samples.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return samples


def run(
    workdir: Path,
    *,
    cpu_reps: int = CPU_REPS,
    thread_reps: int = THREAD_REPS,
    scale: float = 1.0,
    instructions: bool = True,
    log: Callable[[str], None] = print,
) -> FloorResult:
    """The section's measurements: native CPU first, then the threads, then the counts."""
    began = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    described = machine.describe(workdir)
    native = cpu_probes(workdir, cpu_reps, scale)
    cpu_seconds = time.perf_counter() - began
    log(f"floor: {cpu_reps} CPU processes done in {cpu_seconds:.0f} s")
    runs = threads(workdir, thread_reps, max(2, round(THREAD_STEPS * scale)))
    fsyncs = fsync_seconds(workdir, FSYNCS if scale >= 1 else 20)
    # A scaled run (the smoke test) takes the raw rate from the fsyncs, not 1,500 warm-up commits.
    raws = raw_rates(workdir, thread_reps) if scale >= 1 else [1 / statistics.median(fsyncs)]
    log(f"floor: {THREADS} threads done, raw commits {statistics.median(raws):,.0f}/s")
    ir_began = time.perf_counter()
    ir_ends: dict[int, float] = {}
    ir = ir_probes(workdir, scale, ir_ends) if instructions else "not asked for"
    counted = "counted" if isinstance(ir, dict) else ir
    ends = ", ".join(f"{s:.0f} s" for _, s in sorted(ir_ends.items()))
    log(f"floor: instructions {counted} in {time.perf_counter() - ir_began:.0f} s (processes done at {ends})")
    return FloorResult(
        described=described,
        ir=ir,
        cpu=dict(native["cpu"]),
        peak=dict(native["peak"]),
        message_bytes=native["message_bytes"],
        queries=native["facts"].get("journal", {}).get("queries", []),
        threads=runs,
        raw_rates=raws,
        fsync_seconds=fsyncs,
        scale=scale,
        seconds=time.perf_counter() - began,
        load_end=machine.load_average(),
        ir_seconds=time.perf_counter() - ir_began,
        facts={"cpu_seconds": cpu_seconds, "ir_ends": [s for _, s in sorted(ir_ends.items())]},
    )
