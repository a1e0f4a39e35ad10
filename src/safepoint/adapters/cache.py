"""What an adapter keeps of the runs it writes: the last checkpoint of each, for incremental saves.

A save built on a cached head that another writer has since moved is a
``Conflict``: the flow drops the entry, reloads and builds again, up to
``MAX_ATTEMPTS`` times before it gives up (``gave_up``); ``save_cached`` is
that save, written once for every adapter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from safepoint import Checkpoint, Conflict
from safepoint.flow import Flow, Save
from safepoint.records import RunInfo

MAX_ATTEMPTS = 50  # saves rebuilt after a Conflict before a flow gives up


class CheckpointCache:
    """The last checkpoint each run was saved or loaded at, for the incremental path.

    Saving ``cached.next()`` writes only what changed since, instead of
    re-sending the whole message history. A stale entry costs one ``Conflict``
    and a reload, never a wrong write. Each entry may carry ``extra`` data the
    adapter keeps with it (e.g. the raw messages it last handed to the store,
    which a scrubber may have stored redacted; the LangGraph saver keeps a
    ``langgraph.memo.Memo``). Bounded: least recently used goes.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[Checkpoint, Any]] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, run_id: str) -> tuple[Checkpoint, Any] | None:
        with self._guard:
            entry = self._entries.get(run_id)
            if entry is not None:
                self._entries.move_to_end(run_id)
            return entry

    def put(self, cp: Checkpoint, extra: Any = None, *, replace: bool = False) -> None:
        """Remember ``cp`` unless this or a later step of its run is already known
        (with ``replace``: unless a later step is known)."""
        with self._guard:
            known = self._entries.get(cp.run_id)
            if known is not None and (known[0].step > cp.step or (known[0].step == cp.step and not replace)):
                return
            self._entries[cp.run_id] = (cp, extra)
            self._entries.move_to_end(cp.run_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def drop(self, run_id: str, *, only: Checkpoint | None = None) -> None:
        """Forget the run (with ``only``: only if ``only`` is still the checkpoint remembered for it)."""
        with self._guard:
            known = self._entries.get(run_id)
            if known is not None and (only is None or known[0] is only):
                del self._entries[run_id]


def save_cached(
    cache: CheckpointCache, cp: Checkpoint, extra: Any = None, *, replace: bool = False
) -> Flow[bool]:
    """Save ``cp``, built on its run's cached head: True once saved and remembered (with ``extra``);
    False on a ``Conflict`` — another writer moved the run, so its entry is dropped and the caller
    builds again on the new head."""
    try:
        yield Save(cp)
    except Conflict:
        cache.drop(cp.run_id)
        return False
    cache.put(cp, extra, replace=replace)
    return True


def is_head(info: RunInfo | None, cp: Checkpoint) -> bool:
    """Whether the run's head (``store.run``) is the very step ``cp`` was saved or loaded as.

    The step number alone would be fooled by a thread deleted and written
    again up to the same step; its commit time as well is not.
    """
    return info is not None and info.head_step == cp.step and info.updated_at == cp.created_at


def thaw(value: Any) -> Any:
    """A mutable deep copy of stored JSON: loaded values are frozen and shared between steps."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


def gave_up(run_id: str, step: int) -> Conflict:
    """The error for a flow whose save lost ``MAX_ATTEMPTS`` races in a row to other writers."""
    return Conflict(run_id, step, None, detail=f"other writers won {MAX_ATTEMPTS} attempts in a row")
