"""safepoint on SQLite: one repetition of the simulated agent, one save per step."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from common import LoadProbe, StatementCounter, StoreRun, disk_usage, fresh_dir, is_select, time_calls
from contenders.raw_sqlite import RawWriter
from workloads.agent import Workload

import safepoint

RUN_ID = "bench-run"


def run(
    workload: Workload,
    base: Path,
    label: str,
    probes: tuple[int, ...],
    options: dict[str, Any] | None = None,
) -> StoreRun:
    """Save step 0, then every agent step; probe loads after the saves of ``probes``.

    Only ``store.save`` is inside the timer: the agent's own edits to the
    checkpoint (appending messages, updating counters) happen before it.
    ``options`` go to ``open_store`` (none: the defaults users get).
    """
    options = options or {}
    directory = fresh_dir(base, f"safepoint-{label}")
    db_path = directory / "state.db"
    # SQLite's trace callback expands every statement with its parameters
    # (a 50 KB message becomes 100 KB of hex), so the timed store has none;
    # a second store on the same file, with tracing, counts load statements.
    store = safepoint.open_store(f"sqlite:///{db_path}", **options)
    counter = StatementCounter()
    probe = safepoint.open_store(f"sqlite:///{db_path}", trace=counter, **options)
    raw = RawWriter(directory / "raw.db")
    after_step = raw.interleave(len(workload.steps))
    cp = safepoint.Checkpoint(run_id=RUN_ID)
    store.save(cp)
    seconds: list[float] = []
    cpu_seconds: list[float] = []  # CPU time of this thread (user + system) per save
    loads: list[LoadProbe] = []
    for agent_step in workload.steps:
        cp.step += 1
        agent_step.apply(cp)
        start, cpu = time.perf_counter(), time.thread_time()
        store.save(cp)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.thread_time() - cpu)
        if agent_step.step in probes:
            loads.append(_probe_load(store, probe, counter, agent_step.step))
        after_step(agent_step.step)
    facts = _settings(store)
    probe.close()
    store.close()
    raw_seconds = raw.close()
    disk = disk_usage(db_path, db_path.with_name(db_path.name + ".blobs"))
    shutil.rmtree(directory)
    return StoreRun(
        name="safepoint",
        options=", ".join(f"{k}={v!r}" for k, v in options.items()) or "defaults",
        step_seconds=seconds,
        loads={"store.load(run_id)": loads},
        disk=disk,
        raw_commit_seconds=raw_seconds,
        extra_seconds={"cpu": cpu_seconds},
        facts=facts,
    )


def _probe_load(
    store: safepoint.Store, probe: safepoint.Store, counter: StatementCounter, step: int
) -> LoadProbe:
    def load(on: safepoint.Store) -> None:
        loaded = on.load(RUN_ID)
        if loaded.step != step or len(loaded.messages) != 2 * step:
            raise AssertionError(f"load after step {step} returned step {loaded.step}")

    statements = counter.count(lambda: load(probe))
    return LoadProbe(
        step=step,
        seconds=time_calls(lambda: load(store)),
        statements=len(statements),
        selects=sum(is_select(sql) for sql in statements),
    )


def _settings(store: safepoint.Store) -> dict[str, str]:
    driver = store.driver
    execute = getattr(driver, "execute_raw", None)
    if execute is None:
        return {}
    names = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}
    sync = str(execute("PRAGMA synchronous")[0][0])
    return {
        "journal_mode": str(execute("PRAGMA journal_mode")[0][0]),
        "synchronous": names.get(sync, sync),
        "page_size": str(execute("PRAGMA page_size")[0][0]),
        "sqlite": sqlite3.sqlite_version,
    }
