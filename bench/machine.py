"""What the benchmark ran on: CPU, memory, filesystem, interpreter and packages."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import safepoint

_REPO = Path(__file__).resolve().parent.parent

PACKAGES = (
    "safepoint",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "psycopg",
    "psycopg-pool",
    "langchain-core",
    "orjson",
    "ormsgpack",
)


def describe(workdir: Path) -> dict[str, str]:
    return {
        "CPU": _cpu_model(),
        "Cores": str(os.cpu_count()),
        "RAM": _memory(),
        "Filesystem (bench files)": _filesystem(workdir),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
        "SQLite": sqlite3.sqlite_version,
        "Packages": ", ".join(f"{name} {_version(name)}" for name in PACKAGES),
        "safepoint measured": _measured(),
        "Load average (1, 5, 15 min) at the start": load_average(),
    }


def load_average() -> str:
    """The machine's load average: how much else was running (2 cores shared with other work)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _filesystem(workdir: Path) -> str:
    try:
        out = subprocess.run(
            ["df", "-T", str(workdir)], capture_output=True, text=True, check=True
        ).stdout.splitlines()[-1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"
    device, fstype, *_rest, mount = out.split()
    return f"{fstype} on {device}, mounted at {mount}"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _measured() -> str:
    """Which safepoint code ran: the repository's src/ at HEAD (and any local edits), or elsewhere."""
    package = Path(safepoint.__file__).resolve().parent
    if package != _REPO / "src" / "safepoint":
        return f"code at {package} (not this repository's src/), repository HEAD {_git_head()}"
    return f"src/ of commit {_git_head()}"


def _git_head() -> str:
    """HEAD, plus the library files that differ from it."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    changed = _git("status", "--porcelain", "--", "src") or ""
    files = [line.split(maxsplit=1)[1] for line in changed.splitlines() if line.strip()]
    if not files:
        return f"{head} (src/ clean)"
    return f"{head} + uncommitted changes in {', '.join(files)}"


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=_REPO,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()
