"""One process of the offline Agents SDK app (``oa_journal_agent``), for the journal's crash tests.

``child`` runs (or resumes) one turn of session ``user-1`` on the SQLite file
and ledger in ``workdir`` — through ``CallJournal`` or, with the journal off,
through ``Runner.run`` as an app without it would — and writes what it saw to
``result-<pid>.json``. It touches ``ready-<pid>`` first, so a test that kills
it at a random instant measures from there; with ``kill_at`` it SIGKILLs
itself right after that ledger effect (a payment made, its result not yet
recorded; ``model:<model>#<k>``: each time that model's ``k``-th request is
paid). Every model call the journal re-sends is noted in ``resent.log``
(fsynced, from the journal's own log record, which comes before the call),
so the count survives a kill of the process that re-sent it.

The tests fork these processes from a forkserver that imported this module
once (``multiprocessing``'s ``set_forkserver_preload``): importing the SDK
takes seconds, and a forked child is still a fresh process that has run
nothing.
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

from agents import Runner

from helpers import oa_journal_agent as app
from safepoint import NotFound, open_store
from safepoint.adapters.openai_agents import CallJournal, SafepointSession
from safepoint.testing.crash import Effect, Ledger

SESSION = "user-1"


class _Resent(logging.Handler):
    """Appends a line to ``resent.log`` for each model call the journal sends again."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "safepoint_event", None) == "resent":
            with open(self.path, "a") as log:
                log.write(f"{os.getpid()}\n")
                log.flush()
                os.fsync(log.fileno())


def child(
    workdir: str,
    journal: bool,
    mode: str,
    kill_at: str | None = None,
    go: str | None = None,
    *,
    turns: int = 1,
) -> None:
    work = Path(workdir)
    logging.getLogger("safepoint.adapters.openai_agents").addHandler(_Resent(work / "resent.log"))

    def on_effect(effect: Effect) -> None:
        paid = effect.kind == "model" and kill_at == "model:" + effect.key.split("|", 1)[0]
        if paid or (effect.kind == "record" and effect.key == kill_at):
            os.kill(os.getpid(), signal.SIGKILL)  # right after the payment, before its result is kept

    app.LEDGER["ledger"] = Ledger(work / "ledger.db", on_effect=on_effect)
    (work / f"ready-{os.getpid()}").touch()
    while go is not None and not Path(go).exists():  # started together with another child
        time.sleep(0.001)
    started = time.monotonic()
    store = open_store(f"sqlite:///{work / 'state.db'}")
    session = SafepointSession(SESSION, store)
    turn = None
    for number in range(1, turns + 1):  # the program's turns, each run once (or resumed)
        answer = _answered(store, session, journal, number)
        if answer is None:
            answer, turn = asyncio.run(_turn(session, journal, mode, "hi" if number == 1 else f"hi {number}"))
    head = store.load(session.run_id)
    result: dict[str, Any] = {
        "answer": answer,
        "counters": dict(head.counters),
        "elapsed": time.monotonic() - started,
        "items": len(head.messages),
    }
    if turn is not None:
        result.update(
            number=turn.number,
            resumed=turn.resumed,
            called=turn.models.called,
            replayed=turn.models.replayed,
            resent=turn.models.resent,
            reconciled=turn.tools.reconciled,
        )
    store.close()
    out = work / f"result-{os.getpid()}.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    out.with_suffix(".tmp").replace(out)


def _answered(store: Any, session: SafepointSession, journal: bool, number: int) -> str | None:
    """Turn ``number``'s answer if an earlier process finished it (killed after that): an app runs
    each message once. With the journal, the turn's end entry says so; without (one turn), the
    session's last item."""
    try:
        head = store.load(session.run_id)
    except NotFound:
        return None
    if journal and store.recorded_call(session.run_id, f"turn:{number}:end") is None:
        return None
    answers = [m for m in head.messages if m.get("type") == "message" and m.get("role") == "assistant"]
    last = head.messages[-1] if head.messages else {}
    if not answers or (not journal and last is not answers[-1]):
        return None
    text: str = answers[-1]["content"][0]["text"]  # the latest answer (every turn's is the same)
    return text


async def _turn(session: SafepointSession, journal: bool, mode: str, said: str) -> tuple[Any, Any]:
    agent, config = app.build()
    if not journal:
        return (await Runner.run(agent, said, session=session, run_config=config)).final_output, None
    calls = CallJournal()
    if mode == "streamed":
        streamed = await calls.run_streamed(agent, said, session=session, run_config=config)
        async for _ in streamed.stream_events():
            pass
        return streamed.final_output, calls.last_turn
    return (await calls.run(agent, said, session=session, run_config=config)).final_output, calls.last_turn
