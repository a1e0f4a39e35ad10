"""A span around one store call, with its metrics: the ``Operation`` machinery.

An ``Operation`` opens the observer's span (parented to the caller's current
span), times the call, and on the way out records ``<span name>.duration``,
counts the errors worth alerting on (conflicts, lost leases) and passes the
error, if any, to the span, which marks its outcome with the error's type
name. What each store call reports in it is ``store_calls.py``'s.

An observer that raises is ignored: observing must never break a save.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from safepoint.errors import Conflict, LeaseLost
from safepoint.observe import METRICS, NO_SPAN, Attributes, Observer, Span

AttributeDict = dict[str, str | int | float | bool]


class Operation:
    """One observed store call, as a context manager: ``with Operation(...) as op: ... op.set(k, v)``.

    What it adds to the observer's own cost is kept to a few dictionary
    operations: the metric names and the ``backend``/``outcome`` attribute
    sets are made once per process (``_duration``, ``_base``) and shared,
    read-only, by every call; a save records one histogram (its latency).
    """

    __slots__ = ("_backend", "_manager", "_measures", "_name", "_observer", "_span", "_start")

    def __init__(self, observer: Observer, name: str, backend: str, attributes: AttributeDict) -> None:
        self._observer = observer
        self._name = name
        self._backend = backend
        attributes["safepoint.backend"] = backend
        self._measures: list[tuple[str, int | float, Attributes | None]] | None = None
        try:
            self._manager: Any = observer.span(name, attributes)
        except Exception:  # a broken observer must not stop the call
            self._manager = None
        self._span: Span = NO_SPAN
        self._start = 0.0

    def __enter__(self) -> Operation:
        manager = self._manager
        if manager is not None:
            try:
                self._span = manager.__enter__()
            except Exception:  # see __init__
                self._manager, self._span = None, NO_SPAN
        self._start = time.perf_counter()
        return self

    def set(self, key: str, value: str | int | float | bool) -> None:
        """Add an attribute to the span (a fact learnt during the call)."""
        try:  # noqa: SIM105  (cheaper than contextlib.suppress, per attribute)
            self._span.set(key, value)
        except Exception:  # see __init__
            pass

    def update(self, attributes: AttributeDict) -> None:
        """``set`` each of ``attributes`` (one call for a save's several facts)."""
        span = self._span
        try:
            for key, value in attributes.items():
                span.set(key, value)
        except Exception:  # see __init__
            pass

    def measure(self, metric: str, value: int | float, attributes: Attributes | None = None) -> None:
        """Record ``metric`` on the way out, with the operation's backend and outcome."""
        if self._measures is None:
            self._measures = [(metric, value, attributes)]
        else:
            self._measures.append((metric, value, attributes))

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        elapsed = time.perf_counter() - self._start
        observer = self._observer
        outcome = "ok" if kind is None else kind.__name__
        base = _BASES.get((self._backend, outcome)) or _base(self._backend, outcome)
        # Metrics first, while the span is still current: an SDK that keeps
        # exemplars links them to this span.
        try:
            observer.record(_DURATIONS.get(self._name) or _duration(self._name), elapsed, base)
            if self._measures is not None:
                for metric, value, extra in self._measures:
                    report = observer.add if metric in _COUNTERS else observer.record
                    report(metric, value, {**base, **extra} if extra else base)
            if kind is not None:
                if issubclass(kind, Conflict):
                    observer.add("safepoint.conflicts", 1, base)
                elif issubclass(kind, LeaseLost):
                    observer.add("safepoint.leases.lost", 1, base)
        except Exception:  # see __init__
            pass
        if self._manager is not None:
            try:  # noqa: SIM105  (as in set)
                self._manager.__exit__(kind, error, tb)
            except Exception:  # see __init__
                pass
        # None: the call's own error, if any, goes on to the caller.


# Made once per name and per (backend, outcome), then shared: the observer
# must treat attributes as read-only (``Attributes`` is a ``Mapping``), and
# OpenTelemetry's SDK copies what it keeps. Both stay small: a handful of
# operation names, backends and error types.
_DURATIONS: dict[str, str] = {}
_BASES: dict[tuple[str, str], Attributes] = {}


def _duration(name: str) -> str:
    metric = _DURATIONS.get(name)
    if metric is None:
        metric = _DURATIONS[name] = f"{name}.duration"
    return metric


def _base(backend: str, outcome: str) -> Attributes:
    attributes = _BASES.get((backend, outcome))
    if attributes is None:
        attributes = _BASES[backend, outcome] = {"safepoint.backend": backend, "safepoint.outcome": outcome}
    return attributes


# Metrics ``measure`` adds to rather than records.
_COUNTERS = frozenset(name for name, metric in METRICS.items() if metric.kind == "counter")


def backend_of(url: str) -> str:
    """The ``safepoint.backend`` attribute of a store opened with ``url``."""
    scheme = url.split(":", 1)[0].lower()
    return "postgresql" if scheme == "postgres" else scheme
