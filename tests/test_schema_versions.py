"""Versions are always declared: a store knows its current schema_version, even without a chain.

The current version is the migration chain's, or ``open_store(url,
schema_version=N)``, default 1. A migrating load of a newer checkpoint is
``SchemaTooNew``, and so is a save of one, so code that never declared
versions cannot resume (and then overwrite) a run that newer code wrote.
Raw reads always work, and the CLI's read commands read raw: they show
checkpoints of any version. ``import`` takes the version of a newer fixture
from ``--migrations`` or ``--schema-version``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import safepoint
import safepoint.observe
from safepoint import Checkpoint, InvalidArgument, MigrationChain, SchemaTooNew, Status, Worker

SAFEPOINT = str(Path(sys.executable).parent / "safepoint")


def newer_run(url: str, version: int = 5, run_id: str = "r") -> None:
    """Two checkpoints of ``run_id`` at ``version``, as code at that version writes them."""
    with safepoint.open_store(url, schema_version=version) as store:
        cp = Checkpoint(run_id=run_id, schema_version=version, state={"shape": "new"})
        cp.messages.append({"role": "user", "content": "hi"})
        store.save(cp)
        cp = cp.next()
        cp.messages.append({"role": "assistant", "content": "hello"})
        store.save(cp)


def test_a_store_without_a_chain_refuses_newer_checkpoints(tmp_path: Path) -> None:
    """Default version 1: saving a version 2 checkpoint or loading one (migrating) is SchemaTooNew."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    with safepoint.open_store(url) as store:
        assert store.settings.schema_version == 1
        with pytest.raises(SchemaTooNew) as refused:
            store.save(Checkpoint(run_id="r", schema_version=2))
        assert (refused.value.run_id, refused.value.stored_version, refused.value.current_version) == (
            "r",
            2,
            1,
        )
        assert list(store.runs()) == []  # nothing was written
    newer_run(url)
    with safepoint.open_store(url) as store:
        with pytest.raises(SchemaTooNew, match="schema_version 5, newer than this code's 1"):
            store.load("r")
        with pytest.raises(SchemaTooNew):
            store.load("r", 0)
        raw = store.load("r", migrate=False)  # a raw read always works
        assert (raw.schema_version, raw.state) == (5, {"shape": "new"})
        with pytest.raises(SchemaTooNew):
            store.save(raw.next())  # resuming it from the raw read is refused too
        assert [i.step for i in store.history("r")] == [0, 1]


def test_schema_version_option_and_chain_set_the_current_version(tmp_path: Path) -> None:
    """schema_version=N lets code at N load N; a chain's current counts; the two must agree."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    newer_run(url, version=3)
    with safepoint.open_store(url, schema_version=3) as store:
        assert store.load("r").schema_version == 3
    with safepoint.open_store(url, schema_version=4) as store:
        assert store.load("r").schema_version == 3  # older, no chain: as stored
    chain = MigrationChain(current=3, migrations={1: lambda cp: cp, 2: lambda cp: cp})
    with safepoint.open_store(url, migrations=chain) as store:
        assert store.settings.schema_version == 3
        assert store.load("r").state == {"shape": "new"}
    with safepoint.open_store(url, migrations=chain, schema_version=3) as store:
        assert store.settings.schema_version == 3
    with pytest.raises(InvalidArgument, match="disagrees with the migration chain"):
        safepoint.open_store(url, migrations=chain, schema_version=2)
    for bad in (0, -1, "3", 2.0, True, 2**31):
        with pytest.raises(InvalidArgument, match="schema_version must be an int"):
            safepoint.open_store("memory://", schema_version=bad)


def test_the_async_store_declares_versions_too(tmp_path: Path) -> None:
    """open_async_store: same refusal on load and save, same raw read."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    newer_run(url)

    async def main() -> None:
        store = await safepoint.open_async_store(url)
        try:
            with pytest.raises(SchemaTooNew):
                await store.load("r")
            raw = await store.load("r", migrate=False)
            assert raw.schema_version == 5
            with pytest.raises(SchemaTooNew):
                await store.save(raw.next())
        finally:
            await store.close()

    asyncio.run(main())


def test_a_worker_without_a_chain_leaves_a_newer_run_untouched(tmp_path: Path) -> None:
    """A worker of code that never declared versions never claims the newer run: it stops when
    idle, gauges the run it left, and the run keeps its rows and its attempts."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    newer_run(url, version=7)
    gauged: dict[str, list[float]] = {}

    class Gauging(safepoint.observe.NoObserver):
        def record(self, metric: str, value: float, attributes: object) -> None:
            gauged.setdefault(metric, []).append(value)

    with safepoint.open_store(url) as store:
        store.observer = Gauging()
        store.enqueue("r")
        handled: list[str] = []

        def handler(job: safepoint.Job) -> Status:
            handled.append(job.checkpoint.run_id)
            return Status.DONE

        assert Worker(store, handler, lease=5, poll=0.01).run(stop_when_idle=True) == 0
        info = store.run("r")
        assert handled == []
        assert 1 in gauged["safepoint.queue.too_new"]  # left for a worker of newer code
        assert (info.status, info.attempts, info.head_step) == (Status.RUNNING, 0, 1)
        assert store.queue_state("r").queued
        assert store.load("r", migrate=False).schema_version == 7


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFEPOINT_")}
    return subprocess.run(
        [SAFEPOINT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_read_commands_show_checkpoints_of_any_version_and_import_takes_the_version(tmp_path: Path) -> None:
    """show, history, diff, verify and export read raw; import of a newer fixture needs its version."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    newer_run(url)
    shown = cli("show", "r", "--json", "--store", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["schema_version"] == 5
    history = cli("history", "r", "--json", "--store", url, cwd=tmp_path)
    assert [h["schema_version"] for h in json.loads(history.stdout)] == [5, 5]
    diff = cli("diff", "r", "0", "1", "--json", "--store", url, cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    assert [m["role"] for m in json.loads(diff.stdout)["messages"]["added"]] == ["assistant"]
    verify = cli("verify", "--json", "--store", url, cwd=tmp_path)
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout) == {"checked": 2, "calls": 0, "failures": [], "redactions": []}
    fixture = tmp_path / "r.json"
    exported = cli("export", "r", "-o", str(fixture), "--store", url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr

    local = f"sqlite:///{tmp_path / 'local.db'}"
    refused = cli("import", str(fixture), "--store", local, cwd=tmp_path)
    assert refused.returncode != 0
    assert "schema_version 5, newer than this code's 1" in refused.stderr
    assert "Traceback" not in refused.stderr
    imported = cli("import", str(fixture), "--schema-version", "5", "--json", "--store", local, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    (tmp_path / "app.py").write_text(
        "from safepoint import MigrationChain\n\n"
        "CHAIN = MigrationChain(current=5, migrations={v: (lambda cp: cp) for v in range(1, 5)})\n"
    )
    chained = cli(
        "import",
        str(fixture),
        "--run-id",
        "again",
        "--migrations",
        "app:CHAIN",
        "--store",
        local,
        cwd=tmp_path,
    )
    assert chained.returncode == 0, chained.stderr
    with safepoint.open_store(local, schema_version=5) as store:
        assert {r.run_id: r.schema_version for r in store.runs()} == {"r": 5, "again": 5}


def test_a_run_starts_at_the_version_its_store_declares(tmp_path: Path) -> None:
    """``Run``/``AsyncRun`` stamp a new run with ``store.schema_version``, not 1: a store at
    version 3 (declared, or its chain's) never gets a fresh version-1 run to migrate later."""
    from safepoint.harness import AsyncRun, Run  # noqa: PLC0415  # the harness is this test's subject

    url = f"sqlite:///{tmp_path / 'v.db'}"
    with safepoint.open_store(url, schema_version=3) as store:
        assert store.schema_version == 3
        run = Run.start(store, "sync-run")
        run.commit()
        assert [info.schema_version for info in store.history("sync-run")] == [3, 3]
    chain = MigrationChain(current=2, migrations={1: lambda cp: cp})
    with safepoint.open_store(url, migrations=chain) as store:
        assert store.schema_version == 2
        assert Run.start(store, "chained").checkpoint.schema_version == 2

    async def started_async() -> int:
        store = await safepoint.open_async_store(url, schema_version=3)
        try:
            assert store.schema_version == 3
            run = await AsyncRun.start(store, "async-run")
            return (await store.load(run.run_id)).schema_version
        finally:
            await store.close()

    assert asyncio.run(started_async()) == 3
