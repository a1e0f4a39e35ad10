"""Large tool outputs (issue 5): safepoint with its default blob store against ``blobs=False``
and LangGraph's ``SqliteSaver``, on the agent of ``workloads.blobs`` (1 MB every 10th step, half repeats).

safepoint: each repetition opens two fresh stores side by side, on the same
filesystem — ``open_store(url)`` at its defaults (scrubbing on, values over
64 KiB to files beside the database) and ``open_store(url, blobs=False)``
(everything inline) — and saves every agent step to both, alternating which
goes first, so both meet the disk at the same moments. Only ``store.save`` is
timed (wall and thread CPU). Bytes stored are read after the stores are
closed: the database, its -wal and -shm files, and the blob files.

A fresh SQLite database pays extra for its first commits: until the WAL
file has reached its working size, every commit extends it, and the
``fdatasync`` then also writes the file's new size. A store that writes 1 MB
inline at step 10 leaves that phase at once, the default store (small
commits only) when its WAL reaches the autocheckpoint size (256 pages, about
120 steps here); so the speed target compares the steps after
``WARM_STEPS``, where both overwrite WAL pages in place (the first steps are
reported too).

LangGraph: one run of the first ``langgraph_steps`` steps as ``graph.invoke``
calls on the ``lg_graph`` graph over a ``SqliteSaver`` (``langgraph_sqlite.run``);
its cost grows with the square of the run's length. safepoint's bytes are
also read after that step (pages in use, read-only, plus the blob files).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import DiskUsage, StoreRun, dir_bytes, disk_usage, fresh_dir, pages_in_use
from workloads import blobs as blob_workload
from workloads.blobs import BlobWorkload

import safepoint
from sections import langgraph_sqlite

RUN_ID = "bench-blobs"
CONTENDERS = ("default", "inline")
OPTIONS = {"default": {}, "inline": {"blobs": False}}
TARGET_BYTES = 1.1  # bytes stored / unique content bytes
TARGET_SAME_SPEED = 1.1  # save with no new blob, default store / blobs=False
WARM_STEPS = 150  # the speed target uses the steps after this one (see the module docstring)


@dataclass(slots=True)
class Series:
    """One store's saves over every repetition: per-rep lists, index i = agent step i + 1."""

    name: str
    options: str
    seconds: list[list[float]] = field(default_factory=list)
    cpu: list[list[float]] = field(default_factory=list)
    disk: list[DiskUsage] = field(default_factory=list)
    probe_bytes: list[int] = field(default_factory=list)  # per rep: bytes stored after the probe step

    def values(
        self, kinds: list[str], kind: str, *, cpu: bool = False, steps: range | None = None
    ) -> list[float]:
        """Every repetition's save times for the steps of one kind ("small", "new", "repeat"),
        among the agent ``steps`` given (1-based; all by default)."""
        source = self.cpu if cpu else self.seconds
        chosen = range(1, len(kinds) + 1) if steps is None else steps
        return [run[s - 1] for run in source for s in chosen if s <= len(kinds) and kinds[s - 1] == kind]


@dataclass(slots=True)
class BlobResults:
    steps: int
    reps: int
    kinds: list[str]
    content_bytes: int
    unique_bytes: int
    probe_unique_bytes: int  # unique content bytes of the first probe_step steps
    distinct: int
    output_bytes: int
    series: dict[str, Series]
    langgraph: StoreRun | None = None
    probe_step: int = 0  # bytes probed after this step (the LangGraph run's length)
    warm_steps: int = WARM_STEPS
    seconds: float = 0.0

    @property
    def warm(self) -> range:
        """The steps the speed target compares: after the WAL files reached their working size."""
        return range(self.warm_steps + 1, self.steps + 1)


def run(base: Path, *, steps: int, langgraph_steps: int, reps: int, langgraph: bool) -> BlobResults:
    began = time.perf_counter()
    workload = blob_workload.build(steps)
    probe_step = min(langgraph_steps, steps)
    series = {
        name: Series(name, ", ".join(f"{k}={v!r}" for k, v in OPTIONS[name].items()) or "defaults")
        for name in CONTENDERS
    }
    for rep in range(1, reps + 1):
        _side_by_side(workload, base, rep, series, probe_step)
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
        probe_unique_bytes=workload.unique_prefix_bytes(probe_step),
        distinct=workload.distinct_outputs(),
        output_bytes=blob_workload.OUTPUT_BYTES,
        series=series,
        probe_step=probe_step,
        warm_steps=min(WARM_STEPS, steps // 2),
    )
    if langgraph:
        prefix = workload.prefix(probe_step)
        results.langgraph = langgraph_sqlite.run(prefix, base, "blobs", (), "sqlite", load_probes=False)
        _log(f"blobs: SqliteSaver {results.langgraph.disk.total:,} bytes after {probe_step} steps")
    results.seconds = time.perf_counter() - began
    return results


def _side_by_side(
    workload: BlobWorkload, base: Path, rep: int, series: dict[str, Series], probe_step: int
) -> None:
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
            agent_step.apply(cp)
            start, thread = time.perf_counter(), time.thread_time()
            stores[name].save(cp)
            seconds[name].append(time.perf_counter() - start)
            cpu[name].append(time.thread_time() - thread)
            if agent_step.step == probe_step:
                blob_dir = paths[name].with_name(paths[name].name + ".blobs")
                series[name].probe_bytes.append(pages_in_use(paths[name]) + dir_bytes(blob_dir))
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
