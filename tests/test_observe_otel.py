"""OpenTelemetry spans and metrics (the ``otel`` extra), with the real SDK and its in-memory exporters."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

# The otel extra is part of what `make test` installs: a missing SDK is an error here, never a skip.
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, StatusCode

import safepoint
from safepoint import Checkpoint, Conflict, LeaseLost, MigrationChain, Status, open_async_store, open_store
from safepoint.observe.otel import OpenTelemetryObserver
from safepoint.worker import Job, Worker

# A value no attribute may ever show: it is planted in every stored field.
PLANTED = "PLANTED-7f3a9c-never-exported"
# A token the scrubber's rules replace (so the save has a finding by rule).
TOKEN = "sk-proj-Zq81mXc0PfLw2RkT9vYbH4nJ6tGd3sQe"


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    meter_provider: MeterProvider

    def observer(self, **options: Any) -> OpenTelemetryObserver:
        return OpenTelemetryObserver(self.tracer_provider, self.meter_provider, **options)

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def points(self) -> dict[str, list[Any]]:
        """Every metric data point collected so far, by metric name."""
        data = self.metrics.get_metrics_data()
        out: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out

    def total(self, metric: str) -> float:
        """A counter's value, summed over its attribute sets (0 when never added to)."""
        return sum(p.value for p in self.points().get(metric, []))


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(tracer_provider, spans, reader, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def planted(run_id: str, step: int = 0) -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        step=step,
        messages=[{"role": "user", "content": f"{PLANTED} key {TOKEN}"}],
        state={"note": PLANTED, PLANTED: 1},
        counters={"tokens_in": 7},
        labels={"team": PLANTED},
    )


def test_each_operation_is_a_span_with_its_name(telemetry: Telemetry) -> None:
    """save, load, fork, gc, migrate, enqueue, claim, heartbeat and release each make one span."""
    chain = MigrationChain(current=2, migrations={1: lambda cp: cp})
    store = open_store("memory://", observer=telemetry.observer(), migrations=chain)
    cp = planted("run-a")
    cp.schema_version = 1
    store.save(cp)
    store.load("run-a")
    store.fork("run-a", new_run_id="run-b")
    store.collect_garbage()
    store.migrate_runs(["run-a"])
    store.enqueue("run-a")
    lease = store.claim("worker-1")
    assert lease is not None
    lease = store.heartbeat(lease)
    store.release(lease)
    names = [s.name for s in telemetry.finished()]
    assert names == [
        "safepoint.save",
        "safepoint.load",
        "safepoint.fork",
        "safepoint.gc",
        "safepoint.migrate",
        "safepoint.enqueue",
        "safepoint.claim",
        "safepoint.heartbeat",
        "safepoint.release",
    ]
    for span in telemetry.finished():
        assert span.attributes is not None
        assert span.attributes["safepoint.backend"] == "memory"
        assert span.attributes["safepoint.outcome"] == "ok"
    claim = telemetry.finished("safepoint.claim")[0]
    assert claim.attributes is not None
    assert claim.attributes["safepoint.claimed"] is True
    assert claim.attributes["safepoint.lease.epoch"] == lease.epoch


def test_save_span_is_a_child_of_the_callers_span(telemetry: Telemetry) -> None:
    """A save inside the caller's span is parented to it, in the same trace."""
    store = open_store("memory://", observer=telemetry.observer())
    tracer = telemetry.tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("agent.step") as caller:
        store.save(planted("run-p"))
    save = telemetry.finished("safepoint.save")[0]
    assert save.parent is not None
    assert save.parent.span_id == caller.get_span_context().span_id
    assert save.context is not None
    assert save.context.trace_id == caller.get_span_context().trace_id


def test_save_attributes_say_what_was_written(telemetry: Telemetry) -> None:
    """A save's span carries step, sizes, counts, scrub findings by rule and the lease epoch."""
    store = open_store("memory://", observer=telemetry.observer())
    cp = planted("run-s")
    store.save(cp)
    store.enqueue("run-s")
    lease = store.claim("w")
    assert lease is not None
    nxt = cp.next()
    nxt.messages.append({"role": "assistant", "content": "two"})
    nxt.messages.append({"role": "user", "content": "three"})
    store.save(nxt, lease=lease)
    first, second = (s.attributes for s in telemetry.finished("safepoint.save"))
    assert first is not None
    assert second is not None
    assert first["safepoint.step"] == 0
    assert first["safepoint.messages_added"] == 1
    assert first["safepoint.scrub.findings"] >= 1
    rules = {k for k in first if k.startswith("safepoint.scrub.") and k != "safepoint.scrub.findings"}
    assert rules, "findings are reported by rule"
    assert second["safepoint.step"] == 1
    assert second["safepoint.messages_added"] == 2
    assert second["safepoint.bytes_written"] > 0
    assert second["safepoint.blobs_written"] == 0
    assert second["safepoint.lease.epoch"] == lease.epoch


def test_blobs_written_are_counted(tmp_path: Path, telemetry: Telemetry) -> None:
    """A value over the blob threshold is one blob written, its bytes counted (SQLite, external blobs)."""
    store = open_store(f"sqlite:///{tmp_path}/s.db", observer=telemetry.observer(), blob_threshold=1024)
    cp = Checkpoint(run_id="run-blob", state={"page": "x" * 5000})
    store.save(cp)
    attributes = telemetry.finished("safepoint.save")[0].attributes
    assert attributes is not None
    assert attributes["safepoint.backend"] == "sqlite"
    assert attributes["safepoint.blobs_written"] == 1
    assert attributes["safepoint.bytes_written"] >= 5000
    assert store.load("run-blob").state["page"] == "x" * 5000


def test_no_attribute_carries_a_stored_value(telemetry: Telemetry) -> None:
    """The planted value (in messages, state keys and values, labels) is in no span or metric attribute."""
    store = open_store("memory://", observer=telemetry.observer(include_run_ids=True))
    cp = planted("run-v")
    store.save(cp)
    store.load("run-v")
    store.history("run-v")
    store.runs()
    store.fork("run-v", new_run_id="run-w")
    with pytest.raises(Conflict):
        store.save(planted("run-v"))
    shown = [repr(dict(s.attributes or {})) + s.name + repr(s.status) for s in telemetry.finished()]
    shown += [repr(dict(p.attributes)) for points in telemetry.points().values() for p in points]
    assert shown
    assert not [text for text in shown if PLANTED in text or TOKEN in text]


def test_run_ids_only_when_opted_in(telemetry: Telemetry) -> None:
    """Run and worker ids reach spans only with include_run_ids=True, and metrics never."""
    quiet = open_store("memory://", observer=telemetry.observer())
    quiet.save(planted("run-quiet"))
    quiet.enqueue("run-quiet")
    assert quiet.claim("worker-quiet") is not None
    loud = open_store("memory://", observer=telemetry.observer(include_run_ids=True))
    loud.save(planted("run-loud"))
    spans = telemetry.finished()
    for span in spans[:3]:
        assert not {"safepoint.run_id", "safepoint.worker_id"} & set(span.attributes or {})
    assert (spans[3].attributes or {})["safepoint.run_id"] == "run-loud"
    for points in telemetry.points().values():
        for point in points:
            assert "safepoint.run_id" not in point.attributes
            assert "safepoint.worker_id" not in point.attributes


def test_metrics_recorded(telemetry: Telemetry) -> None:
    """Save and load latency and size, conflicts, lost leases and claim latency are recorded;
    the worker's own metrics (retries, quarantines, queue depth) map to instruments by name."""
    observer = telemetry.observer()
    store = open_store("memory://", observer=observer)
    cp = planted("run-m")
    store.save(cp)
    store.save(cp.next())
    store.load("run-m")
    with pytest.raises(Conflict):
        store.save(planted("run-m"))
    store.enqueue("run-m")
    old = store.claim("w1", lease=0.001)
    assert old is not None
    store.release(old, requeue=True)
    with pytest.raises(LeaseLost):
        store.heartbeat(old)
    observer.add("safepoint.retries", 1, {"safepoint.operation": "claim"})
    observer.add("safepoint.runs.quarantined", 1, {})
    observer.record("safepoint.queue.depth", 5, {})
    points = telemetry.points()
    saves = points["safepoint.save.duration"]
    assert sum(p.count for p in saves) == 3
    assert {p.attributes["safepoint.outcome"] for p in saves} == {"ok", "Conflict"}
    assert sum(p.count for p in points["safepoint.load.duration"]) == 1
    assert sum(p.value for p in points["safepoint.save.bytes"]) > 0
    assert sum(p.count for p in points["safepoint.load.messages"]) == 1
    assert sum(p.value for p in points["safepoint.conflicts"]) == 1
    assert sum(p.value for p in points["safepoint.leases.lost"]) == 1
    assert sum(p.count for p in points["safepoint.claim.duration"]) == 1
    assert sum(p.value for p in points["safepoint.scrub.findings"]) >= 1
    assert [p.value for p in points["safepoint.retries"]] == [1]
    assert [p.attributes for p in points["safepoint.retries"]] == [{"safepoint.operation": "claim"}]
    assert [p.value for p in points["safepoint.runs.quarantined"]] == [1]
    assert [p.value for p in points["safepoint.queue.depth"]] == [5]
    heartbeat = telemetry.finished("safepoint.heartbeat")[0]
    assert (heartbeat.attributes or {})["safepoint.outcome"] == "LeaseLost"
    assert heartbeat.status.status_code is StatusCode.ERROR
    assert not heartbeat.events, "no exception event: its message and traceback stay out"


def test_async_store_reports_the_same_spans(telemetry: Telemetry) -> None:
    """The async twin makes the same spans with the same attributes."""

    async def main() -> None:
        store = await open_async_store("memory://", observer=telemetry.observer())
        cp = planted("run-async")
        await store.save(cp)
        await store.load("run-async")
        await store.close()

    asyncio.run(main())
    save, load = telemetry.finished()
    assert (save.name, load.name) == ("safepoint.save", "safepoint.load")
    assert (save.attributes or {})["safepoint.messages_added"] == 1
    assert (load.attributes or {})["safepoint.messages"] == 1


class BrokenObserver:
    """An observer whose every method raises."""

    def span(self, name: str, attributes: Any) -> Any:
        raise RuntimeError("observer down")

    def add(self, metric: str, value: float, attributes: Any) -> None:
        raise RuntimeError("observer down")

    def record(self, metric: str, value: float, attributes: Any) -> None:
        raise RuntimeError("observer down")


def test_a_broken_observer_never_breaks_a_save() -> None:
    """An observer that raises is ignored: the save, load and claim go on."""
    store = open_store("memory://", observer=BrokenObserver())
    store.save(planted("run-x"))
    assert store.load("run-x").state["note"] == PLANTED
    with pytest.raises(Conflict):  # the call's own error still reaches the caller
        store.save(planted("run-x"))


def test_without_the_extra_safepoint_works_and_the_otel_module_names_it(tmp_path: Path) -> None:
    """Without OpenTelemetry, import and save work; observe.otel raises an ImportError naming the extra."""
    script = f"""
import sys
sys.modules["opentelemetry"] = None
import safepoint
store = safepoint.open_store("sqlite:///{tmp_path}/x.db")
store.save(safepoint.Checkpoint(run_id="r"))
assert store.load("r").step == 0
assert not [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None]
try:
    import safepoint.observe.otel
except ImportError as exc:
    print("ERROR", type(exc).__name__, exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "ERROR ImportError" in done.stdout
    assert "safepoint[otel]" in done.stdout


def test_the_observer_is_not_exported_from_the_package() -> None:
    """``import safepoint`` does not import OpenTelemetry (the extra stays optional)."""
    assert "OpenTelemetryObserver" not in safepoint.__all__


def test_one_histogram_record_per_save_and_the_size_is_counted(telemetry: Telemetry) -> None:
    """A save records one histogram (its latency); the bytes counter sums the spans' bytes_written."""
    store = open_store("memory://", observer=telemetry.observer())
    cp = planted("run-h")
    store.save(cp)
    for step in range(1, 4):
        cp = cp.next()
        cp.messages.append({"role": "assistant", "content": f"reply {step} " * 50})
        store.save(cp)
    histograms = {name for name, points in telemetry.points().items() if hasattr(points[0], "count")}
    assert histograms == {"safepoint.save.duration"}
    assert sum(p.count for p in telemetry.points()["safepoint.save.duration"]) == 4
    written = [(s.attributes or {})["safepoint.bytes_written"] for s in telemetry.finished("safepoint.save")]
    assert telemetry.total("safepoint.save.bytes") == sum(written) > 0
    # A reader collecting again sees the same cumulative sums, not zeros or doubles.
    assert telemetry.total("safepoint.save.bytes") == sum(written)


def test_an_unrecorded_span_still_saves_and_metrics_still_count() -> None:
    """With a sampler that records nothing, no span is exported and metrics are still reported."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry = Telemetry(tracer_provider, spans, reader, MeterProvider(metric_readers=[reader]))
    store = open_store("memory://", observer=telemetry.observer())
    store.save(planted("run-off"))
    with pytest.raises(Conflict):
        store.save(planted("run-off"))
    assert store.load("run-off").step == 0
    assert telemetry.finished() == []
    assert sum(p.count for p in telemetry.points()["safepoint.save.duration"]) == 2
    assert telemetry.total("safepoint.conflicts") == 1


def test_a_release_with_what_a_worker_records_is_one_span_and_counts_a_lost_lease_once(
    telemetry: Telemetry,
) -> None:
    """``store.release`` with the attempt count, ``retry_at`` and error a worker records is one
    release span, timed, its lost lease counted once: the worker's release is this call."""
    store = open_store("memory://", observer=telemetry.observer())
    store.save(planted("run-r"))
    store.enqueue("run-r")
    lease = store.claim("w")
    assert lease is not None
    store.release(lease, requeue=True, attempts="uncount", error="RuntimeError: boom")
    again = store.claim("w")
    assert again is not None
    store.revoke_lease("run-r")
    with pytest.raises(LeaseLost):
        store.release(again, status=Status.DONE, attempts="reset", retry_at=datetime.now(UTC))
    released = telemetry.finished("safepoint.release")
    assert [(s.attributes or {})["safepoint.outcome"] for s in released] == ["ok", "LeaseLost"]
    assert (released[0].attributes or {})["safepoint.requeue"] is True
    assert (released[1].attributes or {})["safepoint.status"] == "done"
    assert (released[1].attributes or {})["safepoint.lease.epoch"] == again.epoch
    assert sum(p.count for p in telemetry.points()["safepoint.release.duration"]) == 2
    assert telemetry.total("safepoint.leases.lost") == 1


def _worker_store(telemetry: Telemetry, runs: int) -> safepoint.Store:
    store = open_store("memory://", observer=telemetry.observer())
    for n in range(runs):
        store.save(Checkpoint(run_id=f"run-{n}"))
        store.enqueue(f"run-{n}")
    return store


def test_a_worker_makes_one_release_span_per_run(telemetry: Telemetry) -> None:
    """Each run a Worker finishes is released once, as one ``safepoint.release`` span."""
    store = _worker_store(telemetry, 3)

    def handler(job: Job) -> Status:
        job.save(job.checkpoint.next())
        return Status.DONE

    assert Worker(store, handler, heartbeat=60).run(stop_when_idle=True) == 3
    released = telemetry.finished("safepoint.release")
    assert len(released) == 3
    assert {(s.attributes or {})["safepoint.outcome"] for s in released} == {"ok"}


def test_a_worker_counts_a_lost_lease_once(telemetry: Telemetry) -> None:
    """A lease lost mid-run (revoked: its save is fenced off) is one count of leases.lost, not two."""
    store = _worker_store(telemetry, 1)

    def handler(job: Job) -> Status:
        store.revoke_lease(job.run_id)
        job.save(job.checkpoint.next())  # LeaseLost
        return Status.DONE

    Worker(store, handler, heartbeat=60).run(max_runs=1)
    saves = telemetry.finished("safepoint.save")
    assert (saves[-1].attributes or {})["safepoint.outcome"] == "LeaseLost"
    assert telemetry.total("safepoint.leases.lost") == 1


def test_a_store_without_an_observer_imports_no_opentelemetry(tmp_path: Path) -> None:
    """With the extra installed but no observer given, saving and loading import no OpenTelemetry."""
    script = f"""
import sys
import safepoint
store = safepoint.open_store("sqlite:///{tmp_path}/plain.db")
store.save(safepoint.Checkpoint(run_id="r", messages=[{{"role": "user", "content": "hi"}}]))
assert store.load("r").step == 0
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_spans_inside_a_call_are_its_children_and_a_no_op_tracer_hides_nothing(telemetry: Telemetry) -> None:
    """Inside an observed call its span is current (a database driver's spans nest under it);
    with traces off (a no-op tracer) the caller's span stays current instead."""
    agent = telemetry.tracer_provider.get_tracer("agent")
    with agent.start_as_current_span("agent.step") as caller:
        with telemetry.observer().span("safepoint.save", {"safepoint.backend": "memory"}):
            agent.start_span("driver.query").end()
        metrics_only = OpenTelemetryObserver(NoOpTracerProvider(), telemetry.meter_provider)
        with metrics_only.span("safepoint.save", {"safepoint.backend": "memory"}):
            assert trace.get_current_span().get_span_context() == caller.get_span_context()
    save = telemetry.finished("safepoint.save")[0]
    query = telemetry.finished("driver.query")[0]
    assert query.parent is not None
    assert save.context is not None
    assert query.parent.span_id == save.context.span_id


def test_a_child_forked_while_a_counter_was_locked_still_counts(telemetry: Telemetry) -> None:
    """A process forked while another thread held a counter's lock gets fresh locks: its adds
    (a save's, a retry's) do not wait forever on a lock nobody in the child will release."""
    observer = telemetry.observer()
    observer.add("safepoint.conflicts", 1, {})
    total = observer._sinks["safepoint.conflicts"].__self__  # type: ignore[attr-defined]
    with total._lock:
        pid = os.fork()
        if pid == 0:  # the child: a hang here is the bug
            observer.add("safepoint.conflicts", 1, {})
            observer.add("safepoint.retries", 1, {"safepoint.operation": "save"})
            os._exit(0)
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the counter's inherited lock")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_an_observed_worker_gauges_the_queue_depth(telemetry: Telemetry) -> None:
    """``safepoint.queue.depth`` from the worker's loop: 3 queued, one just claimed, 2 left."""
    store = _worker_store(telemetry, 3)
    Worker(store, lambda job: Status.DONE, heartbeat=60).run(max_runs=1)
    assert [p.value for p in telemetry.points()["safepoint.queue.depth"]] == [2]
