"""One journaled turn of an ADK session: its number, keys, counters, start, rollback and end.

A *turn* is one ``runner.run_async(…, new_message=…)`` (or ``runner.run``) on a
session of a ``SafepointSessionService``. Its number lives in the session's
steps (state ``google_adk.turn``, stamped on every event the turn saves) and
in two journal entries: ``turn:<n>`` (written first: the session's step and
counters at the turn's start, its request the new message) and
``turn:<n>:end`` (written when the run ended). The same message sent while
the session's last turn has a start and no end *resumes* that turn: the
session is rolled back to the turn's start (one step, ``flows.rewind``: the
user's message, the model's function calls and the tools' responses the cut
turn had saved are no longer the session's), and the turn runs again with
its recorded calls replayed — so the session ends holding each event once.
A turn found finished once this call held the session, though open when it
looked first (another process resumed it meanwhile), is run again the same
way: every call replays, nothing is repeated.

Keys (``<app>/<user>/<session>|t<n>|<branch>|<agent>|model#<k>`` and
``…|<agent>|tool:<name>|<function call id>``): the session's three ids, the
turn, the agent's branch and name, the call's order among that agent's model
calls on that branch, or the tool's function-call id — never an invocation
id or an event id, which a re-run changes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from google.adk.errors.session_not_found_error import SessionNotFoundError

from safepoint import AsyncStore, Checkpoint, NotFound, RunHeld, Store
from safepoint.adapters.cache import is_head
from safepoint.flow import Flow, Invoke, RecordCall, head_or_none, load_or_none
from safepoint.journal import Place, Tally, ToolPolicy, holding, resends, session_turns
from safepoint.journal import counters as journal_counters
from safepoint.records import Lease, Recorded

from . import flows
from .naming import encoded

_MODEL_KEY = re.compile(r"\|model#\d+(~[0-9a-f]{16})?$")  # a model call's key (diverged or not)
TURN_STATE = "google_adk.turn"  # session step state: the number of the journaled turn that saved it
_PREFIX_IN_KEY = 256


@dataclass(eq=False)
class Turn:
    """What one turn's callbacks share: where entries go, what was counted, the calls between
    their before- and after-callbacks."""

    store: Store | AsyncStore
    run_id: str
    ids: tuple[str, str, str]  # app name, user id, session id
    number: int
    lease: Lease | None
    base: dict[str, Any]  # "step" and "counters" at the turn's start (from its start entry)
    lost_before: dict[str, int | float]
    policies: dict[str, ToolPolicy]
    spend: Any = None
    resolve_secrets: Any = False
    resumed: bool = False
    rolled_back: int = 0  # session events the resume took back
    models: Tally = field(default_factory=Tally)
    tools: Tally = field(default_factory=Tally)
    order: dict[tuple[str, str], int] = field(default_factory=dict)
    models_open: dict[tuple[str, str], Any] = field(default_factory=dict)  # slot -> calls.Pending
    tools_open: dict[str, Any] = field(default_factory=dict)  # function call id -> calls.Pending
    failed: set[str] = field(default_factory=set)  # model keys whose call failed here (the journal's)
    lost_pending: dict[str, int] = field(default_factory=dict)  # see ``lost_in``
    beat: Any = None  # holding.Beat

    def place(self) -> Place:
        return Place(self.run_id, self.lease)

    def prefix(self) -> str:
        ids = "/".join(encoded(part) for part in self.ids)
        if len(ids) > _PREFIX_IN_KEY:  # keys hold 1024 characters: long ids by their digest
            ids = "#" + hashlib.sha256(ids.encode("ascii")).hexdigest()
        return f"{ids}|t{self.number}"

    def model_key(self, slot: tuple[str, str]) -> tuple[str, int]:
        """The key of the next model call of ``slot`` (branch, agent), and its order."""
        n = self.order.get(slot, 0)
        self.order[slot] = n + 1
        return f"{self.prefix()}|{encoded(slot[0])}|{encoded(slot[1])}|model#{n}", n

    def tool_key(self, slot: tuple[str, str], tool: str, call_id: str) -> str:
        return (
            f"{self.prefix()}|{encoded(slot[0])}|{encoded(slot[1])}|tool:{encoded(tool)}|{encoded(call_id)}"
        )

    def counters(self) -> dict[str, int | float]:
        """The session's counters now: the turn's start plus one count per call recorded in this
        turn (made or replayed), lost spend apart."""
        return journal_counters.counters(self.models, self.tools, self.base["counters"], self.lost_before)

    def stamp(self, cp: Checkpoint) -> None:
        """Mark a session step as this turn's, with the counters so far."""
        cp.state[TURN_STATE] = self.number
        cp.counters.update(self.counters())


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
    head: Checkpoint  # the session's step once the turn is open (after a rollback: the rollback)
    lost_pending: dict[str, int]  # model keys re-sent by an earlier run, not recorded yet


def open_turn(
    run_id: str,
    session_id: str,
    request: Any,
    *,
    owner: str,
    terms: holding.Terms,
    store: Any,
    cached: Checkpoint | None = None,
) -> Flow[Opened]:
    """Hold the session, find which turn this call is, write its start, roll a cut turn back.

    ``cached``: the session's step as the service last read it (ADK reads the session just
    before a turn), used when it is still the run's head — a row read instead of the step's
    events decoded again."""
    looked = None
    try:  # at once when free (or its holder is gone): nobody can have finished a turn meanwhile
        lease = yield from holding.acquire(store, run_id, owner, holding.Terms(terms.hold, 0.0))
    except NotFound:
        raise SessionNotFoundError(f"Session {session_id} not found.") from None
    except RunHeld:  # a live holder: note the turn we came for before waiting for it
        head = yield from load_or_none(run_id)
        if head is None:
            raise SessionNotFoundError(f"Session {session_id} not found.") from None
        looked = yield from last_open(run_id, head, request)
        lease = yield from holding.acquire(store, run_id, owner, terms)
    try:
        head = yield from _head(run_id, cached)  # held: nobody else moves it until the turn lets go
        if head is None:  # deleted while we waited
            raise SessionNotFoundError(f"Session {session_id} not found.")
        number = turn_of(head)
        found = yield from last_open(run_id, head, request)
        if found is None and looked is not None and looked[0] == number and looked[2]:
            found = looked  # finished by the writer we waited for: run it again, all replayed
        lost_before = {name: head.counters.get(name, 0) for name in journal_counters.LOST}
        pending: dict[str, int] = {}
        rolled = 0
        if found is not None and not found[2]:  # a cut turn, another message now: it is dropped
            lost_before, _ = yield from lost_in(store, run_id, found[0], found[1], lost_before)
            head, rolled = yield from _rolled_back(
                store, lease, head, number=found[0], base=found[1], lost=lost_before
            )
            yield RecordCall(run_id, session_turns.end_key(found[0]), {"dropped": True}, None, None, lease)
            found = None
        if found is None:
            number += 1
            while True:  # a start entry with no session step: the crash came before one
                start = {
                    "step": head.step,
                    "counters": journal_counters.counted(head.counters),
                    "lost": lost_before,
                }
                entry: Recorded = yield RecordCall(
                    run_id, session_turns.start_key(number), start, request, None, lease
                )
                if entry.written or entry.same_request is not False:
                    break
                number += 1
            resumed, base = not entry.written, entry.result
        else:
            number, base, _ = found
            resumed = True
        if resumed:
            lost_before, pending = yield from lost_in(store, run_id, number, base, lost_before)
            head, rolled = yield from _rolled_back(
                store, lease, head, number=number, base=base, lost=lost_before
            )
        return Opened(number, lease, base, lost_before, resumed, rolled, head, pending)
    except BaseException:
        yield from holding.release(store, lease)
        raise


def _head(run_id: str, cached: Checkpoint | None) -> Flow[Checkpoint | None]:
    """The run's head: ``cached`` when it still is (one row read), else loaded."""
    if cached is not None:
        info = yield from head_or_none(run_id)
        if is_head(info, cached):
            return cached
    return (yield from load_or_none(run_id))


def lost_in(
    store: Any, run_id: str, number: int, base: Any, fallback: dict[str, int | float]
) -> Flow[tuple[dict[str, int | float], dict[str, int]]]:
    """What crashes cost a cut turn ``number`` so far: the ``LOST`` counters at its start plus one
    re-sent call per marker its earlier runs wrote (``model_call``'s, ``safepoint.journal.resends``),
    each estimated by the usage its call was recorded with; and the calls re-sent but not
    recorded yet (key -> markers), whose estimate the call adds once this run records it. Read
    from entries, not the session's last save: a run killed between a re-sent call and its next
    save still counts it."""
    entries: list[Recorded] = yield Invoke(store.recorded_calls, (run_id,))
    turn = f"|t{number}|"
    marked = resends.counted(entries, lambda key: turn in key and _MODEL_KEY.search(key) is not None)
    return journal_counters.with_lost(base.get("lost") or fallback, marked.tally), marked.pending


def add_lost(lost: dict[str, int | float], usage: Any, times: int = 1) -> None:
    """Add a re-sent call's usage (``times`` over) to the ``LOST`` estimates."""
    if usage is None:
        return
    for name, value in (
        ("lost_tokens_in_estimate", usage.tokens_in),
        ("lost_tokens_out_estimate", usage.tokens_out),
        ("lost_spend_estimate", usage.spend),
    ):
        total = lost.get(name, 0) + value * times
        lost[name] = round(total, 9) if isinstance(total, float) else total


def _rolled_back(
    store: Any, lease: Lease, head: Checkpoint, *, number: int, base: Any, lost: dict[str, Any]
) -> Flow[tuple[Checkpoint, int]]:
    """The session taken back to turn ``number``'s start (one step), and the events taken back."""
    if head.step == base["step"]:
        return head, 0
    back = yield from flows.rewind(head, int(base["step"]))
    back.state[TURN_STATE] = number
    back.counters.update({**base["counters"], **lost})
    yield Invoke(store.save, (back,), {"lease": lease})
    return back, int(head.counters[flows.EVENTS]) - int(back.counters[flows.EVENTS])


def last_open(run_id: str, head: Checkpoint, request: Any = None) -> Flow[tuple[int, Any, bool] | None]:
    """The session's last turn when it has a start and no end (cut by a crash, or running):
    (its number, its start, whether its message is ``request``)."""
    return (yield from session_turns.last_open(run_id, turn_of(head), request))


def shown(head: Checkpoint) -> Flow[int | None]:
    """The step a reader is shown instead of ``head`` while the session's last turn is open: its
    start. A runner routes a message by the session it reads, and a turn cut by a crash is
    resumed (or dropped) from its start; None when the head is what to show."""
    found = yield from last_open(head.run_id, head)
    if found is None or found[1]["step"] == head.step:
        return None
    return int(found[1]["step"])


def close_turn(turn: Turn) -> Flow[None]:
    """The turn's end entry (its counters), then the session is given back."""
    try:
        yield session_turns.end_entry(turn.run_id, turn.number, turn.counters(), turn.lease)
    finally:
        yield from holding.release(turn.store, turn.lease)
