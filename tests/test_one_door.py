"""One door into every transaction (issue 31): the worker is a client of the public store.

A claimed run driven by the documented handler (``job.open_run()``) makes
exactly the named queries its work needs, counted with ``QueryLog``: the
claim, one load of the head, the step's save, the release — no second load
and no row read, on either backend. The worker's release, with the attempt
count, ``retry_at`` and error it records, is ``Store.release`` (sync and
async alike), one ``safepoint.release`` span on an observed store; its idle
reads are ``claimable_in`` and ``queue_too_new``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import safepoint
from safepoint import Checkpoint, InvalidArgument, Job, Keyring, Reconcile, Secrets, Status, Worker
from safepoint.observe.otel import OpenTelemetryObserver
from safepoint.testing.conformance import QueryLog

TOKEN = "sk-proj-Zq81mXc0PfLw2RkT9vYbH4nJ6tGd3sQe"  # a token the scrubber's rules replace
SECRET = "hunter2-registered-secret-value"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'door.db'}"
        return
    dsn = request.getfixturevalue("postgres_dsn")
    yield f"{dsn}?schema={request.getfixturevalue('pg_schema')}"


def queued(store: safepoint.Store, run_id: str = "one") -> None:
    first = Checkpoint(run_id=run_id)
    first.messages.append({"role": "user", "content": "do one step"})
    store.save(first)
    store.enqueue(run_id)


def test_a_claimed_one_step_run_makes_only_the_queries_its_work_needs(url: str) -> None:
    """The documented handler, one step, then SIGTERM (``worker.stop``): the queries of the
    whole ``worker.run()`` — nothing is left out. The worker stops after the run, so it
    never polls an empty queue (no ``next_claimable``), and its store has no observer, so
    it reads no gauge (no ``queue_depth``); its heartbeat (every 20 s) never comes."""
    with safepoint.open_store(url) as store:
        queued(store)
        log = QueryLog(store)

        def handler(job: Job) -> Status | None:
            run = job.open_run()
            while run.active:
                if job.stopping:
                    return None  # back to the queue; the next worker resumes it
                run.append({"role": "assistant", "content": "one step"})
                run.commit()
                worker.stop()  # as SIGTERM would, after the first step
            return run.status

        worker = Worker(store, handler, lease=60)
        assert worker.run() == 1
        names = [query.name for query in log.take()]
        save = ["run_head", "insert_checkpoint"] if store.driver.dialect == "sqlite" else ["save_next"]
        assert names == ["claim", "checkpoint_latest", "view_span", *save, "release"]
        info = store.run("one")
        assert (info.head_step, info.status, info.attempts) == (1, Status.RUNNING, 0)  # given back
        assert store.queue_state("one").queued


def job_of(store: safepoint.Store, run_id: str) -> Job:
    """A claimed run as a ``Worker`` hands it to its handler (a real claim and load)."""
    lease = store.claim("w", lease=60)
    assert lease is not None
    assert lease.run_id == run_id
    return Job(store, lease, store.load(run_id), threading.Event())


def test_open_run_keeps_what_open_checks(tmp_path: Path) -> None:
    """A quarantined run queued again stays failed (the claim's row status, no row read); a
    pending action goes to its reconcile hook; a run over budget fails as open would."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'checks.db'}") as store:
        queued(store, "quarantined")
        lease = store.claim("w", lease=60)
        assert lease is not None
        store.release(lease, status=Status.FAILED, error="RuntimeError: out of attempts")
        store.enqueue("quarantined")  # enqueue, not requeue: the row stays failed
        log = QueryLog(store)
        run = job_of(store, "quarantined").open_run()
        assert (run.active, run.status) == (False, Status.FAILED)
        assert "run_info" not in [query.name for query in log.take()]

        pending = Checkpoint(run_id="pending")
        pending.pending_action = {
            "kind": "action", "tool": "pay", "args": {}, "key": "k", "step": 0, "call": 0,
        }  # fmt: skip
        store.save(pending)
        store.enqueue("pending")
        run = job_of(store, "pending").open_run(reconcile={"pay": Reconcile.skip("paid")})
        assert run.action("pay", {}, lambda key: pytest.fail("skipped: never called")) == "paid"

        spent = Checkpoint(run_id="spent", counters={"tokens_in": 10, "budget_tokens": 5})
        store.save(spent)
        store.enqueue("spent")
        with pytest.raises(safepoint.BudgetExceeded):
            job_of(store, "spent").open_run()
        assert store.load("spent").status is Status.FAILED


def test_open_run_loads_again_once_the_run_moved_on(tmp_path: Path) -> None:
    """After a first ``Run`` of the job committed, or a ``job.save``, the loaded checkpoint is
    no longer the head: the next ``open_run`` loads it again instead of meeting a Conflict."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'again.db'}") as store:
        queued(store)
        job = job_of(store, "one")
        job.open_run().commit()
        second = job.open_run()
        assert second.step == 1  # the head the first Run saved
        second.commit()
        job.save(store.load("one").next())
        assert job.open_run().step == 3


def test_release_records_what_a_worker_records(tmp_path: Path) -> None:
    """attempts, retry_at and error through the public API: the error scrubbed (a token, a
    registered secret), escaped and cut to 500 characters; bad arguments refused, typed."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'r.db'}", secrets=Secrets({"API": SECRET})) as store:
        queued(store)
        lease = store.claim("w", lease=60)
        assert lease is not None
        for bad in (
            {"attempts": "twice"},
            {"retry_at": 12},
            {"error": b"x"},
            {"attempts": "reset", "error": "e"},
        ):
            with pytest.raises(InvalidArgument):
                store.release(lease, **bad)  # type: ignore[arg-type]
        later = datetime.now(UTC) + timedelta(hours=1)
        error = f"RuntimeError: {TOKEN} {SECRET}\x1b[2J" + "x" * 1000
        store.release(lease, requeue=True, attempts="uncount", retry_at=later, error=error)
        info = store.run("one")
        assert info.attempts == 0
        assert info.retry_at == later
        assert info.last_error is not None
        assert len(info.last_error) == 500
        assert info.last_error.startswith("RuntimeError: [REDACTED:openai-api-key] [SECRET:API]\\x1b[2J")
        assert store.claim("w", lease=60) is None  # held back until retry_at
        assert store.claimable_in() is not None
        assert store.claimable_in() > timedelta(minutes=59)  # type: ignore[operator]
        store.requeue("one")
        lease = store.claim("w", lease=60)
        assert lease is not None
        store.release(lease, status="done", attempts="reset")
        info = store.run("one")
        assert (info.status, info.attempts, info.last_error) == (Status.DONE, 0, None)


def test_release_on_an_encrypted_store_seals_the_error(tmp_path: Path) -> None:
    path = tmp_path / "sealed.db"
    keys = Keyring.from_text("index:" + "A" * 43 + "= k1:" + "B" * 43 + "=")
    with safepoint.open_store(f"sqlite:///{path}", encryption=keys) as store:
        queued(store)
        lease = store.claim("w", lease=60)
        assert lease is not None
        store.release(lease, requeue=True, error="ValueError: PLAIN-WORDS")
        assert store.run("one").last_error == "ValueError: PLAIN-WORDS"
    with closing(sqlite3.connect(path)) as conn:
        ((stored,),) = conn.execute("SELECT last_error FROM safepoint_runs").fetchall()
    assert "PLAIN-WORDS" not in str(stored)


def test_the_async_store_releases_and_reads_the_queue_alike(tmp_path: Path) -> None:
    async def main() -> None:
        async with await safepoint.open_async_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
            assert await store.claimable_in() is None
            assert await store.queue_too_new() == 0
            await store.save(Checkpoint(run_id="one"))
            await store.enqueue("one")
            assert await store.claimable_in() == timedelta(0)
            lease = await store.claim("w", lease=60)
            assert lease is not None
            assert lease.run_status is Status.RUNNING
            with pytest.raises(InvalidArgument):
                await store.release(lease, attempts="never")  # type: ignore[arg-type]
            retry_at = datetime.now(UTC) + timedelta(minutes=5)
            await store.release(lease, requeue=True, retry_at=retry_at, error=f"E: {TOKEN}")
            info = await store.run("one")
            assert (info.attempts, info.last_error) == (1, "E: [REDACTED:openai-api-key]")
            assert timedelta(minutes=4) < (await store.claimable_in() or timedelta(0)) <= timedelta(minutes=5)

    asyncio.run(main())


def test_queue_too_new_counts_runs_this_store_leaves_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    with safepoint.open_store(url, schema_version=2) as newer:
        newer.save(Checkpoint(run_id="newer", schema_version=2))
        newer.enqueue("newer")
    with safepoint.open_store(url) as older:
        assert (older.queue_too_new(), older.claimable_in(), older.claim("w")) == (1, None, None)


def test_an_observed_workers_release_is_one_release_span() -> None:
    """The worker's release is ``store.release``: one span with the attributes and duration
    it always had; the worker's gauges are the store's own read calls, spanned alike."""
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    observer = OpenTelemetryObserver(tracer, MeterProvider(metric_readers=[reader]))
    with safepoint.open_store("memory://", observer=observer) as store:
        queued(store)

        def handler(job: Job) -> Status:
            run = job.open_run()
            run.finish()
            return run.status

        assert Worker(store, handler, heartbeat=60).run(stop_when_idle=True) == 1
        lease_epoch = store.queue_state("one").epoch
    released = [s for s in spans.get_finished_spans() if s.name == "safepoint.release"]
    assert len(released) == 1
    attributes = dict(released[0].attributes or {})
    assert attributes == {
        "safepoint.backend": "memory",
        "safepoint.lease.epoch": lease_epoch,
        "safepoint.requeue": False,
        "safepoint.status": "done",
        "safepoint.outcome": "ok",
    }
    data = reader.get_metrics_data()
    points = {
        metric.name: metric.data.data_points
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert sum(p.count for p in points["safepoint.release.duration"]) == 1
    assert "safepoint.leases.lost" not in points
    names = {s.name for s in spans.get_finished_spans()}
    assert {"safepoint.queue_depth", "safepoint.queue_too_new", "safepoint.claimable_in"} <= names
    tracer.shutdown()
