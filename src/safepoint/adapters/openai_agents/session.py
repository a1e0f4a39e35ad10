"""``SafepointSession``: an Agents SDK session whose items live in a safepoint run.

One session is one safepoint run, ``openai-agents/<session_id>`` (percent-
encoded; a SHA-256 form when too long), labelled ``safepoint.adapter=openai-
agents`` and ``openai_agents.session_id``. Its items are the run's messages:

* ``add_items`` saves the next step with the new items appended — the store
  writes only those items, however long the conversation;
* ``pop_item`` saves the next step without the last item (a history rewrite:
  no rows are rewritten, and the earlier steps still hold it);
* ``clear_session`` deletes the run;
* ``get_items`` loads the latest step (two queries, whatever its length).

So the conversation gets safepoint's guarantees — verified digests, fenced
concurrent writers (another process appending at the same time makes this
one retry on the new head, not overwrite it), scrubbing, and the CLI
(``safepoint history openai-agents/user-42``). Items go through JSON as with
``SQLiteSession``; an item must be a JSON object (a dict), as every
``TResponseInputItem`` is.

During a journaled turn (``CallJournal``) the session's run is held by the
turn: each save goes under the turn's lease and carries the turn's number and
counters (``turn.Turn.stamp``), and the journal can roll a resumed turn back
to its start in one save (``rewind``).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from safepoint import AsyncStore, Checkpoint, Conflict, Store, StoreClosed
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, is_head, save_cached, thaw
from safepoint.adapters.runner import Runner, open_given
from safepoint.flow import Flow, Save, delete_if_present, head_or_none, load_or_none
from safepoint.records import Lease
from safepoint.twins import Invoke, translate

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["SafepointSession"]

T = TypeVar("T")
TURN_STATE = "openai_agents.turn"  # checkpoint state: the number of the journaled turn that saved it

ADAPTER_LABEL = "safepoint.adapter"
ADAPTER = "openai-agents"
SESSION_LABEL = "openai_agents.session_id"
_MAX_RUN_ID = 255


def session_run_id(session_id: str) -> str:
    """The run that holds ``session_id`` (readable when it fits, hashed when it does not)."""
    run_id = "openai-agents/" + quote(session_id, safe=":|", errors="surrogatepass")
    if len(run_id) <= _MAX_RUN_ID:
        return run_id
    return "openai-agents/#" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class SafepointSession:
    """A ``Session`` (the Agents SDK protocol) whose items live in a safepoint run.

    ``store``: a ``Store``, an ``AsyncStore``, or a URL for ``safepoint.open_store``
    (the session then owns that store and ``close()`` closes it), opened with
    ``store_options`` (e.g. ``{"encryption": Keyring.from_env("SAFEPOINT_KEYS")}``).
    ``session_settings``: as for ``SQLiteSession`` (``limit`` is the default
    for ``get_items``). ``run_id``: overrides the run's name.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        store: Store | AsyncStore | str,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        run_id: str | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self.store: Store | AsyncStore
        self.store, self._owned = open_given(store, store_options)
        self.run_id = run_id if run_id is not None else session_run_id(session_id)
        self._labels = {ADAPTER_LABEL: ADAPTER, SESSION_LABEL: session_id}
        self._runner = Runner(self.store)
        self._cache = CheckpointCache(size=1)
        self._closed = False
        self.turn: Any = None  # the journaled turn holding the session (turn.Turn), or None

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the latest ``limit`` of them."""
        self._check_open()
        items = await self._runner.arun(self._read())
        effective = resolve_session_limit(limit, self.session_settings)
        if effective is None or effective < 0:  # negative: no limit, as SQLite's LIMIT -1
            return items
        return items[len(items) - effective :] if effective else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (one step; only these items are written)."""
        self._check_open()
        if not items:
            return
        # Through JSON, as SQLiteSession stores them: tuples become lists, and
        # the caller's objects are never shared with the stored copy.
        fresh = [json.loads(json.dumps(item)) for item in items]
        await self._runner.arun(self._held(self._append(fresh)), lock=self.run_id)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the latest item (None when the session is empty)."""
        self._check_open()
        return await self._runner.arun(self._held(self._pop()), lock=self.run_id)

    async def clear_session(self) -> None:
        """Delete every item: the session's run is deleted."""
        self._check_open()
        await self._runner.arun(self._clear(), lock=self.run_id)

    def close(self) -> None:
        """Stop using the session; closes the store if the session opened it from a URL."""
        self._closed = True
        if self._owned and isinstance(self.store, Store):
            self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"session {self.session_id!r} is closed")

    # --- flows (see safepoint.flow): the logic, once, for sync and async stores alike

    def _head(self) -> Flow[Checkpoint | None]:
        cached = self._cache.get(self.run_id)
        if cached is not None:
            return cached[0]
        head: Checkpoint | None = yield from load_or_none(self.run_id)
        if head is not None:
            self._cache.put(head)
        return head

    def _next_step(self, head: Checkpoint | None) -> Checkpoint:
        cp = head.next() if head is not None else Checkpoint(run_id=self.run_id, step=0)
        cp.labels = dict(self._labels)
        if self.turn is not None:
            self.turn.stamp(cp)
        return cp

    def _held(self, flow: Flow[T]) -> Flow[T]:
        """``flow`` with each save made under the lease of the turn holding the session (if any)."""
        return translate(flow, self._under_turn)

    def _under_turn(self, request: Any) -> Any:
        turn = self.turn
        if isinstance(request, Save) and turn is not None:
            return Invoke(self.store.save, (request.checkpoint,), {"lease": turn.lease})
        return request

    # --- the journal's flows (``turn.py``): the head, created if absent; the turn rolled back

    def head_or_create(self) -> Flow[Checkpoint]:
        """The session's head, saving an empty first step when it has none (a run to hold)."""
        while True:
            head = yield from self._stored_head()
            if head is not None:
                return head
            cp = self._next_step(None)
            try:
                yield Save(cp)
            except Conflict:
                continue  # another writer created it first
            self._cache.put(cp)
            return cp

    def fresh_head(self) -> Flow[Checkpoint]:
        """The head as stored now (held: nobody else moves it until the turn lets go)."""
        return (yield from self.head_or_create())

    def _stored_head(self) -> Flow[Checkpoint | None]:
        """The head as stored now: the cached step when the run's row says it is still the head
        (a small read), else loaded — the whole conversation — and cached."""
        cached = self._cache.get(self.run_id)
        if cached is not None:
            info = yield from head_or_none(self.run_id)
            if is_head(info, cached[0]):
                return cached[0]
            self._cache.drop(self.run_id, only=cached[0])
        head: Checkpoint | None = yield from load_or_none(self.run_id)
        if head is not None:
            self._cache.put(head)
        return head

    def rewind(self, items: int, lease: Lease, number: int, counters: dict[str, Any]) -> Flow[int]:
        """Take the session back to its first ``items`` items in one save under ``lease``, stamped
        as turn ``number`` with ``counters``; how many items were taken back."""
        head = yield from self.fresh_head()
        taken = len(head.messages) - items
        if taken <= 0:
            return 0
        cp = self._next_step(head)
        del cp.messages[items:]
        cp.state[TURN_STATE] = number
        cp.counters.update(counters)
        yield Invoke(self.store.save, (cp,), {"lease": lease})
        self._cache.put(cp)
        return taken

    def _read(self) -> Flow[list[Any]]:
        head = yield from self._stored_head()
        return [] if head is None else [thaw(item) for item in head.messages]

    def _append(self, items: list[Any]) -> Flow[None]:
        for _ in range(MAX_ATTEMPTS):
            cp = self._next_step((yield from self._head()))
            cp.messages.extend(items)
            if (yield from save_cached(self._cache, cp)):  # else another writer appended first: again
                return
        raise gave_up(self.run_id, cp.step)

    def _pop(self) -> Flow[Any]:
        for _ in range(MAX_ATTEMPTS):
            head = yield from self._head()
            if head is None or not head.messages:
                return None
            cp = self._next_step(head)
            item = cp.messages.pop()
            if (yield from save_cached(self._cache, cp)):
                return thaw(item)
        raise gave_up(self.run_id, cp.step)

    def _clear(self) -> Flow[None]:
        self._cache.drop(self.run_id)
        yield from delete_if_present(self.run_id)
        self._cache.drop(self.run_id)

    def __repr__(self) -> str:
        return f"<SafepointSession {self.session_id!r} in {self.store!r}>"
