"""``SafepointSessionService``: ADK's ``BaseSessionService`` over safepoint runs.

The methods are ADK's (all async); each runs one flow (``flows.py``,
``shared.py``) on the store through the adapters' ``Runner``, so a ``Store``
(in a worker thread) and an ``AsyncStore`` (awaited) run the same logic.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from typing_extensions import override

from safepoint import AsyncStore, Checkpoint, InvalidArgument, Store, StoreClosed
from safepoint.adapters.cache import CheckpointCache, thaw
from safepoint.adapters.runner import Runner, open_given
from safepoint.flow import FindRuns, Flow, Save, delete_if_present, load_or_none
from safepoint.twins import Invoke, translate

from . import flows, shared
from .codec import event_from_json, event_to_json, merged, split_scopes, state_to_json
from .naming import session_run_id, sessions_filter
from .turn import TURN_STATE, shown

SEGMENT = 256  # events per stored segment: the most a tail read loads beyond what it returns
_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)


class SafepointSessionService(BaseSessionService):
    """An ADK session service whose sessions are safepoint runs (see the package docstring).

    ``store``: a ``Store``, an ``AsyncStore``, or a URL for ``safepoint.open_store``
    (the service then owns it: ``close()`` closes it), opened with ``store_options``.
    ``segment_size``: events per stored segment, for new sessions (see ``flows``).
    ``run_id``: ``(app_name, user_id, session_id) -> run id``, to name session runs
    yourself (the default is ``google-adk/<app>/<user>/<session>``, percent-encoded).
    """

    def __init__(
        self,
        store: Store | AsyncStore | str,
        *,
        segment_size: int = SEGMENT,
        run_id: Callable[[str, str, str], str] | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        if type(segment_size) is not int or not 1 <= segment_size <= 100_000:
            raise InvalidArgument("segment_size must be an int from 1 to 100000")
        self.store: Store | AsyncStore
        self.store, self._owned = open_given(store, store_options)
        self._runner = Runner(self.store)
        self._segment = segment_size
        self._run_id = run_id or session_run_id
        self._appender = flows.Appender(CheckpointCache())
        self._scopes = CheckpointCache()
        self._closed = False
        self._held: dict[str, Any] = {}  # run id -> the journaled turn holding it (turn.Turn)

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        self._check_open()
        session_id = (session_id.strip() if session_id else None) or platform_uuid.new_uuid()
        run_id = self._run_id(app_name, user_id, session_id)
        parts = split_scopes(state_to_json(state or {}, "state"))
        flow = self._create(run_id, app_name, user_id, session_id, parts)
        return await self._runner.arun(flow, lock=run_id)

    @override
    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        self._check_open()
        session_id = session_id.strip() if session_id else session_id
        flow = self._get(self._run_id(app_name, user_id, session_id), app_name, user_id, config)
        return await self._runner.arun(flow)

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        self._check_open()
        return ListSessionsResponse(sessions=await self._runner.arun(self._list(app_name, user_id)))

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self._check_open()
        run_id = self._run_id(app_name, user_id, session_id.strip() if session_id else session_id)
        self._appender.cache.drop(run_id)
        await self._runner.arun(delete_if_present(run_id), lock=run_id)
        self._appender.cache.drop(run_id)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        self._check_open()
        return await self._runner.arun(shared.read(app_name, user_id))

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        self._check_open()
        if event.partial:
            return event
        self._apply_temp_state(session, event)  # temp: keys live in the session object only
        event = self._trim_temp_delta_state(event)
        data = event_to_json(event)
        app, user, own = split_scopes(data.get("actions", {}).get("state_delta") or {})
        run_id = self._run_id(session.app_name, session.user_id, session.id)
        flow = self._append(run_id, session, data, (app, user, own))
        turn = self._held.get(run_id)
        if turn is not None:  # a journaled turn holds the session: its saves go under its lease
            flow = translate(flow, partial(_under, turn))
        await self._runner.arun(flow, lock=run_id)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    def run_id_of(self, app_name: str, user_id: str, session_id: str) -> str:
        """The run holding a session (what ``safepoint show`` and ``history`` take)."""
        return self._run_id(app_name, user_id, session_id)

    async def hold_for(self, turn: Any, session: Session, head: Checkpoint) -> None:
        """Save the session's events under ``turn``'s lease, stamped with its counters, until
        ``let_go``; ``session`` (the runner's) is brought to ``head`` when it is not there — after a
        rollback, or another process's turn while this one waited for the session."""
        self._held[turn.run_id] = turn
        self._appender.cache.put(head, replace=True)
        last = session.events[-1].id if session.events else None
        stored = head.state.get("last_event")
        if session.last_update_time == head.state["updated"] and last == (stored or None):
            return
        app_name, user_id = session.app_name, session.user_id
        fresh = await self._runner.arun(self._get(turn.run_id, app_name, user_id, None))
        if fresh is None:
            raise StaleSessionError(_STALE)
        session.events[:] = fresh.events
        session.state.clear()
        session.state.update(fresh.state)
        session.last_update_time = fresh.last_update_time

    def cached_head(self, run_id: str) -> Checkpoint | None:
        """The session's step this service last read or wrote (None: none kept)."""
        cached = self._appender.cache.get(run_id)
        return None if cached is None else cached[0]

    def let_go(self, turn: Any) -> None:
        """Stop saving under ``turn`` (its lease is about to be given back)."""
        run_id = turn.run_id
        if self._held.get(run_id) is turn:
            del self._held[run_id]

    def close(self) -> None:
        """Stop using the service; closes the store if the service opened it from a URL."""
        self._closed = True
        if self._owned and isinstance(self.store, Store):
            self.store.close()

    # --- flows

    def _create(
        self, run_id: str, app_name: str, user_id: str, session_id: str, parts: tuple[dict[str, Any], ...]
    ) -> Flow[Session]:
        if (yield from flows.exists(run_id)):
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        app, user, own = parts
        yield from shared.update(self._scopes, app_name, None, app)
        yield from shared.update(self._scopes, app_name, user_id, user)
        now = platform_time.get_time()
        ids = (app_name, user_id, session_id)
        cp = yield from flows.create(run_id, ids, own, now=now, segment=self._segment)
        self._appender.cache.put(cp)
        return (yield from self._session(cp, []))

    def _get(
        self, run_id: str, app_name: str, user_id: str, config: GetSessionConfig | None
    ) -> Flow[Session | None]:
        head = yield from load_or_none(run_id)
        if head is None or head.state.get("app_name") != app_name or head.state.get("user_id") != user_id:
            return None
        if TURN_STATE in head.state and run_id not in self._held:
            start = yield from shown(head)
            if start is not None:  # a journaled turn is open: the session as it was at its start
                head = (yield from load_or_none(run_id, start)) or head
        self._appender.cache.put(head, replace=True)
        recent = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        events = yield from flows.tail(head, recent, after)
        return (yield from self._session(head, [event_from_json(e) for e in events]))

    def _list(self, app_name: str, user_id: str | None) -> Flow[list[Session]]:
        found = yield FindRuns(sessions_filter(app_name, user_id))
        sessions: list[Session] = []
        for info in found:
            head = yield from load_or_none(info.run_id)
            if head is not None:  # None: deleted since the listing
                sessions.append((yield from self._session(head, [])))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return sessions

    def _append(
        self, run_id: str, session: Session, data: dict[str, Any], parts: tuple[dict[str, Any], ...]
    ) -> Flow[None]:
        def check(head: Checkpoint) -> None:
            stored = head.state["updated"]
            if stored > session.last_update_time:
                # As ADK's database service does for sessions without its marker:
                # stale unless the session still ends where the stored one does.
                last = head.state["last_event"]
                current = session.events[-1].id == last if session.events else last is None
                if not current:
                    raise StaleSessionError(_STALE)
                session.last_update_time = stored

        head = yield from self._appender.head(run_id, session.id)
        check(head)
        app, user, own = parts
        # Shared scopes first: a crash before the session's step leaves the event
        # unrecorded and its shared values set, which a retried append sets again.
        yield from shared.update(self._scopes, session.app_name, None, app)
        yield from shared.update(self._scopes, session.app_name, session.user_id, user)
        yield from self._appender.save(head, data, own, check)

    def _session(self, head: Checkpoint, events: list[Event]) -> Flow[Session]:
        state = head.state
        app = yield from shared.read(str(state["app_name"]), None)
        user = yield from shared.read(str(state["app_name"]), str(state["user_id"]))
        return Session(
            id=state["session_id"],
            app_name=state["app_name"],
            user_id=state["user_id"],
            state=merged(app, user, thaw(state["state"])),
            events=events,
            last_update_time=state["updated"],
        )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("this session service is closed")

    def __repr__(self) -> str:
        return f"<SafepointSessionService in {self.store!r}>"


def _under(turn: Any, request: Any) -> Any:
    """A save of the turn's session, stamped as the turn's and made under its lease."""
    if isinstance(request, Save) and request.checkpoint.run_id == turn.run_id:
        turn.stamp(request.checkpoint)
        return Invoke(turn.store.save, (request.checkpoint,), {"lease": turn.lease})
    return request
