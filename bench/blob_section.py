"""Large tool outputs (issue 5): safepoint with its default blob store against ``blobs=False``
and LangGraph's ``SqliteSaver``, on the agent of ``blob_workload`` (1 MB every 10th step, half repeats).

safepoint: each repetition opens two fresh stores side by side, on the same
filesystem — ``open_store(url)`` at its defaults (scrubbing on, values over
64 KiB to files beside the database) and ``open_store(url, blobs=False)``
(everything inline) — and saves every agent step to both, alternating which
goes first, so both meet the disk at the same moments. Only ``store.save`` is
timed (wall and thread CPU). Bytes stored are read after the stores are
closed: the database, its -wal and -shm files, and the blob files.

LangGraph: one run of the same steps as ``graph.invoke`` calls on the
``lg_graph`` graph over a ``SqliteSaver`` (``langgraph_sqlite.run``).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import blob_workload
import langgraph_sqlite
from blob_workload import BlobWorkload
from common import DiskUsage, StoreRun, disk_usage, fresh_dir

import safepoint

RUN_ID = "bench-blobs"
CONTENDERS = ("default", "inline")
OPTIONS = {"default": {}, "inline": {"blobs": False}}
TARGET_BYTES = 1.1  # bytes stored / unique content bytes
TARGET_SAME_SPEED = 1.1  # save with no new blob, default store / blobs=False


@dataclass(slots=True)
class Series:
    """One store's saves over every repetition: per-rep lists, index i = agent step i + 1."""

    name: str
    options: str
    seconds: list[list[float]] = field(default_factory=list)
    cpu: list[list[float]] = field(default_factory=list)
    disk: list[DiskUsage] = field(default_factory=list)

    def values(self, kinds: list[str], kind: str, cpu: bool = False) -> list[float]:
        """Every repetition's save times for the steps of one kind ("small", "new", "repeat")."""
        source = self.cpu if cpu else self.seconds
        return [run[i] for run in source for i, k in enumerate(kinds) if k == kind]


@dataclass(slots=True)
class BlobResults:
    steps: int
    reps: int
    kinds: list[str]
    content_bytes: int
    unique_bytes: int
    distinct: int
    output_bytes: int
    series: dict[str, Series]
    langgraph: StoreRun | None = None
    langgraph_steps: int = 0
    seconds: float = 0.0


def run(base: Path, *, steps: int, reps: int, langgraph: bool) -> BlobResults:
    began = time.perf_counter()
    workload = blob_workload.build(steps)
    series = {
        name: Series(name, ", ".join(f"{k}={v!r}" for k, v in OPTIONS[name].items()) or "defaults")
        for name in CONTENDERS
    }
    for rep in range(1, reps + 1):
        _side_by_side(workload, base, rep, series)
        d, i = series["default"], series["inline"]
        _log(
            f"blobs rep {rep}: default {_median_ms(d.seconds[-1])} / blobs=False {_median_ms(i.seconds[-1])} "
            f"per save (median), {d.disk[-1].total:,} / {i.disk[-1].total:,} bytes"
        )
    results = BlobResults(
        steps=steps,
        reps=reps,
        kinds=workload.kinds,
        content_bytes=workload.content_json_bytes(),
        unique_bytes=workload.unique_content_bytes(),
        distinct=workload.distinct_outputs(),
        output_bytes=blob_workload.OUTPUT_BYTES,
        series=series,
    )
    if langgraph:
        results.langgraph = langgraph_sqlite.run(workload, base, "blobs", (), "sqlite", load_probes=False)
        results.langgraph_steps = steps
        _log(f"blobs: SqliteSaver {results.langgraph.disk.total:,} bytes after {steps} steps")
    results.seconds = time.perf_counter() - began
    return results


def _side_by_side(workload: BlobWorkload, base: Path, rep: int, series: dict[str, Series]) -> None:
    directories = {name: fresh_dir(base, f"blobs-{name}-{rep}") for name in CONTENDERS}
    paths = {name: directories[name] / "state.db" for name in CONTENDERS}
    stores = {name: safepoint.open_store(f"sqlite:///{paths[name]}", **OPTIONS[name]) for name in CONTENDERS}
    cps = {name: safepoint.Checkpoint(run_id=RUN_ID) for name in CONTENDERS}
    for name in CONTENDERS:
        stores[name].save(cps[name])
    seconds: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    cpu: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for agent_step in workload.steps:
        order = CONTENDERS if (agent_step.step + rep) % 2 else CONTENDERS[::-1]
        for name in order:
            cp = cps[name]
            cp.step += 1
            cp.messages.extend(agent_step.messages)
            cp.counters.update(agent_step.counters)
            cp.cursors["main"] = agent_step.cursor
            cp.state.update(agent_step.state)
            start, thread = time.perf_counter(), time.thread_time()
            stores[name].save(cp)
            seconds[name].append(time.perf_counter() - start)
            cpu[name].append(time.thread_time() - thread)
    _check(stores["default"], workload)
    for name in CONTENDERS:
        stores[name].close()
        blob_dir = paths[name].with_name(paths[name].name + ".blobs")
        series[name].seconds.append(seconds[name])
        series[name].cpu.append(cpu[name])
        series[name].disk.append(disk_usage(paths[name], blob_dir))
        shutil.rmtree(directories[name])


def _check(store: safepoint.Store, workload: BlobWorkload) -> None:
    """The default store gives every tool output back (a benchmark that lost data would be no benchmark)."""
    loaded = store.load(RUN_ID)
    expected = [m for s in workload.steps for m in s.messages]
    if loaded.step != len(workload.steps) or list(loaded.messages) != expected:
        raise AssertionError("the blob benchmark's store did not load back what it saved")


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms"


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
