"""``SafepointConversationStore``: Pydantic AI's ``ConversationStore`` over safepoint runs.

The five primitives Pydantic AI asks of a backend, as flows (``safepoint.flow``)
run on a ``Store`` or an ``AsyncStore``; ``load``, ``save``, ``branch``,
``fork``, ``list_conversations`` and ``delete`` are Pydantic AI's own, on top.
Layout in ``layout.py``, entry lookups in ``entries.py``.

Revisions and safepoint's ordering: a write checks ``expected_revision``
against the record in the run's head and saves the *next step*; a writer that
moved the run in between makes that save a ``Conflict``, and the write is
checked again on the new head — raising ``ConversationConflict`` when the
revision moved, just where the in-memory store raises it.

Counters: each save stamps the run's counters (``safepoint.journal.counters``)
from the call journal: the head's, plus one count per call a journaled turn
recorded since the last save (``SafepointJournal``; nothing for an app
without it). A save finding the run held by a journaled turn in another
process waits for the turn to let go (up to ``HELD_WAIT``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from safepoint import (
    AsyncStore,
    Checkpoint,
    NotFound,
    ParentRef,
    RunHeld,
    Store,
    StoreClosed,
)
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, save_cached
from safepoint.adapters.runner import Runner, open_given
from safepoint.flow import FindRuns, Flow, Invoke, delete_if_present, head_or_none
from safepoint.twins import Sleep

from .entries import EntryReader, Loaded, LoadedMessages, Location, View
from .layout import (
    ADAPTER,
    ADAPTER_LABEL,
    DELETED_LABEL,
    REF_LABEL_PREFIX,
    ROLE_LABEL,
    SCOPE_LABEL,
    conversation_labels,
    conversation_run_id,
    decode_record,
    encode_entries,
    encode_record,
    readable,
    ref_label,
)
from .turn import counters_at

HELD_WAIT = 60.0  # seconds a save waits for a journaled turn another process holds the run for
HELD_POLL = 0.05


def _record_of(cp: Checkpoint | None) -> ConversationRecord | None:
    stored = None if cp is None else cp.state.get("record")
    return None if stored is None else decode_record(stored)


class SafepointConversationStore(ConversationStore):
    """A Pydantic AI ``ConversationStore`` whose conversations are safepoint runs.

    ``store``: a ``Store``, an ``AsyncStore``, or a URL for ``safepoint.open_store``
    (then this object owns the store and ``close()`` closes it; ``store_options``
    go to ``open_store``). ``run_id_for``: names the run of a conversation id
    (default ``pydantic-ai/<conversation_id>``).
    """

    def __init__(
        self,
        store: Store | AsyncStore | str,
        *,
        run_id_for: Callable[[str], str] | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.store: Store | AsyncStore
        self.store, self._owned = open_given(store, store_options)
        self._runner = Runner(self.store)
        self._run_id_for = run_id_for or conversation_run_id
        self._heads = CheckpointCache()
        self._reader = EntryReader(self._heads)
        self._head_steps: Loaded[str] = Loaded()
        self._loaded: LoadedMessages = LoadedMessages()
        self._closed = False

    def run_id(self, conversation_id: str) -> str:
        """The run that holds ``conversation_id``."""
        return self._run_id_for(conversation_id)

    def close(self) -> None:
        """Stop using this object; closes the store if it was opened here from a URL."""
        self._closed = True
        if self._owned and isinstance(self.store, Store):
            self.store.close()

    async def _drive(self, flow: Flow[Any], lock: str | None = None) -> Any:
        if self._closed:
            flow.close()
            raise StoreClosed("this SafepointConversationStore is closed")
        return await self._runner.arun(flow, lock=lock)

    # --- the five primitives (and read_history, which reads a history in one walk)

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        record: ConversationRecord | None = await self._drive(self._record_flow(conversation_id))
        return record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        records: list[ConversationRecord] = await self._drive(self._records_flow(scope))
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        run_id = self.run_id(record.conversation_id)
        await self._drive(self._write_flow(run_id, record, list(new_entries), expected_revision), lock=run_id)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        run_id = self.run_id(conversation_id)
        await self._drive(self._delete_flow(run_id, conversation_id, expected_revision), lock=run_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        entries: list[ConversationEntry] = await self._drive(self._reader.history(entry_id, 1))
        return entries[0]

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        entries: list[ConversationEntry] = await self._drive(self._reader.history(head_id, limit))
        step = self._head_steps.get(head_id) if head_id is not None else None
        if entries and step is not None:
            self._loaded.remember(entries[-1].message, step)
        return entries

    def loaded_at(self, message: Any) -> int | None:
        """The step of the conversation run that was its head when this store loaded a history
        ending in ``message`` (None for a message it did not load): where a turn on it begins."""
        return self._loaded.step_of(message)

    # --- flows

    def _record_flow(self, conversation_id: str) -> Flow[ConversationRecord | None]:
        found = yield from self._reader.current(self.run_id(conversation_id))
        if found is None:
            return None
        record = _record_of(found[0])
        if record is not None:  # where its history starts, for the read_history that follows
            self._reader.remember([record.head_id, *record.branches], (found[0].run_id, found[0].step))
            if record.head_id is not None:
                self._head_steps.put(record.head_id, found[0].step)
        return record

    def _records_flow(self, scope: str | None) -> Flow[list[ConversationRecord]]:
        labels = {ADAPTER_LABEL: ADAPTER}
        if scope is not None:
            labels[SCOPE_LABEL] = readable(scope)
        records = []
        for info in (yield FindRuns(labels)):
            if info.labels.get(ROLE_LABEL) == "index" or info.labels.get(DELETED_LABEL) == "true":
                continue
            found = yield from self._reader.current(info.run_id)
            record = _record_of(None if found is None else found[0])
            if record is not None and (scope is None or record.scope == scope):
                records.append(record)
        return records

    def _write_flow(
        self,
        run_id: str,
        record: ConversationRecord,
        new_entries: list[ConversationEntry],
        expected: str | None,
    ) -> Flow[None]:
        conversation_id = record.conversation_id
        encoded, state_record = encode_entries(new_entries), encode_record(record)
        new_ids = {entry.id for entry in new_entries}
        held_until = time.monotonic() + HELD_WAIT
        attempts = 0
        while attempts < MAX_ATTEMPTS:
            found = yield from self._reader.current(run_id)
            head = None if found is None else found[0]
            stored = _record_of(head)
            if (stored.revision if stored is not None else None) != expected:
                raise ConversationConflict(conversation_id)
            # A deleted conversation created again starts a new message range: its old entries
            # stay in the older steps, for the forks that still read them.
            view = found[1] if found is not None and stored is not None else View()
            refs = dict(view.refs)
            for entry_id in (record.head_id, *record.branches, *(entry.parent_id for entry in new_entries)):
                if entry_id is None or entry_id in new_ids or entry_id in view.owned or entry_id in refs:
                    continue
                location: Location | None = yield from self._reader.locate(entry_id)
                if location is not None:
                    refs[entry_id] = location
                elif entry_id == record.head_id:  # a head no one has: released by a delete
                    raise ConversationConflict(conversation_id)
            cp = Checkpoint(run_id=run_id, step=0) if head is None else head.next()
            if new_entries:
                yield from self._reader.index([entry.id for entry in new_entries], run_id, cp.step)
            if stored is None:
                cp.messages = []
            cp.messages.extend(encoded)
            cp.state = {"record": state_record, "refs": [[key, *where] for key, where in refs.items()]}
            cp.labels = self._step_labels(record, conversation_id, head, refs.values(), run_id)
            if record.forked_at is not None and record.forked_at in refs:
                cp.parent = ParentRef(*refs[record.forked_at])
            owned = dict(view.owned)
            first = len(cp.messages) - len(encoded)
            owned.update((entry.id, first + offset) for offset, entry in enumerate(new_entries))
            if head is not None:  # the calls a journaled turn recorded since the last save
                calls = yield Invoke(self.store.recorded_calls, (run_id,), {"step": cp.step})
                cp.counters.update(counters_at(head, calls))
            try:
                saved = yield from save_cached(self._heads, cp, View(owned, refs), replace=True)
            except RunHeld:
                # A journaled turn holds the conversation (another process runs it): its end lets go.
                if time.monotonic() > held_until:
                    raise
                yield Sleep(HELD_POLL)  # type: ignore[misc]  # the loops of safepoint.twins serve it
                continue
            if not saved:  # check the revision again on the run's head
                attempts += yield from self._after_conflict(run_id, held_until)
                continue
            self._reader.remember([record.head_id, *record.branches, *new_ids], (run_id, cp.step))
            return
        raise gave_up(run_id, cp.step)

    def _after_conflict(self, run_id: str, held_until: float) -> Flow[int]:
        """After a save lost: 1, an attempt spent, when another writer moved the run; 0, after a
        wait, when a live lease holds it. (A lease of another writer — a journaled turn in another
        process, or one a kill left behind until it expires — refuses a save without one as a
        Conflict too: waited for, up to ``HELD_WAIT``, it does not spend the attempts.)"""
        if time.monotonic() > held_until:
            return 1
        try:
            state = yield Invoke(self.store.queue_state, (run_id,))
        except NotFound:
            return 1
        if not state.leased():
            return 1
        yield Sleep(HELD_POLL)  # type: ignore[misc]  # the loops of safepoint.twins serve it
        return 0

    def _step_labels(
        self,
        record: ConversationRecord | None,
        conversation_id: str,
        head: Checkpoint | None,
        refs: Any,
        run_id: str,
    ) -> dict[str, str]:
        labels = conversation_labels(record, conversation_id)
        # Ref labels only accumulate: an older step may still read from a run after a newer one stops.
        if head is not None:
            labels.update(
                (key, value) for key, value in head.labels.items() if key.startswith(REF_LABEL_PREFIX)
            )
        labels.update((ref_label(ref_run), ref_run) for ref_run, _ in refs if ref_run != run_id)
        return labels

    def _delete_flow(self, run_id: str, conversation_id: str, expected: str) -> Flow[None]:
        for _ in range(MAX_ATTEMPTS):
            found = yield from self._reader.current(run_id)
            stored = _record_of(None if found is None else found[0])
            if found is None or stored is None or stored.revision != expected:
                raise ConversationConflict(conversation_id)
            head = found[0]
            tombstone = head.next()
            tombstone.messages = []
            tombstone.state = {"record": None, "refs": []}
            tombstone.labels = self._step_labels(None, conversation_id, head, (), run_id)
            if (yield from save_cached(self._heads, tombstone, View(), replace=True)):
                yield from self._collect_flow(run_id)
                return
        raise gave_up(run_id, 0)

    def _collect_flow(self, run_id: str) -> Flow[None]:
        """Delete the deleted conversation ``run_id`` unless a fork still reads from it, then the
        deleted conversations it read from that no one else needs any more."""
        pending = [run_id]
        while pending:
            candidate = pending.pop()
            info = yield from head_or_none(candidate)
            if info is None or info.labels.get(DELETED_LABEL) != "true":
                continue
            readers = yield FindRuns({ref_label(candidate): candidate})
            if any(reader.run_id != candidate for reader in readers):
                continue
            yield from delete_if_present(candidate)
            self._heads.drop(candidate)
            pending += [value for key, value in info.labels.items() if key.startswith(REF_LABEL_PREFIX)]

    def __repr__(self) -> str:
        return f"<SafepointConversationStore in {self.store!r}>"
