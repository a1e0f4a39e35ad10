"""A process that resumes runs with a pending non-idempotent action, on command — or holds one.

    python tests/helpers/exclusive_resumer.py STORE_URL LEDGER NAME sync|async
    python tests/helpers/exclusive_resumer.py STORE_URL LEDGER NAME hold RUN_ID HOLD_SECONDS

``sync``/``async``: reads ``RUN_ID KIND GO_AT`` lines from stdin. At the
wall-clock instant GO_AT (so that two such processes start together) it
resumes RUN_ID — KIND ``open``: ``Run.open`` with the tool's reconcile hook
``rerun``; KIND ``answer``: ``Run.resume_with(..., Reconcile.rerun())`` on a
run waiting for that decision — then takes the action if the run is still
active and finishes the run. The action's effect is a line appended to
LEDGER (``O_APPEND``: outside the database, never rolled back), then a
short sleep, as a slow mail API would take. It answers each command with
one line on stdout: ``done`` (it took the action), ``idle`` (the run was
already finished) or ``late`` (``resume_with`` found the run no longer
waiting). ``sync`` uses ``Run``, ``async`` uses ``AsyncRun``.

``hold``: opens RUN_ID with ``hold=HOLD_SECONDS``, prints ``held`` and sleeps
until killed (the heartbeat keeps the hold alive).

Store options (a PostgreSQL schema) come as JSON in ``SAFEPOINT_TEST_STORE_OPTIONS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import safepoint
from safepoint import AsyncRun, Reconcile, Run, RunStatusError

EFFECT_SECONDS = 0.02
HOOKS = {"send": Reconcile.rerun()}


def effect(ledger: str, run_id: str, name: str, key: str) -> str:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{run_id}\t{key}\t{name}\n".encode())
    finally:
        os.close(fd)
    time.sleep(EFFECT_SECONDS)
    return f"sent-{key[:8]}"


def wait_until(go_at: float) -> None:
    time.sleep(max(0.0, go_at - time.time()))


def resume_sync(store: safepoint.Store, ledger: str, name: str, run_id: str, kind: str) -> str:
    try:
        if kind == "open":
            run = Run.open(store, run_id, reconcile=HOOKS)
        else:
            run = Run.resume_with(store, run_id, Reconcile.rerun(), reconcile=HOOKS)
    except RunStatusError:
        return "late"
    with run:
        if not run.active:
            return "idle"
        run.action("send", {"to": run_id}, lambda key: effect(ledger, run_id, name, key))
        run.finish()
        return "done"


async def resume_async(store: safepoint.AsyncStore, ledger: str, name: str, run_id: str, kind: str) -> str:
    try:
        if kind == "open":
            run = await AsyncRun.open(store, run_id, reconcile=HOOKS)
        else:
            run = await AsyncRun.resume_with(store, run_id, Reconcile.rerun(), reconcile=HOOKS)
    except RunStatusError:
        return "late"
    async with run:
        if not run.active:
            return "idle"
        await run.action("send", {"to": run_id}, lambda key: effect(ledger, run_id, name, key))
        await run.finish()
        return "done"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    url, ledger, name, mode = sys.argv[1:5]
    options: dict[str, Any] = json.loads(os.environ.get("SAFEPOINT_TEST_STORE_OPTIONS", "{}"))
    if mode == "hold":
        store = safepoint.open_store(url, **options)
        run = Run.open(store, sys.argv[5], hold=float(sys.argv[6]), reconcile=HOOKS)  # stays running
        say("held")
        while run.active:
            time.sleep(60)
        return
    if mode == "sync":
        with safepoint.open_store(url, **options) as store:
            for line in sys.stdin:
                run_id, kind, go_at = line.split()
                wait_until(float(go_at))
                say(resume_sync(store, ledger, name, run_id, kind))
        return

    async def serve() -> None:
        async with await safepoint.open_async_store(url, **options) as store:
            for line in sys.stdin:  # blocking between rounds is fine: nothing else runs meanwhile
                run_id, kind, go_at = line.split()
                wait_until(float(go_at))
                say(await resume_async(store, ledger, name, run_id, kind))

    asyncio.run(serve())


if __name__ == "__main__":
    main()
