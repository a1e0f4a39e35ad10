"""Small pieces every benchmark section shares: result types, windows, disk usage."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Per-step times are summarised over a window of WINDOW consecutive steps
# around the target step s: s-5 .. s+4, shifted (not clipped) to stay inside
# the run, so every window holds exactly one of the 50 KB tool-output steps.
WINDOW = 10
WINDOW_BEFORE = 5
LOAD_ITERATIONS = 7


class StatementCounter:
    """A SQLite trace callback that records statements while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.statements: list[str] = []

    def __call__(self, sql: str) -> None:
        if self.active:
            self.statements.append(sql)

    def count(self, action: Callable[[], object]) -> list[str]:
        """Run ``action`` once and return the statements it issued."""
        self.statements = []
        self.active = True
        try:
            action()
        finally:
            self.active = False
        return self.statements


def is_select(sql: str) -> bool:
    """Whether the statement is a query, looking past leading ``--`` comment lines."""
    code = [line for line in sql.strip().splitlines() if not line.lstrip().startswith("--")]
    return bool(code) and code[0].lstrip().upper().startswith(("SELECT", "WITH"))


@dataclass(frozen=True, slots=True)
class LoadProbe:
    """Loading the latest checkpoint right after the save of ``step``."""

    step: int
    seconds: list[float]
    statements: int  # every statement, BEGIN/COMMIT included
    selects: int

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_calls(action: Callable[[], object], iterations: int = LOAD_ITERATIONS) -> list[float]:
    out = []
    for _ in range(iterations):
        start = time.perf_counter()
        action()
        out.append(time.perf_counter() - start)
    return out


@dataclass(frozen=True, slots=True)
class DiskUsage:
    db: int
    wal: int
    shm: int
    blobs: int = 0  # the blob files' sizes (a filesystem blob store beside the database)
    blob_files: int = 0

    @property
    def total(self) -> int:
        return self.db + self.wal + self.shm + self.blobs


def disk_usage(db_path: Path, blob_dir: Path | None = None) -> DiskUsage:
    """File sizes of a SQLite database (with its -wal and -shm) and of a blob directory."""

    def size(path: Path) -> int:
        return path.stat().st_size if path.exists() else 0

    return DiskUsage(
        db=size(db_path),
        wal=size(db_path.with_name(db_path.name + "-wal")),
        shm=size(db_path.with_name(db_path.name + "-shm")),
        blobs=dir_bytes(blob_dir) if blob_dir is not None else 0,
        blob_files=_file_count(blob_dir) if blob_dir is not None else 0,
    )


def settled_sqlite_bytes(db_path: Path) -> int:
    """A SQLite database's bytes on disk once its WAL is checkpointed into it (db, -wal, -shm)."""
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return disk_usage(db_path).total


def dir_bytes(directory: Path) -> int:
    """Total size of the regular files under ``directory`` (0 if it does not exist)."""
    if not directory.exists():
        return 0
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _file_count(directory: Path) -> int:
    return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0


def pages_in_use(db_path: Path) -> int:
    """Bytes of the pages a SQLite database uses, as a new reader sees it (WAL content
    included, free pages left out), read without disturbing the writer."""
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as conn:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


@dataclass(slots=True)
class StoreRun:
    """One repetition of the simulated agent against one store."""

    name: str
    step_seconds: list[float]  # index i = agent step i + 1
    loads: dict[str, list[LoadProbe]]  # load method -> one probe per probed step
    disk: DiskUsage
    raw_commit_seconds: list[float]  # the raw-SQLite commits interleaved with this run
    extra_seconds: dict[str, list[float]] = field(default_factory=dict)  # e.g. "put"
    facts: dict[str, str] = field(default_factory=dict)
    probe_bytes: dict[int, int] = field(default_factory=dict)  # step -> bytes stored after it
    options: str = ""  # how the store was opened, for the report

    @property
    def steps(self) -> int:
        return len(self.step_seconds)

    @property
    def rate(self) -> float:
        """Steps per second of time spent inside the measured call."""
        return self.steps / sum(self.step_seconds)

    @property
    def raw_rate(self) -> float:
        """Raw-SQLite commits per second, measured alongside this run."""
        return len(self.raw_commit_seconds) / sum(self.raw_commit_seconds)


def window(step: int, total: int) -> range:
    """The WINDOW steps (1-based) summarised for ``step``, shifted into 1..total."""
    start = max(1, min(step - WINDOW_BEFORE, total - WINDOW + 1))
    return range(start, min(total, start + WINDOW - 1) + 1)


def window_values(series: Sequence[Sequence[float]], step: int) -> list[float]:
    """Every repetition's values in the window of ``step``, pooled."""
    total = len(series[0])
    return [run[s - 1] for run in series for s in window(step, total)]


def window_median(series: Sequence[Sequence[float]], step: int) -> float:
    return statistics.median(window_values(series, step))


def window_mean(series: Sequence[Sequence[float]], step: int) -> float:
    return statistics.fmean(window_values(series, step))


def fresh_dir(base: Path, name: str) -> Path:
    path = base / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
