"""One turn of a journaled session: which turn it is, its keys, its counters, its start and end.

A *turn* is one ``journal.run(agent, input, session=…)``. Its number lives in
the session's checkpoints (state ``openai_agents.turn``, stamped on every save
the turn makes) and in two journal entries: ``turn:<n>`` (written first: the
session's item count, counters and lost-spend counters at the turn's start,
its request the turn's input) and ``turn:<n>:end`` (written when the run
returned). A call with the input of a turn that has a start and no end
*resumes* it: the session is rolled back to the turn's start (one save; the
SDK had saved the partial turn step by step) and the turn runs again, its
recorded calls replayed. What crashes cost the turn so far is read from the
journal, not from the session's last save: its start's lost counters plus
one re-sent call per marker its earlier runs wrote before re-sending
(``safepoint.journal.resends``) — a run killed between a re-send and its
next save still counts it. A turn found finished once this call held the
session, though open when it looked first (another process resumed it
meanwhile), is run again the same way — every call replays, nothing is
repeated.

Keys (``session|t<n>|<path>|<agent>|model#<k>`` and
``…|<agent>|tool:<name>|<tool call id>``): the session, the turn, the
agent-as-tool path (``/<tool>:<call id>`` per nesting), the agent, and the
call's order among that agent's model calls on that path, or the tool call's
id — never anything a re-run changes.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from safepoint import AsyncStore, Checkpoint, Store
from safepoint.flow import Invoke, RecordCall
from safepoint.journal import Place, Tally, ToolPolicy, holding, resends, session_turns
from safepoint.journal import counters as journal_counters
from safepoint.records import Lease, Recorded
from safepoint.twins import Flow

from .session import TURN_STATE

_SESSION_IN_KEY = 128
_MODEL_KEY = re.compile(r"\|model#\d+(~[0-9a-f]{16})?$")  # a model call's key (diverged or not)

ACTIVE: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("safepoint_oa_turn", default=None)
PATH: contextvars.ContextVar[str] = contextvars.ContextVar("safepoint_oa_path", default="")
AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_oa_agent", default=None)
CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_oa_key", default=None)


@dataclass(eq=False)
class Turn:
    """What one turn's wrappers share (``ACTIVE``): where entries go, what was counted."""

    session: Any  # SafepointSession
    number: int
    lease: Lease | None
    base: dict[str, Any]  # "items", "counters" and "lost" at the turn's start (its start entry)
    lost_before: dict[str, int | float]  # lost-spend counters: the turn's start's, and its markers'
    policies: dict[str, ToolPolicy]  # non-idempotent tools by name (the journal's option)
    spend: Any = None  # Usage -> spend, or None
    resolve_secrets: Any = False
    resumed: bool = False
    rolled_back: int = 0  # session items the resume took back
    models: Tally = field(default_factory=Tally)
    tools: Tally = field(default_factory=Tally)
    order: dict[tuple[str, str], int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # re-sent by earlier runs, not recorded yet
    clones: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # id(original) -> (original, clone)

    @property
    def store(self) -> Store | AsyncStore:
        return self.session.store  # type: ignore[no-any-return]

    @property
    def run_id(self) -> str:
        return self.session.run_id  # type: ignore[no-any-return]

    def place(self) -> Place:
        return Place(self.run_id, self.lease)

    def prefix(self) -> str:
        return f"{turn_prefix(self.session.session_id, self.number)}{PATH.get()}"

    def next_model_key(self, agent: str) -> tuple[str, tuple[str, str], int]:
        """The key of ``agent``'s next model call on this path (and its order, to undo on error)."""
        slot = (PATH.get(), agent)
        n = self.order.get(slot, 0)
        self.order[slot] = n + 1
        return f"{self.prefix()}|{agent}|model#{n}", slot, n

    def tool_key(self, agent: str, tool: str, call_id: str | None) -> str:
        if not call_id:  # a model that gave no call id: the tool's order on this path instead
            slot = (PATH.get(), f"{agent}|tool:{tool}")
            n = self.order.get(slot, 0)
            self.order[slot] = n + 1
            call_id = f"#{n}"
        return f"{self.prefix()}|{agent}|tool:{tool}|{call_id}"

    def recorded(self, key: str, usage: Any) -> None:
        """A call an earlier run re-sent and never recorded is recorded now: its estimate."""
        late = Tally()
        for _ in range(self.pending.pop(key, 0)):
            late.lost(usage)
        self.lost_before = journal_counters.with_lost(self.lost_before, late)

    def counters(self) -> dict[str, int | float]:
        """The session's counters now: the turn's start plus one count per call recorded in this
        turn (made or replayed — never a replayed response's usage), lost spend apart."""
        start = self.base.get("counters", {})
        return journal_counters.counters(self.models, self.tools, start, self.lost_before)

    def stamp(self, cp: Checkpoint) -> None:
        """Mark a session save as this turn's, with the counters so far."""
        cp.state[TURN_STATE] = self.number
        cp.counters.update(self.counters())


def turn_prefix(session_id: str, number: int) -> str:
    """What every key of turn ``number`` of the session starts with."""
    if len(session_id) > _SESSION_IN_KEY:  # keys hold 1024 characters: a long id by its digest
        session_id = "#" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{session_id}|t{number}|"


def turn_of(head: Checkpoint | None) -> int:
    return session_turns.number_of(head, TURN_STATE)


@dataclass(frozen=True, slots=True)
class Opened:
    number: int
    lease: Lease
    base: dict[str, Any]
    lost_before: dict[str, int | float]
    resumed: bool
    rolled_back: int
    pending: dict[str, int]


def open_turn(session: Any, request: Any, owner: str, terms: holding.Terms) -> Flow[Opened]:
    """Hold the session, find which turn this call is, write its start, roll a resumed turn back."""
    run_id, store = session.run_id, session.store
    head = yield from session.head_or_create()
    looked = yield from _open_turn(run_id, head, request)  # before waiting: the turn we came for
    lease = yield from holding.acquire(store, run_id, owner, terms)
    try:
        head = yield from session.fresh_head()
        number = turn_of(head)
        found = yield from _open_turn(run_id, head, request)
        if found is None and looked is not None and looked[0] == number:
            found = looked  # finished by the writer we waited for: run it again, all replayed
        if found is None:
            number += 1
            while True:  # a start entry with no session save: the crash came before one
                counted = journal_counters.counted(None if head is None else head.counters)
                start = {"items": len(head.messages), "counters": counted, "lost": _lost(head)}
                entry: Recorded = yield RecordCall(
                    run_id, session_turns.start_key(number), start, request, None, lease
                )
                if entry.written or entry.same_request is not False:
                    break
                number += 1
            resumed = not entry.written
            base = entry.result
        else:
            number, base = found
            resumed = True
        lost_before, pending = _lost(head), dict[str, int]()
        if resumed:
            lost_before, pending = yield from _lost_in(session, number, base, lost_before)
        counters = {**base["counters"], **lost_before}
        rolled = (yield from session.rewind(base["items"], lease, number, counters)) if resumed else 0
        return Opened(number, lease, base, lost_before, resumed, rolled, pending)
    except BaseException:
        yield from holding.release(store, lease)
        raise


def _lost(head: Checkpoint | None) -> dict[str, int | float]:
    return {name: (0 if head is None else head.counters.get(name, 0)) for name in journal_counters.LOST}


def _lost_in(
    session: Any, number: int, base: Any, fallback: dict[str, int | float]
) -> Flow[tuple[dict[str, int | float], dict[str, int]]]:
    """What crashes cost cut turn ``number`` so far: its start's lost counters plus the re-sends
    its earlier runs marked (each estimated by its call's recorded usage), and the calls re-sent
    and not recorded yet. (A start written without them, by an earlier safepoint, falls back on
    the session's last save.)"""
    entries: list[Recorded] = yield Invoke(session.store.recorded_calls, (session.run_id,))
    prefix = turn_prefix(session.session_id, number)
    marked = resends.counted(entries, lambda key: key.startswith(prefix) and bool(_MODEL_KEY.search(key)))
    return journal_counters.with_lost(base.get("lost") or fallback, marked.tally), marked.pending


def _open_turn(run_id: str, head: Checkpoint | None, request: Any) -> Flow[tuple[int, Any] | None]:
    """The session's last turn, when it has a start with this input and no end: (number, start)."""
    found = yield from session_turns.last_open(run_id, turn_of(head), request)
    return None if found is None or not found[2] else (found[0], found[1])


def close_turn(turn: Turn) -> Flow[None]:
    """The turn's end entry (its counters), then the session is given back."""
    try:
        yield session_turns.end_entry(turn.run_id, turn.number, turn.counters(), turn.lease)
    finally:
        yield from let_go(turn)


def let_go(turn: Turn) -> Flow[None]:
    """Give the session back (a turn left open stays resumable). The session stops saving under
    this turn first: once the lease is released, another turn may take the session."""
    if turn.session.turn is turn:
        turn.session.turn = None
    yield from holding.release(turn.store, turn.lease)
