"""``AsyncRun`` under asyncio: several runs interleaved on one store, async tools and hooks,
the same checkpoints as ``Run`` (the two drive the same flows)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import AsyncStore, BudgetExceeded, Status, Store
from safepoint.harness import AsyncRun, Budget, PendingAction, Reconcile, Run

ITEMS = 4


class Crash(BaseException):
    """Stands in for the process dying inside a tool."""


def _plan(run_id: str, index: int) -> tuple[dict[str, Any], int]:
    return {"item": index, "run": run_id}, 10 + len(run_id) + index


async def async_agent(store: AsyncStore, run_id: str, trace: list[tuple[str, int]]) -> None:
    """Works ``ITEMS`` items, one action per step, yielding to the loop inside every tool."""

    async def tool(key: str) -> str:
        await asyncio.sleep(0)  # let the other runs go
        trace.append((run_id, len(trace)))
        return f"done {key[:8]}"

    run = await AsyncRun.open(store, run_id, budget=Budget(tokens=10_000), cursors={"items": 0})
    while run.active:
        index = int(run.cursors["items"])
        if index == ITEMS:
            await run.finish()
            break
        args, tokens = _plan(run_id, index)
        await run.add_usage(tokens_in=tokens, tokens_out=tokens // 2, spend=tokens / 1000)
        result = await run.action("work", args, tool)
        run.append({"role": "tool", "content": result})
        run.advance("items")
        await run.commit()


def sync_agent(store: Store, run_id: str) -> None:
    """The same agent on ``Run``."""
    run = Run.open(store, run_id, budget=Budget(tokens=10_000), cursors={"items": 0})
    while run.active:
        index = int(run.cursors["items"])
        if index == ITEMS:
            run.finish()
            break
        args, tokens = _plan(run_id, index)
        run.add_usage(tokens_in=tokens, tokens_out=tokens // 2, spend=tokens / 1000)
        result = run.action("work", args, lambda key: f"done {key[:8]}")
        run.append({"role": "tool", "content": result})
        run.advance("items")
        run.commit()


def snapshot(cp: safepoint.Checkpoint) -> dict[str, Any]:
    data = cp.to_dict()
    return {key: data[key] for key in ("step", "status", "messages", "counters", "cursors", "state")}


def test_interleaved_async_runs_end_like_sync_runs(tmp_path: Path) -> None:
    """Six runs interleaved on one SQLite store each end with the checkpoints ``Run`` makes."""
    run_ids = [f"run-{i}" for i in range(6)]
    trace: list[tuple[str, int]] = []

    async def main() -> dict[str, dict[str, Any]]:
        async with await safepoint.open_async_store(f"sqlite:///{tmp_path / 'async.db'}") as store:
            await asyncio.gather(*(async_agent(store, run_id, trace) for run_id in run_ids))
            return {run_id: snapshot(await store.load(run_id)) for run_id in run_ids}

    finals = asyncio.run(main())
    order = [run_id for run_id, _ in trace]
    assert len(order) == ITEMS * len(run_ids)
    switches = sum(a != b for a, b in itertools.pairwise(order))
    assert switches > len(run_ids)  # one after the other would switch len(run_ids) - 1 times
    with safepoint.open_store("memory://") as store:
        for run_id in run_ids:
            sync_agent(store, run_id)
            assert finals[run_id] == snapshot(store.load(run_id))
            assert finals[run_id]["status"] == "done"


def test_async_hooks_and_tools_settle_an_interrupted_action(tmp_path: Path) -> None:
    """An async reconcile hook decides; the rerun awaits the async tool with the crashed action's key."""

    async def main() -> tuple[list[str], list[PendingAction], str]:
        async with await safepoint.open_async_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
            run = await AsyncRun.start(store, "r")

            async def crash(key: str) -> str:
                raise Crash

            with pytest.raises(Crash):
                await run.action("charge", {"amount": 5}, crash)
            seen: list[PendingAction] = []

            async def hook(action: PendingAction) -> Reconcile:
                await asyncio.sleep(0)
                seen.append(action)
                return Reconcile.rerun()

            keys: list[str] = []

            async def charge(key: str) -> str:
                keys.append(key)
                return "charged"

            resumed = await AsyncRun.resume(store, "r", reconcile={"charge": hook})
            result = await resumed.action("charge", {"amount": 5}, charge)
            await resumed.finish()
            return keys, seen, result

    keys, seen, result = asyncio.run(main())
    assert result == "charged"
    assert [action.key for action in seen] == keys
    assert len(keys) == 1


def test_async_budget_and_human_input() -> None:
    """Budgets and ``resume_with`` behave as with ``Run``, awaited."""

    async def main() -> None:
        async with await safepoint.open_async_store("memory://") as store:
            run = await AsyncRun.start(store, "r", budget=Budget(tokens=10))
            await run.wait_for_input("proceed?")
            answered = await AsyncRun.resume_with(store, "r", "yes")
            assert answered.take_input() == "yes"
            with pytest.raises(BudgetExceeded):
                await answered.add_usage(tokens_in=11)
            assert (await store.load("r")).status is Status.FAILED
            assert not (await AsyncRun.open(store, "r")).active

    asyncio.run(main())
