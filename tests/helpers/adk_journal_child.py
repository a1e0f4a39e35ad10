"""One process of the offline ADK app (``adk_journal_agent``), for the journal's crash tests.

``child`` runs (or resumes) turns 1..``turns`` of session ``ada/chat`` on the
SQLite file and ledger in ``workdir`` — through a ``Runner`` with
``CallJournal`` or, with the journal off, the same runner without it — and
writes what it saw to ``result-<pid>.json``. It touches ``ready-<pid>``
first, so a test that kills it at a random instant measures from there; with
``kill_at`` it SIGKILLs itself right after that ledger effect (a payment
made, its result not yet recorded; or a model request paid, its response
not yet recorded). Each model call the journal re-sends is
noted in ``resent.log`` (fsynced, from the journal's log record, which comes
before the call). Odd processes stream (SSE), even ones do not.

A turn is answered once: with the journal, its end entry says so; without, the
session's last event being the turn's answer. Anything else is sent again —
the documented way to finish a cut turn.
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

from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps import App
from google.adk.runners import Runner
from google.genai import types

from helpers import adk_journal_agent as app
from safepoint import open_store
from safepoint.adapters.google_adk import CallJournal, SafepointSessionService
from safepoint.testing.crash import Effect, Ledger

USER, SESSION = "ada", "chat"


class _Resent(logging.Handler):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "safepoint_event", None) == "resent":
            with open(self.path, "a") as log:
                log.write(f"{os.getpid()}\n")
                log.flush()
                os.fsync(log.fileno())


def child(workdir: str, journal: bool, turns: int, kill_at: str | None = None, go: str | None = None) -> None:
    work = Path(workdir)
    logging.getLogger("safepoint.adapters.google_adk").addHandler(_Resent(work / "resent.log"))
    logging.getLogger("google_adk").setLevel(logging.CRITICAL)  # the app's warnings, not ours

    def on_effect(effect: Effect) -> None:
        if effect.kind in ("record", "model") and effect.key == kill_at:
            # Right after a payment (its result not kept yet), or a model request the provider
            # was paid for (its response never recorded: in flight, to be re-sent and counted).
            os.kill(os.getpid(), signal.SIGKILL)

    app.LEDGER["ledger"] = Ledger(work / "ledger.db", on_effect=on_effect)
    (work / f"ready-{os.getpid()}").touch()
    while go is not None and not Path(go).exists():  # started together with another child
        time.sleep(0.001)
    started = time.monotonic()
    store = open_store(f"sqlite:///{work / 'state.db'}")
    result = asyncio.run(run_turns(store, journal, turns, stream=os.getpid() % 2 == 1))
    result["elapsed"] = time.monotonic() - started
    store.close()
    out = work / f"result-{os.getpid()}.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    out.with_suffix(".tmp").replace(out)


async def run_turns(store: Any, journal: bool, turns: int, *, stream: bool) -> dict[str, Any]:
    service = SafepointSessionService(store)
    run_id = service.run_id_of(app.APP, USER, SESSION)
    if await service.get_session(app_name=app.APP, user_id=USER, session_id=SESSION) is None:
        await service.create_session(app_name=app.APP, user_id=USER, session_id=SESSION)
    calls = CallJournal() if journal else None
    plugins = [calls] if calls else []
    runner = Runner(app=App(name=app.APP, root_agent=app.build(), plugins=plugins), session_service=service)
    config = RunConfig(streaming_mode=StreamingMode.SSE if stream else StreamingMode.NONE)
    called = 0
    for n in range(1, turns + 1):
        if _answered(store, run_id, n, journal):
            continue
        message = types.Content(role="user", parts=[types.Part(text=f"ask:{n}")])
        async for _ in runner.run_async(
            user_id=USER, session_id=SESSION, new_message=message, run_config=config
        ):
            pass
        called += calls.last_turn.models.called if calls and calls.last_turn else 0
    session = await SafepointSessionService(store).get_session(
        app_name=app.APP, user_id=USER, session_id=SESSION
    )
    assert session is not None
    events = [
        [event.author, event.model_dump(mode="json", exclude_none=True, include={"content"}).get("content")]
        for event in session.events
    ]
    recorded = [e for e in store.recorded_calls(run_id) if e.done and e.usage is not None]
    entries = {  # the usage of every response the journal recorded, each once
        "tokens_in": sum(e.usage.tokens_in for e in recorded),
        "tokens_out": sum(e.usage.tokens_out for e in recorded),
    }
    counters = dict(store.load(run_id).counters)
    return {"events": events, "counters": counters, "entries": entries, "called": called}


def _answered(store: Any, run_id: str, n: int, journal: bool) -> bool:
    if journal:
        return store.recorded_call(run_id, f"turn:{n}:end") is not None
    for message in store.load(run_id).messages:  # without: the session holds the turn's answer
        for part in (message.get("content") or {}).get("parts") or []:
            if part.get("text") == app.answer(n):
                return True
    return False
