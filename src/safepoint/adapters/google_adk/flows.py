"""The session service's logic as flows (``safepoint.flow``): written once, for sync and async stores.

A session is one run. Step 0 is ``create_session``; step ``k`` appends the
session's ``k``-th event (``k`` >= 1), so the event at index ``e`` is always
added by step ``e + 1``. The run's messages are its events, split into
*segments* of ``segment`` events (the size is recorded at step 0): a step's
messages are the events of its own segment only, and the first step of each
segment starts a new message range holding just its event (a history rewrite:
no row is rewritten, and the step before still sees the whole previous
segment). So the latest step loads at most one segment, and the complete
segment ending at event ``e`` is step ``e + 1`` — which lets ``get_session``
read only the tail it needs (``num_recent_events``, ``after_timestamp``),
segment by segment from the newest, never the whole history.

A journaled turn cut by a crash is rolled back (``rewind``: one step that
copies the session as it was at the turn's start), after which steps no longer
follow events one to one. So every step written since holds
``state["segment_step"]``: the step whose messages are the whole segment
before its own. A step without it (written before any rollback) follows the
rule above.

The step's ``state`` holds the session's own state (``state``), its ids,
``created``/``updated`` (ADK's ``last_update_time``) and the id of the last
event; ``counters["events"]`` counts the events. ``app:`` and ``user:`` state
live in their own runs (``shared.py``).
"""

from __future__ import annotations

from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError

from safepoint import Checkpoint, Conflict, CorruptCheckpoint
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, thaw
from safepoint.flow import Flow, Save, head_or_none, load_or_none

from .framework import AFTER_TIMESTAMP_FILTERS
from .naming import session_labels

EVENTS = "events"  # the counter holding how many events a session has
SEGMENT_STEP = "segment_step"  # state: the step holding the complete previous segment


def _segment_start(count: int, size: int) -> int:
    """The index of the first event of the segment holding a session's last event."""
    return (count - 1) // size * size if count else 0


def _previous_segment(cp: Checkpoint, start: int) -> int:
    """The step whose messages are the whole segment before the one ``cp``'s messages start at
    index ``start`` (the pointer a rollback left, else the one-step-per-event rule)."""
    step = cp.state.get(SEGMENT_STEP)
    return step if isinstance(step, int) and not isinstance(step, bool) else start


def create(
    run_id: str, ids: tuple[str, str, str], state: dict[str, Any], *, now: float, segment: int
) -> Flow[Checkpoint]:
    """Step 0 of a new session run (``ids``: app name, user id, session id);
    ``AlreadyExistsError`` when the session exists."""
    app_name, user_id, session_id = ids
    cp = Checkpoint(run_id=run_id, step=0, labels=session_labels(app_name, user_id, session_id))
    cp.state = {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "state": state,
        "created": now,
        "updated": now,
        "last_event": None,
        "segment": segment,
    }
    cp.counters = {EVENTS: 0}
    try:
        yield Save(cp)
    except Conflict:  # the run exists (or another writer created it first)
        raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
    return cp


def exists(run_id: str) -> Flow[bool]:
    """Whether the session's run exists (one small query)."""
    return (yield from head_or_none(run_id)) is not None


def tail(head: Checkpoint, recent: int | None, after: float | None) -> Flow[list[Any]]:
    """The stored events ADK's in-memory service would return for ``recent`` and ``after``
    (its rule depends on the release: ``framework.AFTER_TIMESTAMP_FILTERS``).

    Segments are read from the newest back only while they can still matter:
    until ``recent`` events are in hand, or (through ADK 2.14) one older than
    ``after`` is. From ADK 2.15 ``after`` filters every event, and timestamps
    may go back, so without ``recent`` every segment is read.
    """
    events: list[Any] = list(head.messages)
    count, size = int(head.counters[EVENTS]), int(head.state["segment"])
    start = _segment_start(count, size)  # index of the head segment's first event
    newest = head
    while start > 0 and not _enough(events, recent, after):
        newest = yield from _segment_before(newest, start, size)
        events = [*newest.messages, *events]
        start -= size
    return _as_read(events, recent, after)


def _enough(events: list[Any], recent: int | None, after: float | None) -> bool:
    """Whether the events in hand (the newest ones) decide what ``_as_read`` returns."""
    if AFTER_TIMESTAMP_FILTERS:
        if recent is None:
            return False
        kept = len(events) if after is None else sum(e["timestamp"] >= after for e in events)
        return kept >= recent
    if recent is not None and len(events) >= recent:
        return True
    return after is not None and any(e["timestamp"] < after for e in events)


def _as_read(events: list[Any], recent: int | None, after: float | None) -> list[Any]:
    """ADK's in-memory rule over ``events`` (every event that can matter, oldest first)."""
    if AFTER_TIMESTAMP_FILTERS and after is not None:
        events = [e for e in events if e["timestamp"] >= after]
    if recent is not None:
        events = events[max(0, len(events) - recent) :] if recent else []
    if after is not None and not AFTER_TIMESTAMP_FILTERS:
        # Through ADK 2.14: the events after the newest one older than ``after``.
        for i in range(len(events) - 1, -1, -1):
            if events[i]["timestamp"] < after:
                events = events[i + 1 :]
                break
    return events


def _segment_before(cp: Checkpoint, start: int, size: int) -> Flow[Checkpoint]:
    """The step holding the whole segment before the one ``cp``'s messages start at ``start``."""
    step = _previous_segment(cp, start)
    older = yield from load_or_none(cp.run_id, step)
    if older is None or len(older.messages) != size:
        detail = f"segment ending at step {step} is missing (pruned by retention?)"
        raise CorruptCheckpoint(cp.run_id, step, detail)
    return older


def rewind(head: Checkpoint, step: int) -> Flow[Checkpoint]:
    """The step after ``head`` holding the session exactly as step ``step`` held it (its events,
    its own state, its last update), for the journal to take a cut turn back to its start.

    The events after it are no longer the session's; the earlier steps keep them (a history
    rewrite, no row changed). The copy names the step of its previous segment, since steps no
    longer follow events one to one after it.
    """
    then = yield from load_or_none(head.run_id, step)
    if then is None:
        raise CorruptCheckpoint(head.run_id, step, "the step a journaled turn started at is missing")
    cp = head.next()
    cp.messages = list(then.messages)
    count, size = int(then.counters[EVENTS]), int(then.state["segment"])
    state = thaw(then.state)
    state[SEGMENT_STEP] = _previous_segment(then, _segment_start(count, size))
    cp.state = state
    cp.counters[EVENTS] = count
    return cp


class Appender:
    """Appends events to session runs, remembering each run's head for incremental saves.

    A remembered head is used only while the run's head is still that step,
    saved at that instant (one small query checks it), so another process's
    append is seen before the stale-session check, not after.
    """

    def __init__(self, cache: CheckpointCache) -> None:
        self.cache = cache

    def head(self, run_id: str, session_id: str) -> Flow[Checkpoint]:
        """The session run's latest step; ``SessionNotFoundError`` when there is none."""
        info = yield from head_or_none(run_id)
        if info is None:
            self.cache.drop(run_id)
            raise SessionNotFoundError(f"Session {session_id} not found.")
        cached = self.cache.get(run_id)
        known = cached[0] if cached is not None else None
        if known is not None and known.step == info.head_step and known.created_at == info.updated_at:
            return known
        head = yield from load_or_none(run_id)
        if head is None:
            raise SessionNotFoundError(f"Session {session_id} not found.")
        self.cache.put(head, replace=True)
        return head

    def save(
        self, head: Checkpoint, event: dict[str, Any], session_delta: dict[str, Any], check: Any
    ) -> Flow[Checkpoint]:
        """Save ``event`` as the step after ``head``; on a ``Conflict``, reload and ``check`` again."""
        run_id = head.run_id
        for _ in range(MAX_ATTEMPTS):
            cp = self.next_step(head, event, session_delta)
            try:
                yield Save(cp)
            except Conflict:
                self.cache.drop(run_id)
                head = yield from self.head(run_id, str(head.state["session_id"]))
                check(head)  # raises StaleSessionError when the other writer made ours stale
                continue
            self.cache.put(cp)
            return cp
        raise gave_up(run_id, cp.step)

    @staticmethod
    def next_step(head: Checkpoint, event: dict[str, Any], session_delta: dict[str, Any]) -> Checkpoint:
        cp = head.next()
        count = int(head.counters[EVENTS])
        if count and count % int(head.state["segment"]) == 0:
            cp.messages = [event]  # a new segment: a new range, the old one stays with the steps before
            if SEGMENT_STEP in head.state:  # after a rollback: say where the segment before is
                cp.state[SEGMENT_STEP] = head.step
        else:
            cp.messages.append(event)
        cp.counters[EVENTS] = count + 1
        state = cp.state
        state["state"] = {**thaw(state["state"]), **session_delta}
        state["updated"] = event["timestamp"]
        state["last_event"] = event.get("id", "")
        return cp
