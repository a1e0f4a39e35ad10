"""OpenTelemetry spans and metrics for safepoint (the ``otel`` extra).

    from safepoint import open_store
    from safepoint.observe.otel import OpenTelemetryObserver

    store = open_store("postgresql://…", observer=OpenTelemetryObserver())

Each store operation becomes a span (``safepoint.save``, ``safepoint.load``,
``safepoint.claim`` …) parented to the caller's current span, and each
measurement a metric (``safepoint.observe.METRICS``), on the global tracer
and meter providers unless others are given. This module alone imports
OpenTelemetry — only the API; the application configures the SDK and its
exporters — so without the extra nothing else changes.

Attributes carry no stored value. Run and worker ids
(``safepoint.observe.IDENTIFIERS``) reach spans only with
``include_run_ids=True``, and metrics never (one time series per run).
Nothing here raises into a store call: an error inside OpenTelemetry is
dropped, so observing can never break a save.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Status, StatusCode
except ImportError as exc:
    raise ImportError(
        "safepoint.observe.otel needs OpenTelemetry: pip install 'safepoint[otel]'", name="opentelemetry"
    ) from exc

from safepoint.observe import IDENTIFIERS, METRICS, Attributes, Metric
from safepoint.version import __version__

__all__ = ["OpenTelemetryObserver"]

_Sink = Callable[[int | float, Attributes], None]  # an instrument's add, set or record

_SCOPE = "safepoint"
# Latency buckets in seconds, from a memory-store save (tens of microseconds)
# to a PostgreSQL save behind a slow network or a lock wait (seconds); the
# SDK's default buckets (0, 5, 10, 25 …) would put every save in the first.
_SECONDS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Sizes in bytes and counts: powers of four, from one small message to a large blob.
_BYTES = tuple(float(4**n) for n in range(4, 15))
_COUNTS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0)


_NO_IDS = IDENTIFIERS.isdisjoint  # one C-level pass over the keys


def _without_ids(attributes: Attributes) -> Attributes:
    """``attributes`` less run and worker ids; itself when it has none (the usual case: no copy)."""
    if _NO_IDS(attributes):
        return attributes
    return {key: value for key, value in attributes.items() if key not in IDENTIFIERS}


class _Span:
    """One OpenTelemetry span, current while the store's call runs.

    A save's cost here is mostly the SDK's: creating the span, cleaning each
    attribute, ending and queueing it (``bench/sections/otel.py``). So this
    adds as little as it can: one object is both the context manager and
    the ``Span``; every attribute, the ones known at the start too, goes to
    the SDK in one ``set_attributes`` as the call ends (the SDK locks and
    cleans per call, so one call instead of two saves a few microseconds a
    save; a sampler sees the span's name, not its attributes); and a span
    the sampler does not record collects nothing.
    """

    __slots__ = ("_attributes", "_ids", "_later", "_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: trace.Tracer, name: str, attributes: Attributes, ids: bool) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._ids = ids
        self._span: trace.Span = trace.INVALID_SPAN
        self._token: Any = None
        # What goes on the span when it ends; None while it is not recording.
        self._later: dict[str, str | int | float | bool] | None = None

    def __enter__(self) -> _Span:
        try:
            # Outcome and status are set on exit, from the error's type only:
            # a recorded exception would carry its message and traceback.
            span = self._tracer.start_span(self._name, record_exception=False, set_status_on_exception=False)
            self._span = span
            # Current even when not recording, so that spans inside the call
            # (a database driver's) are its children and share its sampling;
            # but not a no-op tracer's invalid span, which would hide the
            # caller's span from them.
            if span.get_span_context().is_valid:
                self._token = otel_context.attach(trace.set_span_in_context(span))
            if span.is_recording():
                attributes = self._attributes
                if self._ids or _NO_IDS(attributes):
                    self._later = dict(attributes)
                else:
                    self._later = {key: value for key, value in attributes.items() if key not in IDENTIFIERS}
        except Exception:  # OpenTelemetry's own failure must not stop the call
            self._span, self._token = trace.INVALID_SPAN, None
        return self

    def set(self, key: str, value: str | int | float | bool) -> None:
        later = self._later
        if later is not None and (self._ids or key not in IDENTIFIERS):
            later[key] = value

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        later = self._later
        try:
            if later is not None:
                later["safepoint.outcome"] = "ok" if kind is None else kind.__name__
                span.set_attributes(later)
                if kind is not None:
                    span.set_status(Status(StatusCode.ERROR, kind.__name__))
            if self._token is not None:
                otel_context.detach(self._token)
            span.end()
        except Exception:  # see __enter__
            pass


class _Total:
    """A counter summed here and read by the SDK when it collects (an observable counter).

    Adding is a dictionary update under a lock, where the SDK's synchronous
    counter would take each value through its measurement pipeline (about
    as dear as the span, per call, in ``bench/sections/otel.py``). What is
    exported is the same cumulative sum per attribute set; a reader asking
    for deltas gets them from the SDK. Attribute sets stay few: metric
    attributes never carry ids.
    """

    __slots__ = ("__weakref__", "_attributes", "_lock", "_values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[frozenset[tuple[str, Any]], int | float] = {}
        self._attributes: dict[frozenset[tuple[str, Any]], dict[str, Any]] = {}
        _LOCKED.add(self)

    def add(self, value: int | float, attributes: Attributes) -> None:
        if not value >= 0:  # a counter only goes up (the SDK drops these too); NaN fails as well
            return
        key = frozenset(attributes.items())
        with self._lock:
            values = self._values
            if key in values:
                values[key] += value
            else:
                values[key] = value
                self._attributes[key] = dict(attributes)

    def observe(self, options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        del options
        with self._lock:
            return [metrics.Observation(value, self._attributes[key]) for key, value in self._values.items()]


# Whatever holds a lock here, so that a child forked while another thread held
# one does not wait on it forever (the child's first save would hang): the
# child starts with fresh locks.
_LOCKED: weakref.WeakSet[_Total | OpenTelemetryObserver] = weakref.WeakSet()


def _fresh_locks() -> None:
    for holder in list(_LOCKED):
        holder._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks)


class OpenTelemetryObserver:
    """A ``safepoint.observe.Observer`` reporting to OpenTelemetry.

    ``tracer_provider`` and ``meter_provider`` default to the global ones
    (``opentelemetry.trace.set_tracer_provider`` …), looked up once here.
    ``include_run_ids=True`` adds ``safepoint.run_id`` (and the worker and
    forked run's ids) to spans — useful for finding one run's trace, at the
    cost of exporting identifiers; metrics never carry them.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        include_run_ids: bool = False,
    ) -> None:
        if type(include_run_ids) is not bool:
            raise TypeError("include_run_ids must be True or False")
        self.include_run_ids = include_run_ids
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        self._meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
        self._sinks: dict[str, _Sink] = {}
        self._lock = threading.Lock()
        _LOCKED.add(self)

    def span(self, name: str, attributes: Attributes) -> _Span:
        return _Span(self._tracer, name, attributes, self.include_run_ids)

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        try:
            sink = self._sinks.get(metric) or self._create(metric, "counter")
            sink(value, _without_ids(attributes))  # the SDK copies the attributes it keeps
        except Exception:  # observing never breaks a store call
            pass

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        try:
            sink = self._sinks.get(metric) or self._create(metric, "histogram")
            sink(value, _without_ids(attributes))
        except Exception:  # as in add
            pass

    def _create(self, name: str, default_kind: str) -> _Sink:
        """What takes ``name``'s values: its instrument's add, set or record, made on first use."""
        with self._lock:  # two threads meeting a new name create one instrument
            sink = self._sinks.get(name)
            if sink is None:
                sink = self._make(name, METRICS.get(name) or _guess(name, default_kind))
                self._sinks[name] = sink
            return sink

    def _make(self, name: str, metric: Metric) -> _Sink:
        meter = self._meter
        if metric.kind == "counter":
            total = _Total()
            meter.create_observable_counter(
                name, callbacks=[total.observe], unit=metric.unit, description=metric.description
            )
            return total.add
        if metric.kind == "gauge":
            return meter.create_gauge(name, unit=metric.unit, description=metric.description).set
        buckets: Sequence[float] = (
            _SECONDS if metric.unit == "s" else _BYTES if metric.unit == "By" else _COUNTS
        )
        return meter.create_histogram(
            name,
            unit=metric.unit,
            description=metric.description,
            explicit_bucket_boundaries_advisory=buckets,
        ).record


def _guess(name: str, kind: str) -> Metric:
    """A metric ``METRICS`` does not list (a newer caller's): kind from the call, unit from the name."""
    unit = "s" if name.endswith(".duration") else "By" if name.endswith(".bytes") else "1"
    return Metric("counter" if kind == "counter" else "histogram", unit, "")
