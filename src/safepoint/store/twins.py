"""One call-table entry, two methods: ``Store``'s blocks on its driver, ``AsyncStore``'s awaits it.

The call table (``methods.py``) writes each public store method once, as an
entry: its signature and docstring, the ``Call`` it builds, and how it is
observed (an ``observe.store_calls.Spec``). ``Blocking`` and ``Awaiting`` are
the bases of ``Store`` and ``AsyncStore``: when either class is defined, each entry it
inherits becomes a real method of that class — a function for ``Store``, a
coroutine function for ``AsyncStore`` — with the entry's name, docstring and
signature (its return annotation: the call's result), so ``help()``,
``inspect`` and editors show what was written. For type checkers the entry
stays a ``StoreMethod`` descriptor, whose ``__get__`` gives the same
parameters, returning the result on a ``Store`` and a coroutine of it on an
``AsyncStore``. The two methods differ in one word: ``await``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, overload

from safepoint.observe import NO_OBSERVER, Observer
from safepoint.observe.spans import AttributeDict, Operation
from safepoint.observe.store_calls import Done, Spec, no_attributes

from .calls import Call
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


class StoreMethod(Generic[P, R]):
    """One entry of the call table: a public store method, written once."""

    def __init__(self, build: Build[P, R], spec: Spec) -> None:
        self.build = build
        self.spec = spec
        self.name = build.__name__
        self.doc = build.__doc__
        hints = typing.get_type_hints(build)
        signature = inspect.signature(build)
        returns = typing.get_origin(hints.get("return"))
        if returns is not Call:
            raise TypeError(f"store method {self.name} must be annotated -> Returns[<its result>]")
        self.signature = signature.replace(
            parameters=[
                p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
            ],
            return_annotation=typing.get_args(hints["return"])[1],
        )
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

    def dress(self, method: Callable[..., Any], owner: type) -> Callable[..., Any]:
        """``method`` as the entry's method of ``owner``: its name, docstring and signature."""
        method.__name__ = self.name
        method.__qualname__ = f"{owner.__name__}.{self.name}"
        method.__module__ = owner.__module__
        method.__doc__ = self.doc
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        method.__annotations__ = {
            **{
                p.name: p.annotation
                for p in self.signature.parameters.values()
                if p.annotation is not p.empty
            },
            "return": self.signature.return_annotation,
        }
        return method

    @overload
    def __get__(self, store: None, owner: type[Any]) -> StoreMethod[P, R]: ...
    @overload
    def __get__(self, store: Blocking, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(self, store: Awaiting, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, store: object, owner: type[Any]) -> Any:
        if store is None:
            return self
        raise TypeError(f"{self.name} is a method of a Store or an AsyncStore, not of {type(store).__name__}")


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


class _Runner:
    """Turns every call-table entry a class inherits into a method of that class."""

    observer: Observer
    _backend: str  # the span's ``safepoint.backend``
    _entries: ClassVar[dict[str, StoreMethod[Any, Any]]] = {}

    @staticmethod
    def _method(entry: StoreMethod[Any, Any], owner: type) -> Callable[..., Any]:
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        entries = dict(cls._entries)
        for klass in reversed(cls.__mro__):
            entries.update((k, v) for k, v in vars(klass).items() if isinstance(v, StoreMethod))
        cls._entries = entries
        for name, entry in entries.items():
            # Only where the entry itself is what the name finds: a subclass's own override stays.
            if isinstance(inspect.getattr_static(cls, name), StoreMethod):
                setattr(cls, name, cls._method(entry, cls))


class Blocking(_Runner):
    """The base of ``Store``: each entry becomes a method that blocks on the driver."""

    def _transact(self, call: Call[T, Any]) -> T:
        """Run the call's transaction (after its ``before``), returning the operation's result."""
        raise NotImplementedError

    @staticmethod
    def _method(entry: StoreMethod[Any, Any], owner: type) -> Callable[..., Any]:
        build, spec = entry.build, entry.spec

        def method(self: Blocking, *args: Any, **kwargs: Any) -> Any:
            observer = self.observer
            if observer is NO_OBSERVER:
                call = build(self, *args, **kwargs)
                return call.finish(self._transact(call))
            with Operation(observer, spec.name, self._backend, entry.attributes(args, kwargs)) as op:
                call = build(self, *args, **kwargs)
                raw = self._transact(call)
                result = call.finish(raw)
                spec.report(op, call, raw, result)
            return result

        return entry.dress(method, owner)


class Awaiting(_Runner):
    """The base of ``AsyncStore``: each entry becomes a coroutine method that awaits the driver."""

    async def _transact(self, call: Call[T, Any]) -> T:
        """Run the call's transaction (after its ``before``), returning the operation's result."""
        raise NotImplementedError

    @staticmethod
    def _method(entry: StoreMethod[Any, Any], owner: type) -> Callable[..., Any]:
        build, spec = entry.build, entry.spec

        async def method(self: Awaiting, *args: Any, **kwargs: Any) -> Any:
            observer = self.observer
            if observer is NO_OBSERVER:
                call = build(self, *args, **kwargs)
                return call.finish(await self._transact(call))
            with Operation(observer, spec.name, self._backend, entry.attributes(args, kwargs)) as op:
                call = build(self, *args, **kwargs)
                raw = await self._transact(call)
                result = call.finish(raw)
                spec.report(op, call, raw, result)
            return result

        return entry.dress(method, owner)
