"""One way to be both sync and async: logic written once as a flow, and one loop per flavour.

A *flow* is a generator without I/O: it yields *requests* and gets each
one's result sent back — or, whatever serving it raised (any
``BaseException``: ``KeyboardInterrupt`` and ``asyncio.CancelledError``
too), thrown in at the ``yield`` that asked. ``blocking`` runs a flow to
its end by blocking on each request, ``awaiting`` by awaiting it. These two
loops are the only ones in safepoint (the store's hot path spells its own
out in three lines, ``store/twins.py``; ``safepoint.relaying`` holds their
pair for a flow whose call streams to its caller); everything that exists both ways —
the harness's ``Run``, the store's transaction and PostgreSQL's, the retry
policy, a held run's heartbeat — is a flow that one loop or the other runs,
and what is left to each flavour is only how it waits (a thread or a task,
a lock or one event loop).

The loops serve four requests:

- ``Invoke(fn, args, kwargs)``: ``fn(*args, **kwargs)``. The same call
  serves both flavours: a ``Store`` method returns its result, the same
  method of an ``AsyncStore`` a coroutine, which ``awaiting`` awaits;
  ``blocking`` refuses an awaitable (``InvalidArgument``).
- ``Sleep(seconds, wake)``: ``time.sleep`` / ``asyncio.sleep``. Under
  ``blocking`` a set ``wake`` event ends it early; the result says whether
  it did (a task is woken by cancelling it instead).
- ``Offload(fn, args)``: blocking work (a blob upload): ``blocking`` calls
  it, ``awaiting`` runs it in a worker thread.
- ``Within(manager, body)``: the flow ``body(entered)`` inside a context
  manager, ``with`` or ``async with`` it.

A vocabulary of its own (``safepoint.flow``'s store requests, a leased run's
retries) is lowered onto these by a filter, ``translate``. And a method is
written once as an *entry* (``Entry``): a function building the flow;
every entry a class inherits becomes a method of it — a function that runs
the flow with ``blocking`` in a class deriving from ``Blocking``, a
coroutine function running it with ``awaiting`` in one deriving from
``Awaiting`` — with the entry's name, docstring and signature, so
``help()`` and ``inspect`` show what was written.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import time
import typing
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from safepoint.errors import InvalidArgument

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
B = TypeVar("B", bound="Blocking")
A = TypeVar("A", bound="Awaiting")

Flow = Generator[Any, Any, T]


@dataclass(frozen=True, slots=True)
class Invoke:
    """Call ``fn(*args, **kwargs)``: sync or async code alike. ``awaiting`` awaits an awaitable
    result; ``blocking`` refuses one (``InvalidArgument``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds``; under ``blocking``, a set ``wake`` ends the wait early. Sends back
    whether it did."""

    seconds: float
    wake: threading.Event | None = None


@dataclass(frozen=True, slots=True)
class Offload:
    """Blocking work, ``fn(*args)``: called in place by ``blocking``, in a worker thread by ``awaiting``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Within:
    """Run the flow ``body(entered)`` inside ``manager`` (``with`` / ``async with``); its result
    is sent back."""

    manager: Any
    body: Callable[[Any], Flow[Any]]


# Whether a result is awaitable, asked of each: ``inspect.isawaitable`` without a call but for
# a generator (one of ``types.coroutine``'s may be): ``served`` and ``aserved`` spell it out.


def blocking(flow: Flow[T]) -> T:
    """Run ``flow`` to its end, blocking on each request."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = served(request)
        except BaseException as exc:  # thrown into the flow: the one rule for errors
            error = exc


async def awaiting(flow: Flow[T]) -> T:
    """Run ``flow`` to its end, awaiting each request."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await aserved(request)
        except BaseException as exc:  # thrown into the flow: the one rule for errors
            error = exc


def served(request: Any) -> Any:
    """One request, served blocking: what every blocking loop (``blocking``, ``relaying``) does
    with a request that is not its own."""
    if type(request) is Invoke:
        value = request.fn(*request.args, **(request.kwargs or {}))
        if hasattr(value, "__await__") or (type(value) is GeneratorType and inspect.isawaitable(value)):
            _refuse(request.fn, value)
        return value
    if isinstance(request, Within):
        with request.manager as entered:
            return blocking(request.body(entered))
    if isinstance(request, Sleep):
        if request.wake is not None:
            return request.wake.wait(request.seconds)
        time.sleep(request.seconds)
        return False
    if isinstance(request, Offload):
        return request.fn(*request.args)
    raise TypeError(f"no loop serves {request!r}: lower it first (translate)")


async def aserved(request: Any) -> Any:
    """One request, awaited: what every awaiting loop (``awaiting``, ``arelaying``) does with a
    request that is not its own."""
    if type(request) is Invoke:
        value = request.fn(*request.args, **(request.kwargs or {}))
        if hasattr(value, "__await__") or (type(value) is GeneratorType and inspect.isawaitable(value)):
            value = await value
        return value
    if isinstance(request, Within):
        async with request.manager as entered:
            return await awaiting(request.body(entered))
    if isinstance(request, Sleep):
        await asyncio.sleep(request.seconds)
        return False
    if isinstance(request, Offload):
        return await asyncio.to_thread(request.fn, *request.args)
    raise TypeError(f"no loop serves {request!r}: lower it first (translate)")


def _refuse(fn: Callable[..., Any], result: Any) -> None:
    if inspect.iscoroutine(result):
        result.close()  # never awaited: close it instead of leaving a warning behind
    raise InvalidArgument(f"{fn!r} returned an awaitable: use AsyncRun for async tools and hooks")


def ask(request: Any) -> Flow[Any]:
    """One request as a flow: its result."""
    return (yield request)


def translate(flow: Flow[T], rule: Callable[[Any], Any]) -> Flow[T]:
    """``flow``, each request it yields replaced by what ``rule`` makes of it: a request, sent on
    in its place, or a flow, run in its place. Either way the result goes back to ``flow`` —
    and an error is thrown into it, by the rule above."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            served = rule(request)
            if type(served) is GeneratorType:
                value = yield from served
            else:
                value = yield served
        except BaseException as exc:  # thrown into the flow, as a loop would
            error = exc


# -- entries: a method written once ------------------------------------------------------


class Written:
    """What an entry is written as: its function, name, docstring and signature."""

    of_class = False  # a class method (an opener), not an instance method

    def __init__(self, build: Callable[..., Any], signature: inspect.Signature | None = None) -> None:
        self.build = build
        self.name = build.__name__
        self.doc = build.__doc__
        self.signature = _signature(build) if signature is None else signature

    def blocking(self) -> Callable[..., Any]:
        """The entry as a method that runs its flow with ``blocking``."""
        build = self.build

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return blocking(build(self, *args, **kwargs))

        return method

    def awaiting(self) -> Callable[..., Any]:
        """The entry as a coroutine method that runs its flow with ``awaiting``."""
        build = self.build

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await awaiting(build(self, *args, **kwargs))

        return method

    def dress(self, method: Callable[..., Any], owner: type, returns: Any = None) -> Callable[..., Any]:
        """``method`` as the entry's method of ``owner``: its name, docstring and signature
        (``returns`` in place of the signature's return annotation, when given), each
        annotation written for both flavours read as ``owner``'s (``Twins._flavoured``)."""
        signature = self.signature
        if returns is not None:
            signature = signature.replace(return_annotation=returns)
        flavoured = getattr(owner, "_flavoured", {})
        if flavoured:
            signature = signature.replace(
                parameters=[
                    p.replace(annotation=_read_as(p.annotation, flavoured))
                    for p in signature.parameters.values()
                ],
                return_annotation=_read_as(signature.return_annotation, flavoured),
            )
        method.__name__ = self.name
        method.__qualname__ = f"{owner.__name__}.{self.name}"
        method.__module__ = owner.__module__
        method.__doc__ = self.doc
        method.__signature__ = signature  # type: ignore[attr-defined]
        method.__annotations__ = {
            **{p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty},
            "return": signature.return_annotation,
        }
        return method


class Entry(Written, Generic[P, R]):
    """A method written once, as a function that builds a flow: on a ``Blocking`` class a
    method returning the flow's result, on an ``Awaiting`` class a coroutine method."""

    def __init__(self, build: Callable[Concatenate[Any, P], Flow[R]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, instance: Blocking, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(self, instance: Awaiting, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, instance: object, owner: type[Any]) -> Any:
        if instance is None:
            return self
        raise TypeError(f"{self.name} is a method of Blocking and Awaiting classes, not of {owner.__name__}")


class ClassEntry(Written, Generic[P]):
    """A class method written once, as a function of the class building a flow that returns an
    instance of it (an opener): on a ``Blocking`` class it returns the instance, on an
    ``Awaiting`` class a coroutine of it."""

    of_class = True

    def __init__(self, build: Callable[Concatenate[Any, P], Flow[Any]]) -> None:
        super().__init__(build)

    @overload
    def __get__(self, instance: Any, owner: type[B]) -> Callable[P, B]: ...
    @overload
    def __get__(self, instance: Any, owner: type[A]) -> Callable[P, Coroutine[Any, Any, A]]: ...
    def __get__(self, instance: Any, owner: type[Any]) -> Any:
        raise TypeError(f"{self.name} is a method of Blocking and Awaiting classes, not of {owner.__name__}")


def entry(build: Callable[Concatenate[Any, P], Flow[R]]) -> Entry[P, R]:
    """Make the method below an entry: a method of its class's ``Blocking`` and ``Awaiting`` kin."""
    return Entry(build)


def class_entry(build: Callable[Concatenate[Any, P], Flow[Any]]) -> ClassEntry[P]:
    """Make the function below (of ``cls``) an opener: a class method of the class's kin."""
    return ClassEntry(build)


def _signature(build: Callable[..., Any]) -> inspect.Signature:
    """``build``'s signature as written, returning what its flow returns (``Flow[X]``: ``X``)."""
    signature = inspect.signature(build)
    returns = signature.return_annotation
    if isinstance(returns, str):  # as written, under ``from __future__ import annotations``
        flow = re.fullmatch(r"Flow\[(.*)\]", returns)
        returns = flow.group(1) if flow else returns
    elif typing.get_origin(returns) is Generator:
        returns = typing.get_args(returns)[-1]
    return signature.replace(return_annotation=returns)


def _read_as(annotation: Any, flavoured: dict[str, str]) -> Any:
    if isinstance(annotation, str):
        for written, read in flavoured.items():
            annotation = annotation.replace(written, read)
    return annotation


class Twins:
    """The base of ``Blocking`` and ``Awaiting``: each entry a class inherits becomes its method,
    the one the entry makes for the class's flavour (``Written.blocking``, ``Written.awaiting``).

    ``_flavoured``: how an annotation the entries write for both flavours reads in this class's
    (``{"Store | AsyncStore": "Store"}``), so its methods show their own types.
    """

    _entries: ClassVar[dict[str, Written]] = {}
    _flavoured: ClassVar[dict[str, str]] = {}
    _flavour: ClassVar[str] = ""  # which of the entry's makers: "blocking" or "awaiting"

    @classmethod
    def _method(cls, entry: Written) -> Callable[..., Any]:
        """The method ``entry`` makes for this class."""
        method = getattr(entry, cls._flavour)()
        return entry.dress(method, cls, cls.__name__ if entry.of_class else None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        entries: dict[str, Written] = {}
        for klass in reversed(cls.__mro__):
            entries.update((k, v) for k, v in vars(klass).items() if isinstance(v, Written))
        cls._entries = entries
        for name, found in entries.items():
            # Only where the entry itself is what the name finds: a subclass's own override stays.
            if isinstance(inspect.getattr_static(cls, name), Written):
                method = cls._method(found)
                setattr(cls, name, classmethod(method) if found.of_class else method)


class Blocking(Twins):
    """A class whose entries are methods that block: each runs its flow with ``blocking``."""

    _flavour = "blocking"


class Awaiting(Twins):
    """A class whose entries are coroutine methods: each awaits its flow with ``awaiting``."""

    _flavour = "awaiting"
