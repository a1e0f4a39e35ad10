"""The child process for any agent entry point: run it, report each save and side effect.

``EntrySpec`` says what a child runs and builds its command line; the parent side
(``process.AgentProcess``, used by the crash-test kit and the demo) starts children and kills them.

    python -m safepoint.crashrig.child package.module:function --store URL --run-id ID
        --ledger PATH [--store-options package.module:function] [--kwargs JSON]
        [--pause-after STEP] [--pause-after-effect N] [--kill-in-save SAVE:STATEMENT]

It opens the store (with the options the named function returns) and the
ledger, then calls ``function(store, run_id, ledger, **kwargs)`` — or, for an
``async def`` entry point, the same with an ``AsyncStore``, under asyncio.
It prints ``saved <step>`` after each save returns (the step is durable),
``effect <n> <key> <kind> applied|absorbed`` after each side effect and ``result <json>`` with what
the entry point returned. ``--pause-after`` and ``--pause-after-effect`` make
it print ``paused …`` and block on stdin there, so the parent can SIGKILL it at
exactly that point; ``--kill-in-save`` makes it SIGKILL itself inside a save.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safepoint.errors import InvalidArgument
from safepoint.model import Checkpoint
from safepoint.records import CheckpointInfo, Lease
from safepoint.store import AsyncStore, Store, open_async_store, open_store
from safepoint.twins import Flow, Invoke, awaiting, blocking

from .ledger import Effect, Ledger
from .statements import StatementKiller


def load_entry(path: str) -> Callable[..., Any]:
    """The callable ``path`` names: ``"package.module:function"`` (dots after the colon for attributes)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise InvalidArgument(f"an entry point is 'package.module:function', not {path!r}")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise InvalidArgument(f"entry point {path!r} is not callable")
    return target  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class EntrySpec:
    """One agent run a child works on: entry point, store, ledger, options."""

    entry: str  # "package.module:function"
    store_url: str
    ledger: Path
    run_id: str = "crash-test"
    store_options: str | None = None  # "package.module:function" returning open_store kwargs
    kwargs: str = "{}"  # JSON keyword arguments for the entry point

    def command(self, *extra: str) -> list[str]:
        cmd = [sys.executable, "-m", "safepoint.crashrig.child", self.entry, "--store", self.store_url]
        cmd += ["--run-id", self.run_id, "--ledger", str(self.ledger), "--kwargs", self.kwargs]
        if self.store_options is not None:
            cmd += ["--store-options", self.store_options]
        return cmd + list(extra)

    def open_store_options(self) -> dict[str, Any]:
        """The ``open_store`` options the child uses, for the parent to open the same store."""
        return {} if self.store_options is None else dict(load_entry(self.store_options)())


class _Boundary:
    """Prints ``saved <step>`` after each save of the kit's run; blocks at the ``--pause-after`` step.

    Saves of other runs (an adapter's index runs, shared state) are not the run's boundaries:
    they are left out, so the parent's step arithmetic holds whatever else the agent writes.
    """

    def __init__(self, run_id: str, pause_after: int | None) -> None:
        self.run_id, self.pause_after = run_id, pause_after

    def __call__(self, info: CheckpointInfo) -> None:
        if info.run_id != self.run_id:
            return
        print(f"saved {info.step}", flush=True)
        if info.step == self.pause_after:
            print(f"paused {info.step}", flush=True)
            sys.stdin.readline()  # the parent SIGKILLs us here, exactly at the boundary


def _observe(store: Store | AsyncStore, boundary: _Boundary) -> None:
    """Tell ``boundary`` of each checkpoint ``store`` saves — blocking or awaited, one flow
    (``safepoint.twins``) — on this store instance only."""
    save = store.save

    def observing(checkpoint: Checkpoint, lease: Lease | None) -> Flow[CheckpointInfo]:
        info: CheckpointInfo = yield Invoke(save, (checkpoint,), {"lease": lease})
        boundary(info)
        return info

    if isinstance(store, AsyncStore):

        async def awaited(checkpoint: Checkpoint, *, lease: Lease | None = None) -> CheckpointInfo:
            return await awaiting(observing(checkpoint, lease))

        store.save = awaited
    else:

        def blocked(checkpoint: Checkpoint, *, lease: Lease | None = None) -> CheckpointInfo:
            return blocking(observing(checkpoint, lease))

        store.save = blocked


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m safepoint.crashrig.child")
    p.add_argument("entry", help="package.module:function")
    p.add_argument("--store", required=True, help="store URL")
    p.add_argument("--run-id", required=True)
    p.add_argument("--ledger", required=True, type=Path)
    p.add_argument("--store-options", help="package.module:function returning open_store options")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the entry point")
    p.add_argument("--pause-after", type=int, help="after saving this step, block on stdin")
    p.add_argument("--pause-after-effect", type=int, help="after this many side effects, block on stdin")
    p.add_argument("--kill-in-save", help="SAVE:STATEMENT — SIGKILL self inside that save")
    a = p.parse_args(argv)
    entry = load_entry(a.entry)
    options = dict(load_entry(a.store_options)()) if a.store_options else {}
    killer = None
    if a.kill_in_save:
        save, statement = (int(x) for x in a.kill_in_save.split(":"))
        killer = options["trace"] = StatementKiller(save, statement)
    effects = 0

    def on_effect(effect: Effect) -> None:
        nonlocal effects
        effects += 1
        outcome = "applied" if effect.applied else "absorbed"  # absorbed: an idempotent repeat
        print(f"effect {effects} {effect.key[:16]} {effect.kind} {outcome}", flush=True)
        if effects == a.pause_after_effect:
            print(f"paused effect {effects}", flush=True)
            sys.stdin.readline()  # the effect happened; the save that records it has not

    boundary, kwargs = _Boundary(a.run_id, a.pause_after), json.loads(a.kwargs)
    with Ledger(a.ledger, on_effect=on_effect) as ledger:
        if inspect.iscoroutinefunction(entry):
            call = _AsyncCall(entry, a.store, options, killer, boundary)
            result = asyncio.run(call(a.run_id, ledger, kwargs))
        else:
            with open_store(a.store, **options) as store:
                _observe(store, boundary)
                if killer is not None:
                    killer.armed = True  # after open_store: its DDL transaction is not a save
                result = entry(store, a.run_id, ledger, **kwargs)
    print("result " + json.dumps(result, sort_keys=True, default=str), flush=True)
    return 0


@dataclass(frozen=True, slots=True)
class _AsyncCall:
    """An ``async def`` entry point, run on an ``AsyncStore`` observed like the sync one."""

    entry: Callable[..., Any]
    url: str
    options: dict[str, Any]
    killer: StatementKiller | None
    boundary: _Boundary

    async def __call__(self, run_id: str, ledger: Ledger, kwargs: dict[str, Any]) -> Any:
        store = await open_async_store(self.url, **self.options)
        try:
            _observe(store, self.boundary)
            if self.killer is not None:
                self.killer.armed = True
            return await self.entry(store, run_id, ledger, **kwargs)
        finally:
            await store.close()


if __name__ == "__main__":
    sys.exit(main())
