"""The observability hook: what the store and the workers report, to whoever listens.

A store calls its ``observer`` around each operation (a *span*) and for each
event worth counting (a *metric*). The default observer does nothing and
costs one attribute lookup; ``safepoint.observe_otel`` (the ``otel`` extra)
turns the same calls into OpenTelemetry spans and metrics. Attributes never
carry a stored value: backend, step, sizes, counts, rule names, epochs,
outcomes — and run ids only when the user opts in.

The hook is the public trace hook too: anything with these three methods can
be passed as ``open_store(url, observer=…)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

Attributes = Mapping[str, str | int | float | bool]


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
        """Record one measurement of a histogram or gauge (``safepoint.save.bytes`` …)."""
        ...


class _NoSpan:
    __slots__ = ()

    def set(self, key: str, value: str | int | float | bool) -> None:
        pass


_NO_SPAN = _NoSpan()


class NoObserver:
    """The default: reports nothing."""

    @contextmanager
    def span(self, name: str, attributes: Attributes) -> Iterator[Span]:
        del name, attributes
        yield _NO_SPAN

    def add(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass

    def record(self, metric: str, value: int | float, attributes: Attributes) -> None:
        pass


NO_OBSERVER = NoObserver()
