"""Encryption from the command line, as an operator uses it: encrypt a store in place, read it with
and without its keys, rotate to a new key with rekey while a writer keeps saving — killed halfway
with SIGKILL and run again — and count what each key protects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Keyring
from safepoint.store.admin import all_runs
from safepoint_exe import SAFEPOINT, sp
from test_encryption import INDEX, K1, K2

RUNS, STEPS = 24, 6


def key_file(folder: Path, name: str, *ids: str) -> Path:
    keys = {"k1": K1, "k2": K2}
    path = folder / name
    path.write_text("# test keys\n" + "\n".join([f"index:{INDEX}", *(f"{i}:{keys[i]}" for i in ids)]) + "\n")
    path.chmod(0o600)  # a key file open to other users is refused
    return path


def filled(url: str, **options: object) -> None:
    store = safepoint.open_store(url, **options)  # type: ignore[arg-type]
    for run in range(RUNS):
        messages: list[dict[str, str]] = []
        for step in range(STEPS):
            messages.append({"role": "user", "content": f"private words {run}/{step}"})
            cp = Checkpoint(run_id=f"run-{run}", step=step, messages=list(messages), labels={"n": str(run)})
            store.save(cp)
    store.save(Checkpoint(run_id="big", messages=[{"role": "tool", "content": "private output " * 8000}]))
    store.close()


def every_checkpoint_loads(url: str, keyring: Keyring) -> int:
    store = safepoint.open_store(url, encryption=keyring, read_only=True)
    loaded = 0
    for info in all_runs(store):
        for cp in store.history(info.run_id):
            store.load(info.run_id, step=cp.step)
            loaded += 1
    store.close()
    return loaded


def test_encrypt_then_read_with_and_without_the_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    filled(url)
    keys = key_file(tmp_path, "keys.txt", "k1")
    result = sp(tmp_path, "encrypt", "--store", url, "--key-file", str(keys), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"] == RUNS + 1
    data = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".txt")
    assert b"private" not in data  # the file, its WAL, the blob folder: no plaintext left
    without = sp(tmp_path, "runs", "--store", url)
    assert without.returncode == 2
    assert "encrypted" in without.stderr
    assert "Traceback" not in without.stderr
    shown = sp(tmp_path, "show", "run-3", "--store", url, "--key-file", str(keys))
    assert shown.returncode == 0, shown.stderr
    assert "private words 3/5" in shown.stdout
    env = {**os.environ, "SAFEPOINT_KEYS": keys.read_text().replace("\n", " ").replace("# test keys", "")}
    listed = subprocess.run(
        [SAFEPOINT, "runs", "--store", url, "--label", "n=7", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)["runs"]] == ["run-7"]
    verified = sp(tmp_path, "verify", "--store", url, "--key-file", str(keys))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    again = sp(tmp_path, "encrypt", "--store", url, "--key-file", str(keys))
    assert again.returncode == 2
    assert "rekey" in again.stderr


KILLED_REKEY = """
import os, signal, sys
import safepoint
from safepoint.store.admin import rekey_store
store = safepoint.open_store(sys.argv[1], encryption=safepoint.Keyring.from_file(sys.argv[2]))
def progress(done, total):
    if done == total // 2:
        os.kill(os.getpid(), signal.SIGKILL)  # halfway, mid-walk: the next run's transaction never begins
rekey_store(store, progress=progress)
"""


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_rekey_killed_halfway_then_rerun_moves_everything(
    tmp_path: Path, dialect: str, request: pytest.FixtureRequest
) -> None:
    old, both = key_file(tmp_path, "old.txt", "k1"), key_file(tmp_path, "both.txt", "k1", "k2")
    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path}/state.db"
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("pg_schema")
        url = f"{dsn}?schema={schema}" if "?" not in dsn else f"{dsn}&schema={schema}"
    status_of = ("rekey", "--status", "--store", url, "--key-file", str(both), "--json")
    filled(url, encryption=Keyring.from_file(old))
    stop, saved = threading.Event(), []

    def writer() -> None:  # a live agent on the new keyring, saving all the while
        store = safepoint.open_store(url, encryption=Keyring.from_file(both))
        cp = store.load("run-0")
        while not stop.wait(0.02):  # an agent's pace, not a benchmark's
            cp = cp.next()
            cp.messages.append({"role": "assistant", "content": f"more private words {cp.step}"})
            store.save(cp)
            saved.append(cp.step)
        store.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_REKEY, url, str(both)], capture_output=True, text=True, check=False
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        half = sp(tmp_path, *status_of)
        assert half.returncode == 0, half.stderr
        status = json.loads(half.stdout)
        assert status["keys"]["k1"] == 0  # the data keys were rewrapped first: k1 protects nothing now
        assert len(status["data_keys"]) >= 2  # but half the rows are still under the old data key
        rerun = sp(tmp_path, "rekey", "--store", url, "--key-file", str(both), "--json")
        assert rerun.returncode == 0, rerun.stderr
        assert json.loads(rerun.stdout)["rows"] > 0
    finally:
        stop.set()
        thread.join()
    assert saved, "the writer saved while rekey ran"
    done = sp(tmp_path, *status_of)
    status = json.loads(done.stdout)
    assert status["keys"] == {"k1": 0, "k2": status["keys"]["k2"]}
    assert status["plaintext"] == 0
    assert len([n for n in status["data_keys"].values() if n]) == 1  # one data key protects everything
    only_new = Keyring.from_file(key_file(tmp_path, "new.txt", "k2"))
    assert every_checkpoint_loads(url, only_new) >= RUNS * STEPS + len(saved)


KILLED_ENCRYPT = """
import os, signal, sys
import safepoint
from safepoint.store.admin import encrypt_store
store = safepoint.open_store(sys.argv[1])
def progress(done, total):
    if done == total // 2:
        os.kill(os.getpid(), signal.SIGKILL)  # halfway: some runs sealed, the rest still plain
encrypt_store(store, safepoint.Keyring.from_file(sys.argv[2]), progress=progress)
"""


def test_encrypt_killed_halfway_then_rerun_leaves_no_plaintext(tmp_path: Path) -> None:
    """SIGKILL mid-conversion: every run still loads (sealed or plain); the rerun finishes the job."""
    url = f"sqlite:///{tmp_path}/state.db"
    keys = key_file(tmp_path, "keys.txt", "k1")
    filled(url)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_ENCRYPT, url, str(keys)], capture_output=True, text=True, check=False
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    status_of = ("rekey", "--status", "--store", url, "--key-file", str(keys), "--json")
    half = json.loads(sp(tmp_path, *status_of).stdout)
    assert half["plaintext"] > 0
    assert half["keys"]["k1"] > 0
    assert every_checkpoint_loads(url, Keyring.from_file(keys)) == RUNS * STEPS + 1  # converting: both read
    rerun = sp(tmp_path, "encrypt", "--store", url, "--key-file", str(keys), "--json")
    assert rerun.returncode == 0, rerun.stderr
    done = json.loads(sp(tmp_path, *status_of).stdout)
    assert done["plaintext"] == 0
    data = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".txt")
    assert b"private" not in data
    assert every_checkpoint_loads(url, Keyring.from_file(keys)) == RUNS * STEPS + 1
