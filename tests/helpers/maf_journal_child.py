"""One process of the offline Agent Framework workflow (``maf_journal_app``), for the journal's crash tests.

``child`` brings workflow run ``turn`` (the message ``refund order <turn>``)
to its end on the SQLite file and ledger in ``workdir``: it resumes the
latest checkpoint when that one still has messages to deliver (a run a kill
cut short), starts the run when the store holds no sign of it, and otherwise
only reads the answer — through ``CallJournal`` or, with the journal off,
through ``workflow.run`` as an app without it would. It writes what it saw
to ``result-<pid>.json`` and touches ``ready-<pid>`` first, so a test that
kills it at a random instant measures from there; with ``kill_at`` (a
payment's key prefix, or ``payment#<n>``: this process's n-th payment) it
SIGKILLs itself right after that ledger effect (a payment made, its result
not yet recorded); with ``request#<n>``, right after the model was paid for
this process's n-th request (its response lost: in flight). Each model call the journal re-sends is noted in
``resent.log`` (fsynced, from the journal's log record, which comes before
the call), so the count survives a kill of the process that re-sent it.
With ``go`` it waits for that file first (two processes started together).

The tests fork these processes from a forkserver that imported this module
once: importing the framework takes seconds, and a forked child is still a
fresh process that has run nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from helpers import maf_journal_app as app
from safepoint import open_store
from safepoint.adapters.agent_framework import CallJournal, SafepointCheckpointStorage
from safepoint.testing.crash import Effect, Ledger


class _Resent(logging.Handler):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "safepoint_event", None) == "resent":
            with open(self.path, "a") as out:
                out.write(f"{os.getpid()}\n")
                out.flush()
                os.fsync(out.fileno())


def message(turn: int) -> str:
    return f"refund order {turn}"


def child(workdir: str, journal: bool, turn: int, kill_at: str | None = None, go: str | None = None) -> None:
    work = Path(workdir)
    logging.getLogger("safepoint.adapters.agent_framework").addHandler(_Resent(work / "resent.log"))
    logging.getLogger("agent_framework").setLevel(logging.ERROR)

    seen = {"record": 0, "model": 0}

    def on_effect(effect: Effect) -> None:
        if kill_at is None or effect.kind not in seen:
            return
        seen[effect.kind] += 1
        if effect.kind == "model":  # paid, its response not yet recorded: in flight
            if kill_at == f"request#{seen['model']}":
                os.kill(os.getpid(), signal.SIGKILL)
        elif effect.key.startswith(kill_at) or kill_at == f"payment#{seen['record']}":
            os.kill(os.getpid(), signal.SIGKILL)  # right after the payment, before its result is kept

    app.LEDGER["ledger"] = Ledger(work / "ledger.db", on_effect=on_effect)
    app.LEDGER["turn"] = turn
    (work / f"ready-{os.getpid()}").touch()
    while go is not None and not Path(go).exists():  # two processes let go together
        time.sleep(0.001)
    started = time.monotonic()
    store = open_store(f"sqlite:///{work / 'state.db'}")
    answer, counters = asyncio.run(_to_end(store, journal, turn))
    result = {"answer": answer, "counters": counters, "elapsed": time.monotonic() - started}
    store.close()
    out = work / f"result-{os.getpid()}.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    out.with_suffix(".tmp").replace(out)


async def _to_end(store: Any, journal: bool, turn: int) -> tuple[str, dict[str, Any]]:
    storage = SafepointCheckpointStorage(store)
    workflow = app.build(storage)
    calls = CallJournal(storage)
    latest = await storage.get_latest(workflow_name=app.NAME)
    state = _state(latest, turn)
    if state != "done":
        if state == "cut":
            kwargs: dict[str, Any] = {"checkpoint_id": latest.checkpoint_id}  # type: ignore[union-attr]
            message_ = None
        else:
            kwargs, message_ = {}, message(turn)
        if journal:
            await calls.run(workflow, message_, **kwargs)
        else:
            await workflow.run(message_, **kwargs)
        latest = await storage.get_latest(workflow_name=app.NAME)
    assert latest is not None
    assert _state(latest, turn) == "done"
    head = store.load(app.RUN_ID)
    return _answer(latest), dict(head.counters)


def _conversation(latest: Any) -> list[Any]:
    executors = (latest.state or {}).get("_executor_state") or {}
    return list((executors.get("auditor") or {}).get("full_conversation") or [])


def _answer(latest: Any) -> str:
    conversation = _conversation(latest)
    return str(conversation[-1].text) if conversation else ""


def _state(latest: Any, turn: int) -> str:
    """``cut``: the latest checkpoint has messages still to deliver; ``done``: it ends run ``turn``;
    ``new``: run ``turn`` left no checkpoint (never started, or killed before its first)."""
    if latest is None:
        return "new"
    if latest.messages:
        return "cut"
    conversation = _conversation(latest)
    asked = conversation[0].text if conversation else None
    return "done" if asked == message(turn) and _answer(latest).startswith("final answer") else "new"
