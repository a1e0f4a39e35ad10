"""Spans and metrics around store operations, written once for ``Store`` and ``AsyncStore``.

A store method whose observer is the default (``NO_OBSERVER``) never comes
here: it checks that once and runs its call directly, so an unobserved store
pays one identity test per call. Otherwise the method runs inside an
``Operation``: it opens the observer's span (parented to the caller's
current span), times the call, and on the way out records
``<span name>.duration``, counts the errors worth alerting on (conflicts,
lost leases) and passes the error, if any, to the span, which marks its
outcome with the error's type name. A caller that runs a call's operation
on the driver itself (the worker's release) wraps it in ``around``, so it is
reported, and counted, exactly as the store's own call would be.

Attributes are facts about the call — backend, step, sizes, counts, rule
names, epochs — never a stored value. An observer that raises is ignored:
observing must never break a save.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from safepoint.errors import Conflict, LeaseLost
from safepoint.model import Checkpoint, Status
from safepoint.observe import METRICS, NO_OBSERVER, NO_SPAN, Attributes, Observer, Span
from safepoint.records import Lease

from . import calls
from .calls import SaveFacts
from .maintenance import GcResult, PruneResult, Rewritten

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


def of_save(cp: Checkpoint, lease: Lease | None) -> AttributeDict:
    """A save's attributes known before it runs."""
    if not isinstance(cp, Checkpoint):  # refused, typed, by the call itself
        return {}
    attributes: AttributeDict = {"safepoint.run_id": _text(cp.run_id), "safepoint.step": _int(cp.step)}
    if isinstance(lease, Lease):
        attributes["safepoint.lease.epoch"] = _int(lease.epoch)
    return attributes


def saved(op: Operation, facts: SaveFacts) -> None:
    """What a committed save did: sizes, counts, scrub findings by rule."""
    findings = facts.findings
    op.update(
        {
            "safepoint.bytes_written": facts.bytes_written,
            "safepoint.messages_added": facts.messages_added,
            "safepoint.blobs_written": facts.blobs_written,
            "safepoint.scrub.findings": sum(findings.values()) if findings else 0,
        }
    )
    for rule, count in findings.items():
        op.set(f"safepoint.scrub.{rule}", count)
        op.measure("safepoint.scrub.findings", count, {"safepoint.scrub.rule": rule})
    # One histogram per save (its latency, recorded on exit): a record costs
    # the SDK about half a span, so the size is a counter and counts stay
    # span attributes.
    op.measure("safepoint.save.bytes", facts.bytes_written)
    if facts.blobs_written:
        op.measure("safepoint.blobs.written", facts.blobs_written)


def of_run(run_id: object, step: object = None) -> AttributeDict:
    """Attributes of a call on one run (and step, when given)."""
    attributes: AttributeDict = {"safepoint.run_id": _text(run_id)}
    if step is not None:
        attributes["safepoint.step"] = _int(step)
    return attributes


def of_lease(lease: object) -> AttributeDict:
    """Attributes of a heartbeat or release: the lease's run and epoch."""
    if not isinstance(lease, Lease):
        return {}
    return {
        "safepoint.run_id": _text(lease.run_id),
        "safepoint.worker_id": _text(lease.worker_id),
        "safepoint.lease.epoch": _int(lease.epoch),
    }


def loaded(op: Operation, cp: Checkpoint) -> None:
    """What a load returned: the step it found, its size in messages and its version."""
    op.set("safepoint.step", cp.step)
    op.set("safepoint.schema_version", cp.schema_version)
    count = len(cp.messages)
    op.set("safepoint.messages", count)
    op.measure("safepoint.load.messages", count)


def forked(op: Operation, cp: Checkpoint) -> None:
    op.set("safepoint.new_run_id", cp.run_id)
    op.set("safepoint.step", cp.step)


def claimed(op: Operation, lease: Lease | None) -> None:
    op.set("safepoint.claimed", lease is not None)
    if lease is not None:
        op.set("safepoint.run_id", lease.run_id)
        op.set("safepoint.lease.epoch", lease.epoch)


def collected(op: Operation, result: GcResult) -> None:
    op.set("safepoint.gc.blobs_deleted", result.blobs_deleted)
    op.set("safepoint.gc.bytes_freed", result.bytes_freed)
    op.set("safepoint.gc.blobs_kept", result.blobs_kept)


def migrated(op: Operation, result: Rewritten) -> None:
    op.set("safepoint.migrate.rewritten", len(result.rewritten))
    op.set("safepoint.migrate.failed", len(result.failed))


def backend_of(url: str) -> str:
    """The ``safepoint.backend`` attribute of a store opened with ``url``."""
    scheme = url.split(":", 1)[0].lower()
    return "postgresql" if scheme == "postgres" else scheme


Done = Callable[[Operation, Any], None]


@dataclass(frozen=True, slots=True)
class Spec:
    """How one call is observed: its span's name, the attributes its arguments
    give (called with the call builder's own arguments), and what its result adds."""

    name: str
    attributes: Callable[..., AttributeDict]
    done: Done | None = None


def _none(*args: Any, **kwargs: Any) -> AttributeDict:
    del args, kwargs
    return {}


def _first_run(run_id: object, *args: Any, **kwargs: Any) -> AttributeDict:
    del args, kwargs
    return of_run(run_id)


def _run_and_step(run_id: object, step: object, *args: Any, **kwargs: Any) -> AttributeDict:
    del args, kwargs
    return of_run(run_id, step)


def _migrate(run_ids: object, *args: Any) -> AttributeDict:
    del args
    return {"safepoint.migrate.runs": len(run_ids) if isinstance(run_ids, list | tuple) else 0}


def _gc(pipeline: object, grace: object, dry_run: object) -> AttributeDict:
    del pipeline, grace
    return {"safepoint.dry_run": dry_run is True}


def _claim(worker_id: object, lease: object) -> AttributeDict:
    del lease
    return {"safepoint.worker_id": _text(worker_id)}


def _heartbeat(lease: object, extend: object) -> AttributeDict:
    del extend
    return of_lease(lease)


def _release(lease: object, status: object, requeue: object) -> AttributeDict:
    attributes = of_lease(lease)
    attributes["safepoint.requeue"] = requeue is True
    if isinstance(status, Status):  # a plain str is shown only once the call accepted it
        attributes["safepoint.status"] = status.value
    return attributes


def _counted(key: str) -> Done:
    def done(op: Operation, result: Any) -> None:
        op.set(key, len(result))

    return done


def _pruned(op: Operation, result: PruneResult) -> None:
    op.set("safepoint.prune.steps", len(result.pruned_steps))


# Every call a store runs through ``_call``, by its builder in ``calls``. The
# save is observed apart (``of_save``, ``saved``): its facts need its result.
SPECS: dict[Callable[..., Any], Spec] = {
    calls.load: Spec("safepoint.load", _run_and_step, loaded),
    calls.migrate_runs: Spec("safepoint.migrate", _migrate, migrated),
    calls.fetch_blob: Spec("safepoint.fetch_blob", _none),
    calls.set_retention: Spec("safepoint.set_retention", _first_run),
    calls.prune_run: Spec("safepoint.prune", _first_run, _pruned),
    calls.collect_garbage: Spec("safepoint.gc", _gc, collected),
    calls.history: Spec("safepoint.history", _first_run, _counted("safepoint.checkpoints")),
    calls.run_info: Spec("safepoint.run", _first_run),
    calls.runs: Spec("safepoint.runs", _none, lambda op, page: op.set("safepoint.runs", len(page.items))),
    calls.fork: Spec("safepoint.fork", _run_and_step, forked),
    calls.delete_run: Spec("safepoint.delete", _first_run),
    calls.enqueue: Spec("safepoint.enqueue", _first_run),
    calls.claim: Spec("safepoint.claim", _claim, claimed),
    calls.heartbeat: Spec("safepoint.heartbeat", _heartbeat),
    calls.release: Spec("safepoint.release", _release),
}


def spec_of(build: Callable[..., Any]) -> Spec:
    """``build``'s spec; a call added without one is still a span, named for its builder."""
    spec = SPECS.get(build)
    return spec if spec is not None else Spec(f"safepoint.{build.__name__}", _none)


def operation(
    observer: Observer, backend: str, build: Callable[..., Any], args: Any, kwargs: Any
) -> Operation:
    """The ``Operation`` for ``build(*args, **kwargs)``; ``finished`` reports its result."""
    spec = spec_of(build)
    return Operation(observer, spec.name, backend, spec.attributes(*args, **kwargs))


class Observed(Protocol):
    """What ``around`` needs of a store: its observer and its URL."""

    observer: Observer
    url: str


def around(store: Observed, build: Callable[..., Any], *args: Any) -> AbstractContextManager[Any]:
    """The span, metrics and counts ``store`` reports for ``build(*args)``, for a caller
    that runs the call's operation on the driver itself.

    The worker releases a run that way (its release also sets attempts,
    ``retry_at`` and the last error, which ``Store.release`` does not take):
    wrapping that in ``around(store, calls.release, lease, status, requeue)``
    makes it the same single ``safepoint.release`` span, with the same
    ``safepoint.release.duration`` and the same one count of
    ``safepoint.leases.lost``, as ``store.release``. A caller using this
    must not count what it reports again. Nothing at all without an observer.
    """
    observer = store.observer
    if observer is NO_OBSERVER:
        return nullcontext()
    return operation(observer, backend_of(store.url), build, args, {})


def finished(build: Callable[..., Any], op: Operation, result: Any) -> None:
    """Report what ``build``'s call returned."""
    done = spec_of(build).done
    if done is not None:
        done(op, result)


# Arguments are attributes before the call has validated them: anything but
# the expected type is left out (the call then refuses it, typed).
def _text(value: object) -> str:
    return value if type(value) is str else ""


def _int(value: object) -> int:
    return value if type(value) is int else -1
