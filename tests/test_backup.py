"""``safepoint backup`` on SQLite: an online copy taken while writers save and gc deletes,
verified, sealed when the store is encrypted, and restored into a store whose runs resume.

The race the backup must win: a checkpoint in the copy's snapshot references a blob; a
moment later its run is deleted and gc (grace 0) deletes the blob from the store's folder
before the backup has copied it. The backup holds the blob folder, and gc deletes nothing
while it does (``blobs_held``); the copy then verifies with every blob it references.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import safepoint
from backup_runs import (
    BLOB_THRESHOLD,
    STEPS,
    files_holding,
    finished_right,
    key_material,
    keyring_text,
    tool_output,
    work,
)
from safepoint import Checkpoint, Keyring
from safepoint.blobs.filesystem import FileSystemBlobStore
from safepoint.store.admin import backup_store
from safepoint_exe import sp

WRITERS = 8
DOOMED = 150  # runs deleted (and their blobs collected) while the backup runs


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def blob_value(run_id: str, step: int) -> str:
    return tool_output(run_id, step)


def test_backup_while_8_threads_save_and_gc_runs_holds_every_acknowledged_checkpoint(
    tmp_path: Path,
) -> None:
    """The copy opens, verifies (blobs included) and holds every save acknowledged before the
    backup began, while 8 threads save, runs are deleted and gc(grace=0) runs throughout."""
    source = tmp_path / "live" / "state.db"
    store = safepoint.open_store(url(source), blob_threshold=BLOB_THRESHOLD)
    ledger: list[tuple[str, int]] = []  # acknowledged saves, outside the database
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def save(run_id: str, step: int) -> None:
        store.save(Checkpoint(run_id=run_id, step=step, state={"value": blob_value(run_id, step)}))
        with lock:
            ledger.append((run_id, step))

    def writer(run_id: str) -> None:
        try:
            step = 0
            while not stop.is_set() or step < 60:
                save(run_id, step)
                step += 1
        except BaseException as exc:
            errors.append(exc)

    for doomed in range(DOOMED):
        save(f"doomed-{doomed}", 0)
    held_passes: list[int] = []  # gc passes that found the folder held, with how many blobs spared
    deleted: list[int] = []

    def collector() -> None:
        try:
            doomed = 0
            while not stop.is_set():
                if doomed < DOOMED:
                    store.delete_run(f"doomed-{doomed}")
                    doomed += 1
                result = store.collect_garbage(grace=0)
                deleted.append(result.blobs_deleted)
                if result.blobs_held:
                    held_passes.append(result.blobs_held)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    while True:  # the folder fills before the backup: its blob copy takes a while
        with lock:
            if len(ledger) >= DOOMED + 400:
                break
        stop.wait(0.05)
    gc_thread = threading.Thread(target=collector)
    gc_thread.start()
    with lock:
        acknowledged = [entry for entry in ledger if not entry[0].startswith("doomed-")]
    try:
        report = backup_store(store, tmp_path / "backup" / "state.db")
    finally:
        stop.set()
        for thread in [*threads, gc_thread]:
            thread.join(timeout=60)
    assert not errors, errors
    store.close()

    assert report.complete, report.verified.failures
    assert report.blobs_copied > 400
    assert held_passes, "no gc pass ran while the backup held the blob folder: the race was not run"
    assert sum(deleted) > 0  # gc did delete, outside the backup's hold
    with safepoint.open_store(url(report.database), read_only=True) as copy:
        for run_id, step in acknowledged:
            assert copy.load(run_id, step).state["value"] == blob_value(run_id, step)
    done = sp(tmp_path, "verify", "--json", "--store", url(report.database))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checked"] >= len(acknowledged)
    print(
        f"acknowledged before the backup: {len(acknowledged)}; in the copy: all;"
        f" blobs copied {report.blobs_copied}; gc passes held off: {len(held_passes)}"
        f" ({sum(held_passes)} blobs spared); blobs gc deleted: {sum(deleted)}"
    )


def test_gc_spares_what_a_backup_holds_and_collects_it_after(tmp_path: Path) -> None:
    """While the blob folder is held for a backup, gc(grace=0) deletes none of its blobs and
    counts them held; once released, the next gc deletes them."""
    with safepoint.open_store(url(tmp_path / "s.db"), blob_threshold=BLOB_THRESHOLD) as store:
        store.save(Checkpoint(run_id="gone", step=0, state={"value": blob_value("gone", 0)}))
        store.delete_run("gone")
        folder = store.settings.blobs.store  # type: ignore[union-attr]
        assert isinstance(folder, FileSystemBlobStore)
        with folder.held_for_backup():
            held = store.collect_garbage(grace=0)
        after = store.collect_garbage(grace=0)
    assert (held.blobs_deleted, held.blobs_held) == (0, 1)
    assert (after.blobs_deleted, after.blobs_held) == (1, 0)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_restored_store_resumes_half_done_runs_to_the_right_answer(tmp_path: Path, encrypted: bool) -> None:
    """Runs stopped half way, backed up and restored (both with the real CLI) into a fresh
    folder, resume with ``Run`` to the uninterrupted answer; an encrypted backup holds no key
    and opens only with the keyring."""
    live, keys = tmp_path / "live", tmp_path / "keys.txt"
    options: dict[str, object] = {"blob_threshold": BLOB_THRESHOLD}
    key_args: list[str] = []
    secrets: list[bytes] = []
    if encrypted:
        text, raw = keyring_text()
        keys.write_text(text)
        keys.chmod(0o600)
        options["encryption"] = Keyring.from_file(keys)
        key_args = ["--key-file", str(keys)]
        secrets = key_material(raw)
    run_ids = [f"run-{n}" for n in range(4)]
    with safepoint.open_store(url(live / "state.db"), **options) as store:  # type: ignore[arg-type]
        for n, run_id in enumerate(run_ids):
            work(store, run_id, upto=1 + n)  # 1 to 4 of 6 steps done
        stored = sum(len(store.history(run_id)) for run_id in run_ids)
    blob_files = [path for path in (live / "state.db.blobs").rglob("*") if path.is_file()]
    assert len(blob_files) == sum(1 + n for n in range(4))  # a tool output per step

    made = sp(tmp_path, "backup", "--json", "--store", url(live / "state.db"), *key_args, "backup/state.db")
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert report["complete"]
    assert report["encrypted"] is encrypted
    assert report["verified"]["checkpoints"] == stored
    assert report["blobs_copied"] == len(blob_files)
    backup = tmp_path / "backup"
    assert sorted(path.name for path in backup.iterdir()) == ["state.db", "state.db.blobs"]
    if encrypted:
        assert files_holding(backup, secrets) == []
        assert files_holding(backup, [tool_output("run-0", 0).encode()]) == []  # sealed, not plain
        refused = sp(tmp_path, "verify", "--store", url(backup / "state.db"))
        assert refused.returncode != 0
        assert "Traceback" not in refused.stderr

    fresh = tmp_path / "restored"
    fresh.mkdir()
    restored = sp(fresh, "backup", "--store", url(backup / "state.db"), *key_args, "state.db")
    assert restored.returncode == 0, restored.stderr
    assert "verified the copy" in restored.stdout
    with safepoint.open_store(url(fresh / "state.db"), **options) as store:  # type: ignore[arg-type]
        for run_id in run_ids:
            work(store, run_id, upto=STEPS)
        assert all(finished_right(store, run_id) for run_id in run_ids)
        stored = sum(len(store.history(run_id)) for run_id in run_ids)
    checked = sp(fresh, "verify", "--json", "--store", "sqlite:///state.db", *key_args)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["checked"] == stored


def test_bad_input_is_a_typed_error_with_its_exit_code(tmp_path: Path) -> None:
    """An existing destination (2), a folder that cannot be made (5), memory:// and
    PostgreSQL stores (2), no store (3): one line naming the cause, no traceback, nothing made."""
    with safepoint.open_store(url(tmp_path / "s.db")) as store:
        store.save(Checkpoint(run_id="r", step=0))
    (tmp_path / "taken.db").write_bytes(b"keep me")
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "stale.db-wal").write_bytes(b"a lost store's log")
    cases = [
        (["--store", url(tmp_path / "s.db"), "taken.db"], 2, "exists"),
        (["--store", url(tmp_path / "s.db"), "s.db"], 2, "exists"),
        (["--store", url(tmp_path / "s.db"), "stale.db"], 2, "stale.db-wal exists"),
        (["--store", url(tmp_path / "s.db"), "a-file/copy.db"], 5, "cannot make the backup's folder"),
        (["--store", "memory://", "copy.db"], 2, "memory://"),
        (["--store", "postgresql://postgres@127.0.0.1:5432/test", "copy.db"], 2, "pg_dump"),
        (["--store", url(tmp_path / "none.db"), "copy.db"], 3, "no safepoint store"),
    ]
    for args, code, said in cases:
        done = sp(tmp_path, "backup", "--json", *args)
        assert (done.returncode, done.stdout) == (code, ""), (args, done.stderr)
        error = json.loads(done.stderr)  # one JSON object: no traceback around it
        assert said in error["error"], (args, error)
        assert error["type"] in ("InvalidArgument", "StoreError", "StoreNotFound")
    plain = sp(tmp_path, "backup", "--store", url(tmp_path / "s.db"), "taken.db")
    assert plain.returncode == 2
    assert plain.stderr.startswith("error: ")
    assert len(plain.stderr.splitlines()) == 1
    assert (tmp_path / "taken.db").read_bytes() == b"keep me"
    assert not (tmp_path / "copy.db").exists()
    assert not (tmp_path / "none.db").exists()


def test_a_copy_that_fails_its_check_is_not_given_the_backup_name(tmp_path: Path) -> None:
    """A store missing a blob a checkpoint references: the copy fails its check, the command
    exits 1 naming the blob, and nothing is at the destination's name (only ``.partial``)."""
    with safepoint.open_store(url(tmp_path / "s.db"), blob_threshold=BLOB_THRESHOLD) as store:
        store.save(Checkpoint(run_id="r", step=0, state={"value": blob_value("r", 0)}))
    for blob in (tmp_path / "s.db.blobs").rglob("*"):
        if blob.is_file() and not blob.name.startswith("."):
            blob.unlink()
    done = sp(tmp_path, "backup", "--store", "sqlite:///s.db", "copy.db")
    assert done.returncode == 1, done.stderr
    assert "BlobNotFound" in done.stdout
    assert "NOT a backup" in done.stdout
    assert not (tmp_path / "copy.db").exists()
    assert (tmp_path / "copy.db.partial").exists()
