"""One process of the offline Pydantic AI shop (``pai_journal_agent``), for the journal's crash tests.

``child`` runs (or goes on with) conversation ``order-chat`` on the SQLite
file and ledger in ``workdir``, ``turns`` turns in all — each the app's own
three lines: load the conversation (or start it), ``agent.run`` the turn's
prompt, save — with the journal on the agent or without it. A process
started after a kill goes on from the turns the store holds; the turn the
kill cut, never saved, is run again (with the journal: every recorded call
replayed). It touches ``ready-<pid>`` first, so a test that kills it at a
random instant measures from there; with ``kill_at`` it SIGKILLs itself right
after that ledger effect: a payment made (``charge:<amount>``) or a model
request paid (``t<turn>:s<step>``), its result not yet recorded. It
writes what it saw to ``result-<pid>.json``.

The tests fork these processes from a forkserver that imported this module
once (``set_forkserver_preload``): a forked child is still a fresh process
that has run nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.usage import UsageLimits

from helpers import pai_journal_agent as app
from safepoint import open_store
from safepoint.adapters.pydantic_ai import SafepointConversationStore, SafepointJournal
from safepoint.testing.crash import Effect, Ledger

CONVERSATION = "order-chat"
NO_LIMIT = UsageLimits(request_limit=None)


def child(workdir: str, journal: bool, turns: int, kill_at: str | None = None, go: str | None = None) -> None:
    work = Path(workdir)

    def on_effect(effect: Effect) -> None:
        if effect.kind in ("record", "model") and effect.key == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # right after the payment (or the paid request), unrecorded

    app.LEDGER["ledger"] = Ledger(work / "ledger.db", on_effect=on_effect)
    (work / f"ready-{os.getpid()}").touch()
    while go is not None and not Path(go).exists():  # started together with another child
        time.sleep(0.001)
    started = time.monotonic()
    store = open_store(f"sqlite:///{work / 'state.db'}")
    conversations = SafepointConversationStore(store)
    calls = SafepointJournal(conversations) if journal else None
    made = asyncio.run(_chat(conversations, calls, turns))
    run_id = conversations.run_id(CONVERSATION)
    head = store.load(run_id)
    # the responses the journal recorded (not the marks of requests re-sent, their usage kept apart)
    responses = [
        e
        for e in store.recorded_calls(run_id)
        if "|model#" in e.key and e.done and e.usage and "|resent" not in e.key
    ]
    result: dict[str, Any] = {
        "answers": made["answers"],
        "messages": made["messages"],
        "counters": dict(head.counters),
        "recorded_tokens": [
            sum(e.usage.tokens_in for e in responses),
            sum(e.usage.tokens_out for e in responses),
        ],
        "elapsed": time.monotonic() - started,
        "called": made["called"],
    }
    store.close()
    out = work / f"result-{os.getpid()}.json"
    out.with_suffix(".tmp").write_text(json.dumps(result))
    out.with_suffix(".tmp").replace(out)


async def _chat(conversations: SafepointConversationStore, calls: Any, turns: int) -> dict[str, Any]:
    agent = app.build(calls)
    called = 0
    while True:
        conversation = await conversations.load(CONVERSATION) or Conversation(conversation_id=CONVERSATION)
        done = _prompts(conversation.messages)
        if done >= turns:
            break
        # The conversation's usage carries over: the default request budget (50) would end it.
        result = await agent.run(f"order {done}", conversation=conversation, usage_limits=NO_LIMIT)
        try:
            await conversations.save(result)
        except ConversationConflict:
            continue  # another process saved this turn first (it ran it too): load it again
        if calls is not None and calls.last_turn is not None:
            called += calls.last_turn.models.called
    answers = [
        part.content
        for message in conversation.messages
        for part in message.parts
        if getattr(part, "part_kind", "") == "text"
    ]
    return {"answers": answers, "messages": _projection(conversation.messages), "called": called}


def _prompts(messages: list[Any]) -> int:
    return sum(getattr(part, "part_kind", "") == "user-prompt" for m in messages for part in m.parts)


def _projection(messages: list[Any]) -> list[Any]:
    """The history without the clock and run ids: what an uninterrupted run must equal."""
    return [
        [(part.part_kind, str(getattr(part, "content", getattr(part, "args", "")))) for part in m.parts]
        for m in messages
    ]
