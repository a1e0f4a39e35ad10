"""Finding entries: a conversation's history walked across runs, and the entry-id index.

A history is walked from its newest entry back through ``parent_id``: inside
the run that stored each entry, and, where the walk reaches an entry another
run stored (a fork's starting point), on into that run's checkpoint at the
step ``state.refs`` names — steps never change, so the prefix a fork shares is
read where it was first stored, never copied.

An entry id names no conversation, so ``read_entry`` needs to know where an
id is stored. This reader remembers it for every id it has read, written or
seen as a record's head (``where``); for an id it has never seen — a rating row
kept elsewhere, say — it asks the index runs (``layout.index_run_id``), which
every save appends to *before* it saves the conversation, as safepoint writes
a blob before the checkpoint that points at it: an index row whose save then
failed names a step that does not hold the entry, is checked and skipped.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic_ai.conversation_store import ConversationEntry

from safepoint import Checkpoint
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, save_cached
from safepoint.flow import Flow, head_or_none, load_or_none

from .layout import INDEX_LABELS, decode_entries, index_run_id

Location = tuple[str, int]  # (run_id, step)
_WHERE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class View:
    """One step of a conversation run, indexed: which position holds each entry it stored, and
    where the entries it reaches in other runs live."""

    owned: dict[str, int] = field(default_factory=dict)
    refs: dict[str, Location] = field(default_factory=dict)

    @classmethod
    def of(cls, cp: Checkpoint) -> View:
        owned = {item["id"]: position for position, item in enumerate(cp.messages)}
        refs = {entry_id: (run_id, step) for entry_id, run_id, step in cp.state.get("refs", ())}
        return cls(owned, refs)


class EntryReader:
    """Flows that read entries; shares the conversation heads the store caches."""

    def __init__(self, heads: CheckpointCache) -> None:
        self.heads = heads
        self._indexes = CheckpointCache(size=64)
        self._where: OrderedDict[str, Location] = OrderedDict()

    def remember(self, entry_ids: Iterable[str | None], location: Location) -> None:
        for entry_id in entry_ids:
            if entry_id is not None:
                self._where[entry_id] = location
                self._where.move_to_end(entry_id)
        while len(self._where) > _WHERE_SIZE:
            self._where.popitem(last=False)

    def current(self, run_id: str) -> Flow[tuple[Checkpoint, View] | None]:
        """The run's head, from memory when one small query shows it is still the head."""
        info = yield from head_or_none(run_id)
        if info is None:
            self.heads.drop(run_id)
            return None
        cached = self.heads.get(run_id)
        if (
            cached is not None
            and cached[0].step == info.head_step
            and cached[0].created_at == info.updated_at
        ):
            return cached[0], cached[1]
        cp = yield from load_or_none(run_id)
        if cp is None:
            return None
        view = View.of(cp)
        self.heads.put(cp, view, replace=True)
        return cp, view

    def at(self, location: Location) -> Flow[tuple[Checkpoint, View] | None]:
        """A run's checkpoint at one step (the cached head when it is that step)."""
        run_id, step = location
        cached = self.heads.get(run_id)
        if cached is not None and cached[0].step == step:
            return cached[0], cached[1]
        cp = yield from load_or_none(run_id, step)
        return None if cp is None else (cp, View.of(cp))

    def history(self, head_id: str | None, limit: int | None = None) -> Flow[list[ConversationEntry]]:
        """The entries up to ``head_id``, oldest first (the last ``limit``); ``KeyError`` if one is gone."""
        if head_id is None or limit == 0:
            return []
        start = yield from self.locate(head_id)
        if start is None:
            raise KeyError(head_id)
        found = yield from self.at(start)
        stored: list[Any] = []
        seen: set[str] = set()
        entry_id: str | None = head_id
        while entry_id is not None and found is not None and (limit is None or len(stored) < limit):
            cp, view = found
            position = view.owned.get(entry_id)
            if position is not None:
                if entry_id in seen:  # parent ids that loop: no history ends there
                    raise KeyError(entry_id)
                seen.add(entry_id)
                stored.append(cp.messages[position])
                entry_id = stored[-1]["parent_id"]
                continue
            ref = view.refs.get(entry_id)
            if ref is None or ref == (cp.run_id, cp.step):
                raise KeyError(entry_id)
            found = yield from self.at(ref)
        if found is None:
            raise KeyError(entry_id)
        stored.reverse()
        self.remember([head_id], start)
        return decode_entries(stored)

    def locate(self, entry_id: str) -> Flow[Location | None]:
        """Where ``entry_id`` is stored: remembered, else from the index, checked either way."""
        known = self._where.get(entry_id)
        if known is not None and (yield from self._holds(known, entry_id)):
            return known
        index = yield from self._index_head(index_run_id(entry_id))
        candidates = [] if index is None else [row for row in index.messages if row["id"] == entry_id]
        for row in reversed(candidates):  # the newest first: a retried save indexes its entries again
            location = (row["run"], row["step"])
            if (yield from self._holds(location, entry_id)):
                self.remember([entry_id], location)
                return location
        return None

    def _holds(self, location: Location, entry_id: str) -> Flow[bool]:
        found = yield from self.at(location)
        return found is not None and (entry_id in found[1].owned or entry_id in found[1].refs)

    def _index_head(self, index_id: str) -> Flow[Checkpoint | None]:
        info = yield from head_or_none(index_id)
        cached = self._indexes.get(index_id)
        if info is None or cached is None or cached[0].step != info.head_step:
            cp = yield from load_or_none(index_id)
            if cp is not None:
                self._indexes.put(cp, replace=True)
            return cp
        return cached[0]

    def index(self, entry_ids: list[str], run_id: str, step: int) -> Flow[None]:
        """Append ``entry_id -> (run_id, step)`` rows to the index runs, before that step is saved."""
        buckets: dict[str, list[str]] = {}
        for entry_id in entry_ids:
            buckets.setdefault(index_run_id(entry_id), []).append(entry_id)
        for index_id, ids in buckets.items():
            rows = [{"id": entry_id, "run": run_id, "step": step} for entry_id in ids]
            for _ in range(MAX_ATTEMPTS):
                cached = self._indexes.get(index_id)
                head = cached[0] if cached is not None else (yield from load_or_none(index_id))
                cp = head.next() if head is not None else Checkpoint(run_id=index_id, step=0)
                cp.labels = dict(INDEX_LABELS)
                cp.messages.extend(rows)
                if (yield from save_cached(self._indexes, cp)):  # else another writer indexed first
                    break
            else:
                raise gave_up(index_id, cp.step)


K = TypeVar("K")


class Loaded(Generic[K]):
    """A bounded map to the step a conversation stood at when it was read (oldest forgotten)."""

    def __init__(self, size: int = _WHERE_SIZE) -> None:
        self._steps: OrderedDict[K, int] = OrderedDict()
        self._size = size

    def put(self, key: K, step: int) -> None:
        self._steps[key] = step
        self._steps.move_to_end(key)
        while len(self._steps) > self._size:
            self._steps.popitem(last=False)

    def get(self, key: K) -> int | None:
        return self._steps.get(key)


class LoadedMessages:
    """The step each loaded history stood at, by its last message object (messages compare by
    value, so by identity, checked through a weak reference: a reused id is not mistaken)."""

    def __init__(self) -> None:
        self._by_id: Loaded[int] = Loaded()
        self._refs: dict[int, weakref.ref[Any]] = {}

    def remember(self, message: Any, step: int) -> None:
        key = id(message)
        self._by_id.put(key, step)
        self._refs[key] = weakref.ref(message, lambda _: self._refs.pop(key, None))

    def step_of(self, message: Any) -> int | None:
        ref = self._refs.get(id(message))
        return self._by_id.get(id(message)) if ref is not None and ref() is message else None
