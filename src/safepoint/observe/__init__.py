"""The observability hook: what the store and the workers report, to whoever listens.

A store calls its ``observer`` around each operation (a *span*) and for each
event worth counting (a *metric*). The default observer does nothing and
costs one attribute lookup; ``safepoint.observe.otel`` (the ``otel`` extra)
turns the same calls into OpenTelemetry spans and metrics. Attributes never
carry a stored value: backend, step, sizes, counts, rule names, epochs,
outcomes — and run ids only when the user opts in.

The hook is the public trace hook too: anything with these three methods can
be passed as ``open_store(url, observer=…)``. An observer that also has a
``query`` method (a :class:`QueryObserver`) sees each statement the store's
driver runs: every named query of an operation (``load_head``,
``insert_checkpoint`` …), by name, with its duration in seconds and the
attributes ``safepoint.dialect`` (``sqlite`` or ``postgresql``),
``safepoint.rows`` (rows it returned) and, for a batch, ``safepoint.batch``
(parameter sets). On SQLite the transaction's ``BEGIN`` (``BEGIN
IMMEDIATE``) and ``COMMIT`` are statements of their own and are reported
under their text; on PostgreSQL they travel with the queries and are not
(the per-transaction ``set_search_path`` is). An observer without ``query``
(``OpenTelemetryObserver``, the default) costs the drivers nothing.

What the store reports (``METRICS`` lists the metrics): a span per public
operation — ``safepoint.save``, ``.load``, ``.fork``, ``.gc``, ``.migrate``,
``.claim``, ``.heartbeat``, ``.release``, ``.enqueue`` and the read calls —
and, per operation, ``<span name>.duration`` in seconds. Span attributes may
include the identifiers in ``IDENTIFIERS`` (run and worker ids); an observer
that exports them should drop them unless its user opted in, as
``OpenTelemetryObserver`` does. Metric attributes never carry them (one time
series per run would swamp any metrics backend).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Attributes = Mapping[str, str | int | float | bool]

# Span attributes that name a run or a worker: exported only when the user opts in.
IDENTIFIERS = frozenset({"safepoint.run_id", "safepoint.new_run_id", "safepoint.worker_id"})


@dataclass(frozen=True, slots=True)
class Metric:
    """How a metric is meant to be exported: instrument kind, UCUM unit, description."""

    kind: Literal["counter", "histogram", "gauge"]
    unit: str
    description: str


def _duration(operation: str) -> Metric:
    return Metric("histogram", "s", f"Time a store {operation} took, as the caller saw it")


# Every metric safepoint reports by name. An observer may meet others (a newer
# worker's): ``add`` is then a counter and ``record`` a histogram.
METRICS: Mapping[str, Metric] = {
    "safepoint.save.duration": _duration("save"),
    "safepoint.load.duration": _duration("load"),
    "safepoint.fork.duration": _duration("fork"),
    "safepoint.gc.duration": _duration("garbage collection"),
    "safepoint.migrate.duration": _duration("eager migration batch"),
    "safepoint.claim.duration": _duration("claim"),
    "safepoint.heartbeat.duration": _duration("heartbeat"),
    "safepoint.release.duration": _duration("release"),
    "safepoint.enqueue.duration": _duration("enqueue"),
    # A counter, not a histogram: one histogram record per save (its latency)
    # is what the SDK's cost allows; the span carries each save's own size.
    "safepoint.save.bytes": Metric("counter", "By", "Bytes saves wrote: new message bodies and blobs"),
    "safepoint.load.messages": Metric("histogram", "{message}", "Messages in a loaded checkpoint"),
    "safepoint.blobs.written": Metric("counter", "{blob}", "Blobs saves wrote"),
    "safepoint.scrub.findings": Metric("counter", "{finding}", "Values the scrubber replaced, by rule"),
    "safepoint.conflicts": Metric("counter", "{conflict}", "Saves refused as not the next step"),
    "safepoint.leases.lost": Metric("counter", "{lease}", "Saves, heartbeats and releases fenced off"),
    "safepoint.retries": Metric("counter", "{retry}", "Transient store errors retried, by operation"),
    "safepoint.runs.quarantined": Metric("counter", "{run}", "Runs released as failed after max_attempts"),
    "safepoint.runs.too_new": Metric("counter", "{run}", "Claimed runs saved by newer code, held back"),
    "safepoint.runs.unreadable": Metric(
        "counter", "{run}", "Claimed runs the worker's keyring could not read, held back"
    ),
    "safepoint.queue.depth": Metric("gauge", "{run}", "Runs queued and claimable"),
    "safepoint.queue.too_new": Metric(
        "gauge", "{run}", "Queued runs newer than the worker, left to newer code"
    ),
}


class Span(Protocol):
    """An operation in progress: more attributes can be set before it ends."""

    def set(self, key: str, value: str | int | float | bool) -> None: ...


class Observer(Protocol):
    """What a store and its workers report. Each method must be cheap and must never raise."""

    def span(self, name: str, attributes: Attributes) -> Any:
        """A context manager timing one operation (``safepoint.save``, ``safepoint.claim`` …),
        parented to the caller's current span; it yields a :class:`Span`. An
        exception leaving it marks the span's outcome as that error's type."""
        ...

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        """Add to a counter (``safepoint.retries``, ``safepoint.runs.quarantined`` …)."""
        ...

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        """Record one measurement of a histogram or gauge (``safepoint.save.duration`` …)."""
        ...


QueryHook = Callable[[str, float, Attributes], None]


class QueryObserver(Observer, Protocol):
    """An observer that also sees each statement a driver runs (statement-level tracing)."""

    def query(self, name: str, seconds: float, attributes: Attributes) -> None:
        """One statement ran: ``name`` (the named query, or ``BEGIN``/``COMMIT`` on SQLite),
        how long it took as the driver saw it (sent until its rows were read), and
        ``safepoint.dialect``, ``safepoint.rows``, ``safepoint.batch``. Never a
        parameter or a row's value. Called on the thread that runs the operation,
        inside the operation's span; it must be cheap and must never raise."""
        ...


def query_hook(observer: Observer) -> QueryHook | None:
    """What a driver calls per statement: ``observer.query``, or None when the observer has none."""
    hook = getattr(observer, "query", None)  # optional: observers written before it stay valid
    return hook if callable(hook) else None


class _NoSpan:
    """A span that records nothing, and its own context manager (no generator to drive)."""

    __slots__ = ()

    def set(self, key: str, value: str | int | float | bool) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


_NO_SPAN = _NoSpan()
NO_SPAN: Span = _NO_SPAN  # what an observer's failed span stands in for


class NoObserver:
    """The default: reports nothing."""

    def span(self, name: str, attributes: Attributes) -> _NoSpan:
        del name, attributes
        return _NO_SPAN

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass


NO_OBSERVER = NoObserver()
