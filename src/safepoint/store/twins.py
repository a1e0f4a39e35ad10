"""One call-table entry, two methods: ``Store``'s blocks on its driver, ``AsyncStore``'s awaits it.

The call table (``methods.py``) writes each public store method once, as an
entry (a ``StoreMethod``, one of ``safepoint.twins``' entries): its
signature and docstring, the ``Call`` it builds, and how it is observed (an
``observe.store_calls.Spec``). ``Store`` is a ``twins.Blocking`` class and
``AsyncStore`` a ``twins.Awaiting`` one: when either is defined, each entry
it inherits becomes a real method of it — a function for ``Store``, a
coroutine function for ``AsyncStore`` — with the entry's name, docstring and
signature (its return annotation: the call's result), so ``help()``,
``inspect`` and editors show what was written. For type checkers the entry
stays a descriptor, whose ``__get__`` gives the same parameters, returning
the result on a ``Store`` and a coroutine of it on an ``AsyncStore``.

A store method is the store's loop per flavour (``StoreMethod.blocking``,
``awaiting``). Unobserved — the hot path — it is three lines: build the
call, run what must precede the transaction (``before``: blocking I/O, in a
worker thread for ``AsyncStore``), and the transaction, which
``hand_over`` gives the driver (its result, or an awaitable of
it). Observed, it is one flow (``observed``) that either loop runs, inside
the call's span.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeAlias, TypeVar

from safepoint import twins
from safepoint.observe import NO_OBSERVER
from safepoint.observe.spans import AttributeDict, Operation
from safepoint.observe.store_calls import Done, Spec, no_attributes
from safepoint.twins import Entry, Flow, Invoke, Offload, Written

from .calls import Call
from .sealed_ops import sealed_call
from .settings import StoreSettings

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# What an entry returns: the call whose result the method returns.
Returns: TypeAlias = Call[Any, R]
Build = Callable[Concatenate[Any, P], Call[Any, R]]


class _Backend(Protocol):
    dialect: str


class Entries:
    """The base of the call table's classes: what an entry may read of the store running it."""

    settings: StoreSettings
    _driver: _Backend
    _entries: ClassVar[dict[str, Written]]


class StoreMethod(Entry[P, R]):
    """One entry of the call table: a public store method, written once."""

    def __init__(self, build: Build[P, R], spec: Spec) -> None:
        self.spec = spec
        hints = typing.get_type_hints(build)
        signature = inspect.signature(build)
        returns = typing.get_origin(hints.get("return"))
        if returns is not Call:
            raise TypeError(f"store method {build.__name__} must be annotated -> Returns[<its result>]")
        signature = signature.replace(
            parameters=[
                p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
            ],
            return_annotation=typing.get_args(hints["return"])[1],
        )
        Written.__init__(self, build, signature)
        # Where each parameter the span reports is found among a call's arguments (self aside).
        public = list(self.signature.parameters.values())[1:]
        by_name = {
            p.name: (i if p.kind is p.POSITIONAL_OR_KEYWORD else None, p) for i, p in enumerate(public)
        }
        self._where: list[tuple[str, int | None, Any]] = []
        for name in spec.params:
            if name not in by_name:
                raise TypeError(f"store method {self.name} has no parameter {name!r} for its span")
            index, parameter = by_name[name]
            default = None if parameter.default is parameter.empty else parameter.default
            self._where.append((name, index, default))

    def attributes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AttributeDict:
        """The span's attributes for a call with these arguments (as the caller passed them)."""
        values = [
            args[index] if index is not None and index < len(args) else kwargs.get(name, default)
            for name, index, default in self._where
        ]
        return self.spec.attributes(*values)

    def blocking(self) -> Callable[..., Any]:
        """The store's loop, blocking: the unobserved call in place (the hot path: build the call,
        its slow I/O, its transaction), the observed one as a flow in its span."""
        build, entry = self.build, self

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.observer is NO_OBSERVER:
                call = build(self, *args, **kwargs)
                if call.before is not None:  # slow I/O (blob uploads), before the transaction begins
                    call.before()
                return call.finish(hand_over(self, call))
            return twins.blocking(observed(entry, self, args, kwargs))

        return method

    def awaiting(self) -> Callable[..., Any]:
        """The store's loop, awaiting: as ``blocking``, with the slow I/O in a worker thread."""
        build, entry = self.build, self

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.observer is NO_OBSERVER:
                call = build(self, *args, **kwargs)
                if call.before is not None:  # blocking I/O: off the event loop
                    await asyncio.to_thread(call.before)
                return call.finish(await hand_over(self, call))
            return await twins.awaiting(observed(entry, self, args, kwargs))

        return method


def method(
    span: str | None = None,
    params: tuple[str, ...] = (),
    attributes: Callable[..., AttributeDict] = no_attributes,
    *,
    done: Done | None = None,
) -> Callable[[Build[P, R]], StoreMethod[P, R]]:
    """Make the function below an entry of the call table, observed as a span named ``span``
    (default ``safepoint.<method name>``) whose ``attributes`` are made of the arguments
    ``params`` names, in order, and to which ``done`` adds what the result says."""

    def entry(build: Build[P, R]) -> StoreMethod[P, R]:
        return StoreMethod(build, Spec(span or f"safepoint.{build.__name__}", params, attributes, done))

    return entry


class _Store(Protocol):
    settings: StoreSettings
    _driver: Any


def hand_over(store: _Store, call: Call[Any, Any]) -> Any:
    """The driver's run of the call's transaction (after its ``before``), written once for both
    faces: the result on a ``Store``, an awaitable of it on an ``AsyncStore``. An encrypted
    store's operation goes sealed (``sealed_ops``); a save may share its transaction with
    other runs' (group commit, ``Driver.run_joined``)."""
    driver = store._driver
    op, rebuild = call.op, call.rebuild
    sealer = store.settings.sealer
    if sealer is not None:
        op, rebuild = sealed_call(op, rebuild, sealer, driver.capabilities)
    if rebuild is not None:
        return driver.run_joined(op, rebuild, weight=call.weight)
    return driver.run(op, write=call.write)


def observed(
    entry: StoreMethod[Any, Any], store: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Flow[Any]:
    """An observed store's call, written once for both loops: the call inside its span."""
    spec = entry.spec
    with Operation(store.observer, spec.name, store._backend, entry.attributes(args, kwargs)) as op:
        call = entry.build(store, *args, **kwargs)
        if call.before is not None:
            yield Offload(call.before)
        raw = yield Invoke(hand_over, (store, call))
        result = call.finish(raw)
        spec.report(op, call, raw, result)
    return result
