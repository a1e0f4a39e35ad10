"""Several processes opening and writing one SQLite file at once: nothing lost, nothing torn."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import safepoint

WRITER = r"""
import sys, safepoint
url, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = safepoint.open_store(url)
conflicts = 0
# Each writer grows its own run and also races the others on a shared run.
own = safepoint.Checkpoint(run_id=name)
for step in range(steps):
    own.step = step
    own.messages.append({"role": "user", "content": f"{name} {step} " + "x" * 300})
    own.counters["steps"] = step + 1
    store.save(own)
    while True:
        try:
            shared = store.load("shared").next()
        except safepoint.NotFound:
            shared = safepoint.Checkpoint(run_id="shared")
        shared.messages.append({"role": "user", "content": f"{name} {step}"})
        try:
            store.save(shared)
            break
        except safepoint.Conflict:
            conflicts += 1
print(conflicts)
"""


def test_four_processes_share_one_file(tmp_path: Path) -> None:
    """4 writer processes, own runs plus one contended run: every save lands exactly once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    steps = 40
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, f"writer-{n}", str(steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    conflicts = 0
    for proc in writers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        conflicts += int(out.strip())
    with safepoint.open_store(url) as store:
        for n in range(4):
            run = store.load(f"writer-{n}")
            assert run.step == steps - 1
            assert [m["content"].split()[1] for m in run.messages] == [str(s) for s in range(steps)]
        shared = store.load("shared")
        assert shared.step == 4 * steps - 1
        assert len(shared.messages) == 4 * steps
        for n in range(4):
            mine = [m["content"] for m in shared.messages if m["content"].startswith(f"writer-{n} ")]
            assert mine == [f"writer-{n} {s}" for s in range(steps)]
        for info in store.history("shared"):
            store.load("shared", info.step)  # every step verifies
    print(f"4 processes x {steps} steps, {conflicts} conflicts retried")


OPENER = r"""
import sys, time, safepoint
url, start = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))  # every opener starts at the same instant
with safepoint.open_store(url) as store:
    store.save(safepoint.Checkpoint(run_id=sys.argv[3]))
"""


def test_eight_processes_opening_a_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    """Workers deployed together on a new SQLite file: each opens it and saves (SQLite refuses the
    switch to WAL at once, busy handler or not, when another connection is just opening the file;
    the store retries that within its busy timeout)."""
    for trial in range(6):
        url = f"sqlite:///{tmp_path / f'new-{trial}.db'}"
        start = time.time() + 1.5
        procs = [
            subprocess.Popen([sys.executable, "-c", OPENER, url, str(start), f"w{n}"], stderr=subprocess.PIPE)
            for n in range(8)
        ]
        errors = [p.communicate(timeout=120)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, [e for e in errors if e][:1]
        with safepoint.open_store(url) as store:
            assert len(store.runs(limit=100).items) == 8


class LockedAtFirst(sqlite3.Connection):
    """A real SQLite connection whose first two WAL switches meet "database is locked", as a
    connection racing other openers of a new file does (the race itself is too rare to wait for)."""

    refusals = 2

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "PRAGMA journal_mode = WAL" and LockedAtFirst.refusals:
            LockedAtFirst.refusals -= 1
            raise sqlite3.OperationalError("database is locked")
        return super().execute(sql, *args)


def test_a_refused_wal_switch_is_retried_and_past_the_timeout_is_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=LockedAtFirst))
    with safepoint.open_store(f"sqlite:///{tmp_path / 'retried.db'}") as store:
        store.save(safepoint.Checkpoint(run_id="r"))
    assert LockedAtFirst.refusals == 0
    LockedAtFirst.refusals = 10**9  # never lets go: the busy timeout ends it, with a typed error
    # (StoreUnavailable for SQLite's own SQLITE_BUSY; the injected error carries no code: StoreError)
    with pytest.raises(safepoint.StoreError, match="locked"):
        safepoint.open_store(f"sqlite:///{tmp_path / 'stuck.db'}", busy_timeout=0.2)


def test_a_writer_holding_the_file_past_the_busy_timeout_is_a_typed_error(tmp_path: Path) -> None:
    """Another program holds the write lock for longer than the busy timeout while the store
    sets up its tables: StoreUnavailable (a SafepointError), not sqlite3's own exception."""
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("CREATE TABLE theirs (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(safepoint.StoreUnavailable, match="locked"):
            safepoint.open_store(f"sqlite:///{path}", busy_timeout=0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with safepoint.open_store(f"sqlite:///{path}") as store:  # once it lets go, the store opens
        assert store.runs(limit=1).items == []
