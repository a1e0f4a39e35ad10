"""The loops for a flow whose call streams to its caller: ``relaying`` and ``arelaying``.

``safepoint.twins``' two loops run a flow to its end and return its result.
A streamed model response cannot be served that way: its consumer pulls it
chunk by chunk, so the loop must itself be a generator that hands each chunk
out as it comes while the flow waits at its request. That is the one thing
these two loops add, through one request of their own, ``Relay``: the items
of ``open()`` are yielded to the loop's caller, and their sum (``a + b``, the
whole message a stream adds up to) is sent back to the flow. Everything else
is served by ``twins.served`` / ``twins.aserved``, as ``twins.blocking`` /
``twins.awaiting`` serve it, errors thrown into the flow by the same rule. A
relaying flow says everything by relaying: its return value is dropped (an
async generator has none to give).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from safepoint.twins import Flow, aserved, served

__all__ = ["Relay", "arelaying", "relaying"]


@dataclass(frozen=True, slots=True)
class Relay:
    """Hand each item of ``open()`` to the loop's caller; send back their sum (None if none)."""

    open: Callable[[], Any]


def relaying(flow: Flow[Any]) -> Iterator[Any]:
    """Run ``flow`` to its end, blocking on each request and yielding what it relays."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration:
            return
        value, error = None, None
        try:
            if type(request) is Relay:
                whole = None
                for item in request.open():
                    whole = item if whole is None else whole + item
                    yield item
                value = whole
            else:
                value = served(request)
        except GeneratorExit:
            flow.close()
            raise
        except BaseException as exc:  # thrown into the flow: the one rule for errors
            error = exc


async def arelaying(flow: Flow[Any]) -> AsyncIterator[Any]:
    """Run ``flow`` to its end, awaiting each request and yielding what it relays."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration:
            return
        value, error = None, None
        try:
            if type(request) is Relay:
                whole = None
                async for item in request.open():
                    whole = item if whole is None else whole + item
                    yield item
                value = whole
            else:
                value = await aserved(request)
        except GeneratorExit:
            flow.close()
            raise
        except BaseException as exc:  # thrown into the flow: the one rule for errors
            error = exc
