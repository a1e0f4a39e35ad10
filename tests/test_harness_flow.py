"""``safepoint.flow``: one request vocabulary and one rule for errors, under ``drive`` and ``adrive`` alike.

Whatever serving a request raises is thrown back into the flow at the
``yield`` that asked for it — ``KeyboardInterrupt`` included — so the flow
may handle it, and its cleanup runs before the error leaves the driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint, Conflict, InvalidArgument, NotFound
from safepoint.flow import (
    Delete,
    FindRuns,
    Flow,
    Head,
    Invoke,
    Load,
    Save,
    SchemaVersion,
    adrive,
    delete_if_present,
    drive,
    head_or_none,
    load_or_none,
)


@pytest.fixture
def store() -> Iterator[safepoint.Store]:
    opened = safepoint.open_store("memory://")
    yield opened
    opened.close()


def _seed() -> Flow[None]:
    yield Save(Checkpoint(run_id="seed", labels={"flow": "yes"}))


def both(store: safepoint.Store, make: Callable[[], Flow[Any]]) -> list[Any]:
    """The flow's result under ``drive`` on ``store``, then under ``adrive`` on an AsyncStore,
    each store holding the run ``seed`` (step 0) first."""
    drive(store, _seed())
    results = [drive(store, make())]

    async def run_async() -> Any:
        astore = await safepoint.open_async_store("memory://")
        try:
            await adrive(astore, _seed())
            return await adrive(astore, make())
        finally:
            await astore.close()

    results.append(asyncio.run(run_async()))
    return results


def test_each_request_is_one_store_call(store: safepoint.Store) -> None:
    """Save, Load, Head, FindRuns, SchemaVersion and Delete answer as the store's own calls do."""

    def flow() -> Flow[tuple[Any, ...]]:
        loaded: Checkpoint = yield Load("seed")
        saved = yield Save(loaded.next())
        head = yield Head("seed")
        found = yield FindRuns({"flow": "yes"})
        version = yield SchemaVersion()
        again: Checkpoint = yield Load("seed", 0)
        yield Delete("seed")
        return saved.step, head.head_step, [r.run_id for r in found], version, again.step

    assert both(store, flow) == [(1, 1, ["seed"], 1, 0)] * 2


def test_an_error_is_thrown_into_the_flow_which_may_handle_it(store: safepoint.Store) -> None:
    """NotFound and Conflict reach the flow at the yield that asked; a flow that catches them goes on."""

    def flow() -> Flow[list[str]]:
        seen = []
        try:
            yield Load("absent")
        except NotFound:
            seen.append("not found")
        try:
            yield Save(Checkpoint(run_id="seed", step=0))  # step 0 exists: a Conflict
        except Conflict:
            seen.append("conflict")
        return seen

    assert both(store, flow) == [["not found", "conflict"]] * 2


def test_an_interrupt_is_thrown_in_too_so_cleanup_runs_before_it_leaves(store: safepoint.Store) -> None:
    """A KeyboardInterrupt from user code reaches the flow (its finally runs), then leaves the driver."""
    cleaned: list[str] = []

    def interrupted() -> None:
        raise KeyboardInterrupt

    def flow() -> Flow[None]:
        try:
            yield Invoke(interrupted, ())
        finally:
            cleaned.append("cleaned")

    with pytest.raises(KeyboardInterrupt):
        drive(store, flow())
    assert cleaned == ["cleaned"]


def test_invoke_awaits_only_under_adrive(store: safepoint.Store) -> None:
    """An async tool's result is awaited by adrive; drive refuses it rather than return a coroutine."""

    async def tool(x: int) -> int:
        return x + 1

    def flow() -> Flow[int]:
        result: int = yield Invoke(tool, (41,))
        return result

    with pytest.raises(InvalidArgument, match="awaitable"):
        drive(store, flow())

    async def run_async() -> int:
        astore = await safepoint.open_async_store("memory://")
        try:
            return await adrive(astore, flow())
        finally:
            await astore.close()

    assert asyncio.run(run_async()) == 42


def test_a_missing_run_is_none_only_where_a_flow_says_so(store: safepoint.Store) -> None:
    """load_or_none, head_or_none and delete_if_present take a missing run as None or nothing."""

    def flow() -> Flow[tuple[Any, ...]]:
        cp = yield from load_or_none("absent")
        head = yield from head_or_none("absent")
        yield from delete_if_present("absent")
        return cp, head

    assert both(store, flow) == [(None, None)] * 2
