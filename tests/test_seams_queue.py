"""The queue's seams fail closed: migrations and workers, corruption and the queue, keys and workers.

On SQLite and PostgreSQL: a worker whose migration chain is older than a
queued run never claims it (the claim statement skips it), finishes every
other run, returns from ``stop_when_idle`` and gauges the run it left; the
first worker with the newer chain takes it. A run whose stored row fails
its digest is quarantined on its first attempt. A worker whose keyring
cannot read a run (a key it lacks, or a key error its handler meets) puts
the run back with its attempt uncounted and held back, so it moves on and a
worker holding the key takes the run. Claims are counted with ``QueryLog``,
never timed.
"""

from __future__ import annotations

import base64
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import Checkpoint, Job, Keyring, MigrationChain, Run, Status, Worker
from safepoint.errors import CorruptCheckpoint, EncryptedStore, InvalidKey, MissingKey, SchemaTooNew
from safepoint.observe import NoObserver
from safepoint.testing.conformance import QueryLog
from safepoint.worker.attempts import fault

INDEX = base64.b64encode(bytes(range(32))).decode()
K1 = base64.b64encode(b"\x11" * 32).decode()
K2 = base64.b64encode(b"\x22" * 32).decode()


def keyring(*keks: str) -> Keyring:
    """The index key and key-encryption keys ``k1`` and/or ``k2`` (the last one writes)."""
    return Keyring.from_text(" ".join([f"index:{INDEX}", *(f"{k}:{K1 if k == 'k1' else K2}" for k in keks)]))


def lift(checkpoint: dict[str, Any]) -> dict[str, Any]:
    return checkpoint


OLD = MigrationChain(current=2, migrations={1: lift})  # the old deploy: version N = 2
NEW = MigrationChain(current=3, migrations={1: lift, 2: lift})  # the new one: N + 1


@dataclass
class Backend:
    name: str
    url: str
    rows: Callable[[str], list[tuple[Any, ...]]]  # every column of the run's rows, as stored
    edit: Callable[[str, str], None]  # run an UPDATE on the run's checkpoint rows (SET clause)

    def open(self, **options: Any) -> safepoint.Store:
        return safepoint.open_store(self.url, **options)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "queue.db"

        def sqlite_rows(run_id: str) -> list[tuple[Any, ...]]:
            with closing(sqlite3.connect(path)) as conn:
                run = conn.execute("SELECT * FROM safepoint_runs WHERE run_id = ?", (run_id,)).fetchall()
                checkpoints = conn.execute(
                    "SELECT * FROM safepoint_checkpoints WHERE run_ref = ? ORDER BY id", (run[0][0],)
                ).fetchall()
            return run + checkpoints

        def sqlite_edit(run_id: str, assignment: str) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute(
                    f"UPDATE safepoint_checkpoints SET {assignment}"  # the test's own SQL
                    " WHERE run_ref = (SELECT id FROM safepoint_runs WHERE run_id = ?)",
                    (run_id,),
                )

        yield Backend("sqlite", f"sqlite:///{path}", sqlite_rows, sqlite_edit)
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:

        def postgres_rows(run_id: str) -> list[tuple[Any, ...]]:
            key = {"run_id": run_id}
            run = raw(dsn, schema, "SELECT * FROM safepoint_runs WHERE run_id = %(run_id)s", key)
            checkpoints = raw(
                dsn,
                schema,
                "SELECT c.* FROM safepoint_checkpoints AS c JOIN safepoint_runs AS r ON r.id = c.run_ref"
                " WHERE r.run_id = %(run_id)s ORDER BY c.step",
                key,
            )
            return run + checkpoints

        def postgres_edit(run_id: str, assignment: str) -> None:
            raw(
                dsn,
                schema,
                f"UPDATE safepoint_checkpoints SET {assignment} FROM safepoint_runs AS r"
                " WHERE r.id = run_ref AND r.run_id = %(run_id)s",
                {"run_id": run_id},
            )

        yield Backend("postgresql", f"{dsn}?schema={schema}", postgres_rows, postgres_edit)


@dataclass
class Seen(NoObserver):
    """What a worker reports: counters summed by (metric, error type), gauges as recorded."""

    counted: Counter[tuple[str, str]] = field(default_factory=Counter)
    gauges: dict[str, list[float]] = field(default_factory=dict)

    def add(self, metric: str, value: float, attributes: Any) -> None:
        self.counted[(metric, str(attributes.get("safepoint.error", "")))] += int(value)

    def record(self, metric: str, value: float, attributes: Any) -> None:
        self.gauges.setdefault(metric, []).append(value)


def finish_in_one_step(handled: list[str]) -> Callable[[Job], Status | None]:
    def handler(job: Job) -> Status | None:
        handled.append(job.run_id)
        run = Run.open(job.store, job.run_id, lease=job.lease)
        run.append({"role": "assistant", "content": "done"})
        run.finish()
        return run.status

    return handler


def claims(log: QueryLog) -> int:
    return sum(1 for query in log.take() if query.name == "claim")


def queue(store: safepoint.Store, *run_ids: str) -> None:
    for run_id in run_ids:
        first = Checkpoint(run_id=run_id, schema_version=store.schema_version)  # saved by this code
        first.messages.append({"role": "user", "content": run_id})
        store.save(first)
        store.enqueue(run_id)


def test_an_old_worker_leaves_a_newer_run_to_the_first_new_worker(backend: Backend) -> None:
    """Chain at N beside a run whose head was saved at N+1: the others done, it untouched and
    uncounted, the drain returns after one empty claim, the gauge says 1; the first worker at N+1
    claims it."""
    with backend.open(migrations=OLD) as old:
        queue(old, "resumed-by-new-code")  # first in the queue: the head an old worker meets
    with backend.open(migrations=NEW) as newer:
        # A rolling deploy: a new worker took the run a step further, at N+1. Its first
        # checkpoint stays at N; its head (on PostgreSQL, the run row's column) says N+1.
        head = newer.load("resumed-by-new-code").next()
        head.messages.append({"role": "assistant", "content": "saved by the new deploy"})
        newer.save(head)
        assert [i.schema_version for i in newer.history("resumed-by-new-code")] == [2, 3]
    ordinary = [f"run-{i}" for i in range(4)]
    with backend.open(migrations=OLD) as old:
        queue(old, *ordinary)
        before = backend.rows("resumed-by-new-code")
        seen = Seen()
        old.observer = seen
        log = QueryLog(old)
        handled: list[str] = []
        worker = Worker(old, finish_in_one_step(handled), lease=5, poll=0.01)
        assert worker.run(stop_when_idle=True) == len(ordinary)  # returns: nothing it can take is left
        assert sorted(handled) == ordinary
        assert claims(log) == len(ordinary) + 1  # one claim per run and one that found none: no spin
        assert {old.run(r).status for r in ordinary} == {Status.DONE}
        assert seen.gauges["safepoint.queue.too_new"] == [1]
        left = old.queue_state("resumed-by-new-code")
        assert (left.queued, left.epoch, left.owner) == (True, 0, None)  # never claimed
    assert backend.rows("resumed-by-new-code") == before  # its rows as the new deploy left them
    with backend.open(migrations=NEW) as newer:
        taken: list[str] = []
        assert Worker(newer, finish_in_one_step(taken), lease=5, poll=0.01).run(stop_when_idle=True) == 1
        assert taken == ["resumed-by-new-code"]
        info = newer.run("resumed-by-new-code")
        assert (info.status, info.attempts, info.schema_version) == (Status.DONE, 0, 3)


def test_a_corrupt_run_is_quarantined_on_its_first_attempt(backend: Backend) -> None:
    """A row failing its digest: failed with CorruptCheckpoint after one claim, no backoff retries."""
    with backend.open() as store:
        queue(store, "damaged", "fine-1", "fine-2")
        # One byte more in the stored header, as a bad disk or a hand edit would leave it.
        backend.edit(
            "damaged",
            "header = header || x'20'" if backend.name == "sqlite" else "header = header || '\\x20'::bytea",
        )
        seen = Seen()
        store.observer = seen
        log = QueryLog(store)
        worker = Worker(store, finish_in_one_step([]), lease=5, poll=0.01, max_attempts=5, backoff=0.05)
        assert worker.run(stop_when_idle=True) == 3
        assert claims(log) == 4  # three runs and the empty claim: the damaged one claimed once
        info = store.run("damaged")
        assert (info.status, info.attempts) == (Status.FAILED, 1)
        assert str(info.last_error).startswith("CorruptCheckpoint: ")
        assert seen.counted[("safepoint.runs.quarantined", "CorruptCheckpoint")] == 1
        assert not store.queue_state("damaged").queued
        assert {store.run(r).status for r in ("fine-1", "fine-2")} == {Status.DONE}


def test_a_corrupt_run_of_an_encrypted_store_whose_keys_passed_the_open_check_is_quarantined(
    backend: Backend,
) -> None:
    """Encrypted, keys checked at open: a sealed header that fails to open is the row's fault,
    quarantined on its first attempt like a plain store's; the other runs are done."""
    with backend.open(encryption=keyring("k1")) as store:
        queue(store, "damaged", "fine")
    with backend.open(encryption=keyring("k1")) as store:
        sealer = store.settings.sealer  # what the worker reads to tell whose fault a digest is
        assert sealer is not None
        assert sealer.keys_checked
        backend.edit(
            "damaged",
            # SQLite's || makes text: cast back, so the row still holds bytes, one more at the end.
            "header = CAST(header || x'20' AS BLOB)"
            if backend.name == "sqlite"
            else "header = header || '\\x20'::bytea",
        )
        worker = Worker(store, finish_in_one_step([]), lease=5, poll=0.01, max_attempts=5, backoff=0.05)
        assert worker.run(stop_when_idle=True) == 2
        # Its row does not open (SQLite keeps the head's counters in the sealed header), so the
        # listing shows it as unreadable, with the run row's own status and attempts.
        info = {run.run_id: run for run in store.runs()}["damaged"]
        assert (info.status, info.attempts) == (Status.FAILED, 1)
        assert not store.queue_state("damaged").queued
        assert store.run("fine").status is Status.DONE


def test_a_checkpoint_column_edited_into_text_is_corrupt_and_quarantined(tmp_path: Path) -> None:
    """SQLite: a header blob made text loads as CorruptCheckpoint (not TypeError), quarantined at once."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with safepoint.open_store(url) as store:
        queue(store, "edited")
        with closing(sqlite3.connect(tmp_path / "q.db")) as conn, conn:
            conn.execute("UPDATE safepoint_checkpoints SET header = CAST(header AS TEXT)")
        with pytest.raises(CorruptCheckpoint, match="not stored as bytes"):
            store.load("edited")
        Worker(store, finish_in_one_step([]), lease=5, poll=0.01, backoff=0.05).run(stop_when_idle=True)
        info = store.run("edited")
        assert (info.status, info.attempts) == (Status.FAILED, 1)


def test_an_encrypted_header_edited_into_text_is_corrupt(tmp_path: Path) -> None:
    """SQLite, encrypted: a sealed header replaced by text is CorruptCheckpoint; non-UTF-8 text is
    StoreCorrupt naming only the column (sqlite3's own error quotes the value)."""
    path = tmp_path / "sealed.db"
    with safepoint.open_store(f"sqlite:///{path}", encryption=keyring("k1")) as store:
        queue(store, "as-text", "not-utf8")
        with closing(sqlite3.connect(path)) as conn, conn:
            ref = "run_ref = (SELECT id FROM safepoint_runs WHERE run_id = ?)"
            conn.execute(f"UPDATE safepoint_checkpoints SET header = 'plain text' WHERE {ref}", ("as-text",))
            conn.execute(
                f"UPDATE safepoint_checkpoints SET header = CAST(x'ff00fe41' AS TEXT) WHERE {ref}",
                ("not-utf8",),
            )
        with pytest.raises(CorruptCheckpoint, match="not stored as bytes"):
            store.load("as-text")
        with pytest.raises(safepoint.errors.StoreCorrupt) as caught:
            store.load("not-utf8")
        assert "column header is not UTF-8" in str(caught.value)
        assert "\ufffd" not in str(caught.value)  # nothing of the value quoted


def test_a_worker_whose_keyring_lacks_the_key_puts_runs_back_uncounted(backend: Backend) -> None:
    """Encrypted store: a worker holding only k2 meets MissingKey on runs sealed under k1; each is
    held back with attempts 0, the drain returns; a worker holding k1 and k2 then does them all."""
    runs = ["sealed-1", "sealed-2", "sealed-3"]
    with backend.open(encryption=keyring("k1")) as writer:
        queue(writer, *runs)
    before = {r: backend.rows(r)[1:] for r in runs}  # the checkpoint rows
    with backend.open(encryption=keyring("k2")) as keyless:
        seen = Seen()
        keyless.observer = seen
        log = QueryLog(keyless)
        # lease=1: held back for two lease periods, 2 s, past which the drain does not wait
        assert Worker(keyless, finish_in_one_step([]), lease=1, poll=0.01).run(stop_when_idle=True) == 3
        assert claims(log) == 4  # each run claimed once, then nothing claimable: no spin
        assert seen.counted[("safepoint.runs.unreadable", "MissingKey")] == 3
        assert all(keyless.queue_state(r).queued for r in runs)
    assert {r: backend.rows(r)[1:] for r in runs} == before  # nothing written to them
    with backend.open(encryption=keyring("k1", "k2")) as keyed:
        for run_id in runs:
            info = keyed.run(run_id)  # its last error is sealed: read with the key
            assert (info.status, info.attempts) == (Status.RUNNING, 0)
            assert info.retry_at is not None
            assert str(info.last_error).startswith("MissingKey: ")
        done: list[str] = []
        assert Worker(keyed, finish_in_one_step(done), lease=5, poll=0.01).run(stop_when_idle=True) == 3
        assert sorted(done) == runs
        assert {keyed.run(r).status for r in runs} == {Status.DONE}


@pytest.mark.parametrize(
    "error",
    [MissingKey("k9"), EncryptedStore(), InvalidKey("the key callable failed for key 'k1'")],
    ids=["MissingKey", "EncryptedStore", "InvalidKey"],
)
def test_key_errors_a_handler_meets_put_the_run_back_uncounted(backend: Backend, error: Exception) -> None:
    """A key error raised in the handler is the worker's fault: held back, attempts 0, the rest done."""

    def handler(job: Job) -> Status | None:
        if job.run_id == "needs-a-key":
            raise error
        return Status.DONE

    with backend.open() as store:
        queue(store, "needs-a-key", "plain")
        seen = Seen()
        store.observer = seen
        assert Worker(store, handler, lease=5, poll=0.01, max_attempts=1).run(stop_when_idle=True) == 2
        info = store.run("needs-a-key")
        assert (info.status, info.attempts) == (Status.RUNNING, 0)  # max_attempts=1, yet not quarantined
        assert str(info.last_error).startswith(f"{type(error).__name__}: ")
        assert seen.counted[("safepoint.runs.unreadable", type(error).__name__)] == 1
        assert store.claim("anyone", lease=5) is None  # held back: a worker that has the key takes it later
        assert store.run("plain").status is Status.DONE


def test_whose_fault_an_error_is() -> None:
    """A failed digest is the row's only for this run and with checked keys; key errors the worker's."""
    this = CorruptCheckpoint("r", 0, "header does not match its digest")
    assert fault(this, "r", keys_checked=True) == "row"
    assert fault(this, "r", keys_checked=False) == "worker"  # a wrong index key fails every digest alike
    assert fault(this, "another", keys_checked=True) == "attempt"
    assert fault(SchemaTooNew("r", 0, 3, 2), "r", keys_checked=True) == "worker"
    assert fault(EncryptedStore(), "r", keys_checked=True) == "worker"
    assert fault(safepoint.StoreUnavailable("down"), "r", keys_checked=True) == "store"
    assert fault(RuntimeError("handler bug"), "r", keys_checked=True) == "attempt"
