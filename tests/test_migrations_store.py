"""Migrations through a real store: lazy on load, eager with `safepoint migrate`, across crashes.

Every test runs on SQLite and on PostgreSQL (each PostgreSQL test in a
database of its own, so the CLI can reach it by URL alone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

import safepoint
from safepoint import Checkpoint, MigrationError, SchemaTooNew, Store
from safepoint.migrations import MigrationChain
from safepoint.store.admin import migrate_store
from safepoint.testing.migrations import assert_all_loadable

HELPERS = Path(__file__).parent / "helpers"
sys.path.insert(0, str(HELPERS))
from schema_chains import CHAINS, V4, broken_v4  # noqa: E402

from conftest_postgres import require_postgres  # noqa: E402

Opener = Callable[..., Store]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL of its own: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'schema.db'}"
        return
    dsn = require_postgres()
    name = f"sp_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield dsn.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def v1_run(store: Store, run_id: str, steps: int) -> None:
    cp = Checkpoint(run_id=run_id, state={"n": 0})
    for i in range(steps):
        cp.messages.append({"role": "user", "text": f"m{i}"})
        cp.state["n"] = i + 1
        store.save(cp)
        cp = cp.next()


def stored_digests(store: Store, run_id: str) -> list[str]:
    return [info.digest for info in store.history(run_id)]


def test_load_migrates_and_changes_nothing_stored(url: str) -> None:
    """A v1 checkpoint loads at v4 through the chain; the stored rows stay v1, byte for byte."""
    with safepoint.open_store(url) as store:
        v1_run(store, "r", 4)
    with safepoint.open_store(url, migrations=V4) as store:
        before = stored_digests(store, "r")
        cp = store.load("r")
        assert cp.schema_version == 4
        assert cp.state == {"count": 4, "tags": []}
        assert cp.messages[-1] == {"role": "user", "content": "m3"}
        assert store.load("r", 1).messages == [
            {"role": "user", "content": "m0"},
            {"role": "user", "content": "m1"},
        ]
        raw = store.load("r", migrate=False)
        assert raw.schema_version == 1
        assert raw.messages[-1] == {"role": "user", "text": "m3"}
        assert stored_digests(store, "r") == before


def test_newer_checkpoint_and_failing_migration_are_typed_and_harmless(url: str) -> None:
    """SchemaTooNew for a rolled-back deploy; MigrationError naming run, step, versions; nothing altered."""
    with safepoint.open_store(url, migrations=V4) as store:
        cp = Checkpoint(run_id="new", schema_version=4, state={"count": 1, "tags": []})
        store.save(cp)
        v1_run(store, "odd", 3)
    with safepoint.open_store(url, migrations=CHAINS[2]) as store, pytest.raises(SchemaTooNew) as too_new:
        store.load("new")
    assert (too_new.value.run_id, too_new.value.step) == ("new", 0)
    assert "schema_version 4, newer than this code's 2" in str(too_new.value)
    with safepoint.open_store(url, migrations=broken_v4()) as store:
        before = stored_digests(store, "odd")
        with pytest.raises(MigrationError) as failed:
            store.load("odd")  # n == 3: the buggy migration raises
        error = failed.value
        assert (error.run_id, error.step, error.from_version, error.to_version) == ("odd", 2, 3, 4)
        assert isinstance(error.__cause__, KeyError)
        assert store.load("odd", 1).state["count"] == 2  # even: loads
        assert stored_digests(store, "odd") == before


def test_save_after_a_migrated_load_starts_a_new_range(url: str) -> None:
    """The first save at the new version rewrites changed messages as a new range; old steps load as saved."""
    with safepoint.open_store(url) as store:
        v1_run(store, "r", 5)
        old = [store.load("r", step).messages for step in range(5)]
    with safepoint.open_store(url, migrations=V4) as store:
        cp = store.load("r").next()
        cp.messages.append({"role": "user", "content": "m5"})
        cp.state["count"] += 1
        store.save(cp)
        raw = store.load("r", migrate=False)
        assert raw.schema_version == 4
        assert [m["content"] for m in raw.messages] == [f"m{i}" for i in range(6)]
        assert [store.load("r", s, migrate=False).messages for s in range(5)] == old
        following = cp.next()
        following.messages.append({"role": "user", "content": "m6"})
        assert store.save(following).message_count == 7


def test_eager_migrate_is_resumable_and_leaves_history_to_lazy_reads(url: str) -> None:
    """`migrate_store` rewrites heads only; a second pass finds nothing; every checkpoint loads."""
    with safepoint.open_store(url) as store:
        for n in range(7):
            v1_run(store, f"run-{n}", 3)
    with safepoint.open_store(url, migrations=V4) as store:
        lazy = {f"run-{n}": store.load(f"run-{n}").to_dict() for n in range(7)}
        progress: list[tuple[int, int]] = []
        report = migrate_store(store, batch_size=3, progress=lambda d, t: progress.append((d, t)))
        assert (report.runs, report.behind, report.migrated, report.failures) == (7, 7, 7, [])
        assert progress == [(3, 7), (6, 7), (7, 7)]
        for run_id, expected in lazy.items():
            raw = store.load(run_id, migrate=False).to_dict()
            assert raw["schema_version"] == 4
            for key in ("messages", "state", "counters", "cursors", "labels", "status", "step"):
                assert raw[key] == expected[key]
            assert store.load(run_id, 0, migrate=False).schema_version == 1  # history: migrated on read
        again = migrate_store(store)
        assert (again.behind, again.migrated) == (0, 0)
        assert_all_loadable(store, V4)


def test_saves_keep_working_while_migrate_runs(url: str) -> None:
    """A writer saving steps concurrently with `migrate_store` loses nothing and is never blocked for good."""
    with safepoint.open_store(url) as store:
        for n in range(40):
            v1_run(store, f"run-{n}", 2)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with safepoint.open_store(url, migrations=V4) as own:
                cp = own.load("run-0").next()
                for i in range(30):
                    cp.messages.append({"role": "user", "content": f"w{i}"})
                    cp.state["count"] += 1
                    own.save(cp)
                    cp = cp.next()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    with safepoint.open_store(url, migrations=V4) as store:
        thread.start()
        report = migrate_store(store, batch_size=2)
        thread.join(60)
        assert errors == []
        assert report.failures == []
        head = store.load("run-0")
        assert head.step == 31
        assert head.state["count"] == 32
        assert_all_loadable(store, V4)


def run_agent(url: str, run_id: str, version: int, steps: int, kill_at: int | None = None) -> int:
    args = [sys.executable, str(HELPERS / "schema_agent.py"), url, run_id, str(version), str(steps)]
    if kill_at is not None:
        args.append(str(kill_at))
    return subprocess.run(args, timeout=120, check=False).returncode


def test_run_started_at_v2_killed_then_resumed_by_v4_code_finishes(url: str) -> None:
    """Started under version 2, SIGKILLed, resumed by version 4 code in a fresh process: finishes right."""
    assert run_agent(url, "upgrade", 2, 12, kill_at=5) == -signal.SIGKILL
    assert run_agent(url, "upgrade", 4, 12) == 0
    with safepoint.open_store(url, migrations=V4) as store:
        final = store.load("upgrade")
        assert final.step == 11
        assert final.schema_version == 4
        assert final.state == {"count": 12, "tags": []}
        assert [m["content"] for m in final.messages] == [
            f"step {i} at v{2 if i <= 5 else 4}" for i in range(12)
        ]
        assert_all_loadable(store, V4)


def cli(*args: str, cwd: Path = HELPERS, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "safepoint.cli", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def test_migrate_killed_halfway_then_rerun_completes(url: str) -> None:
    """`safepoint migrate` SIGKILLed mid-way leaves every run loadable; a rerun finishes the rest."""
    runs = 120
    with safepoint.open_store(url) as store:
        for n in range(runs):
            v1_run(store, f"run-{n:03d}", 2)
    migrate = cli("migrate", "--store", url, "--migrations", "schema_chains:V4", "--batch-size", "4")
    assert migrate.stdout is not None
    for line in migrate.stdout:
        if line.startswith("batch done: 40/"):
            os.kill(migrate.pid, signal.SIGKILL)
            break
    migrate.wait(60)
    assert migrate.returncode == -signal.SIGKILL
    with safepoint.open_store(url, migrations=V4) as store:
        versions = [store.load(f"run-{n:03d}", migrate=False).schema_version for n in range(runs)]
        assert 40 <= versions.count(4) < runs
        assert set(versions) == {1, 4}
        assert_all_loadable(store, V4)
    rerun = cli("migrate", "--store", url, "--migrations", "schema_chains:V4", "--json")
    _out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    with safepoint.open_store(url, migrations=V4) as store:
        assert {store.load(f"run-{n:03d}", migrate=False).schema_version for n in range(runs)} == {4}
        assert_all_loadable(store, V4)
    check = cli("check", "--store", url, "--migrations", "schema_chains:V4")
    check.communicate(timeout=120)
    assert check.returncode == 0


def test_check_fails_ci_naming_each_broken_checkpoint(url: str) -> None:
    """`safepoint check` exits non-zero and names run and step of every checkpoint that fails."""
    with safepoint.open_store(url) as store:
        v1_run(store, "r", 4)
    check = cli("check", "--store", url, "--migrations", "schema_chains:broken_v4", "--json")
    out, _ = check.communicate(timeout=120)
    assert check.returncode == 1
    import json  # noqa: PLC0415

    report = json.loads(out)
    assert [(f["run_id"], f["step"]) for f in report["failures"]] == [("r", 0), ("r", 2)]
    assert report["checked"] == 4


# -- lazy and eager agree, for random chains (memory store: pure logic) ------------------


def chain_from(ops: list[int]) -> MigrationChain:
    """A chain whose step v applies operation ops[v-1] (each pure, each visible)."""

    def make(version: int, op: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def step(cp: dict[str, Any]) -> dict[str, Any]:
            if op == 0:
                cp["state"].setdefault("seen", []).append(version)
            elif op == 1:
                cp["messages"] = [{**m, f"v{version}": True} for m in cp["messages"]]
            elif op == 2 and cp["messages"]:
                cp["messages"] = cp["messages"][1:]
            else:
                cp["counters"][f"c{version}"] = version
            return cp

        return step

    return MigrationChain(current=len(ops) + 1, migrations={v: make(v, op) for v, op in enumerate(ops, 1)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=5), st.lists(st.integers(1, 4), min_size=1, max_size=4)
)
def test_random_chains_migrate_the_same_lazily_and_eagerly(ops: list[int], lengths: list[int]) -> None:
    """For random chains and runs, the eagerly rewritten head equals the lazily migrated one."""
    chain = chain_from(ops)
    store = safepoint.open_store("memory://")
    for n, length in enumerate(lengths):
        cp = Checkpoint(run_id=f"r{n}")
        for i in range(length):
            cp.messages.append({"role": "user", "content": f"{n}-{i}"})
            store.save(cp)
            cp = cp.next()
    store.settings = type(store.settings)(store.settings.scrubber, chain)
    lazy = {f"r{n}": store.load(f"r{n}").to_dict() for n in range(len(lengths))}
    migrate_store(store)
    for run_id, expected in lazy.items():
        eager = store.load(run_id, migrate=False).to_dict()
        assert eager["schema_version"] == chain.current
        assert {k: eager[k] for k in ("messages", "state", "counters")} == {
            k: expected[k] for k in ("messages", "state", "counters")
        }
        assert store.load(run_id).to_dict() == eager  # loading a current head migrates nothing
