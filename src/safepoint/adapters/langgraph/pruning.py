"""``prune`` and ``delete_for_runs``: dropping checkpoints from threads whose runs only grow.

LangGraph's two calls delete checkpoints from the middle or the end of a
thread. A safepoint run never loses a step silently — ``safepoint verify``
reports a step missing from the middle of a run as tampering — so the saver
drops them with two documented store operations instead, each an ordinary
append or retention:

1. **Rebuild.** The thread run's surviving checkpoints (the newest step of
   each surviving checkpoint id) are appended again, oldest first, as new
   steps — their messages by reference to the log the run already holds, so
   only the snapshots are written again. Then one more step, the *switch*,
   names the first rebuilt step the thread's ``floor``: from that one save on,
   every read (``read_index``, ``latest``, ``recent``) sees only steps at or
   above the floor, so readers see either the whole old thread or the rebuilt
   one, never a mix. A crash before the switch leaves the old thread as it
   was, with some checkpoints stored twice (a retry rebuilds again).
2. **Retention.** ``KeepLast`` (``store.prune_run``) drops every step below
   the floor, the store's own way of dropping older checkpoints; the index
   run is compacted the same way (one step holding the surviving entries,
   the rest dropped). A crash before it leaves steps below the floor that
   reads ignore; the next prune of the thread drops them.

A namespace with no surviving checkpoint is deleted whole (``delete_run``).
The switch step records what was done (``rebuilt``: the operation and the
floor), which ``safepoint show`` displays. A rebuild costs one snapshot
write per surviving checkpoint, so ``prune(strategy="keep_latest")`` is
cheap and ``delete_for_runs`` on a long thread is not; ``delete_for_runs``
also reads the index of every thread, since a LangGraph run id may appear
in any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from safepoint import Checkpoint, InvalidArgument
from safepoint.adapters.runner import Runner
from safepoint.flow import FindRuns, Flow, Head, KeepLast, Save, delete_if_present, load_or_none

from .layout import (
    ADAPTER,
    ADAPTER_LABEL,
    INDEX_ROLE,
    ROLE_LABEL,
    THREAD_LABEL,
    THREAD_ROLE,
    IndexEntry,
    ThreadKey,
)
from .memo import Log, Memo
from .steps import Built, Context, append_step, read_index
from .writes import copy_builder, delete_thread

__all__ = ["PruningMethods", "delete_for_runs", "prune"]

Keep = Callable[[str, IndexEntry], bool]  # (checkpoint id, its index entry) -> survives
STRATEGIES = ("keep_latest", "delete")


class PruningMethods:
    """``SafepointSaver``'s ``prune`` and ``delete_for_runs``, sync and async (a mixin)."""

    _runner: Runner

    def _context(self) -> Context:
        raise NotImplementedError  # SafepointSaver's

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
        self._runner.run(prune(self._context(), [str(t) for t in thread_ids], strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop every checkpoint (and its writes) whose metadata names one of ``run_ids``."""
        self._runner.run(delete_for_runs(self._context(), [str(r) for r in run_ids]))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or none (``delete``)."""
        await self._runner.arun(prune(self._context(), [str(t) for t in thread_ids], strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop every checkpoint (and its writes) whose metadata names one of ``run_ids``."""
        await self._runner.arun(delete_for_runs(self._context(), [str(r) for r in run_ids]))


def prune(ctx: Context, thread_ids: Sequence[str], strategy: str) -> Flow[None]:
    """LangGraph's ``prune``: keep each namespace's latest checkpoint (``keep_latest``), or none."""
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"prune's strategy must be one of {', '.join(STRATEGIES)}")
    for thread_id in thread_ids:
        if strategy == "delete":
            yield from delete_thread(ctx, thread_id)
            continue
        for key in (yield from _namespaces({THREAD_LABEL: thread_id})):
            head = yield from load_or_none(key.thread_run)
            latest = head.state.get("latest") if head is not None else None
            if latest is not None:
                yield from rebuild(ctx, key, _only(str(latest[0])), "prune")


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> Flow[None]:
    """LangGraph's ``delete_for_runs``: drop every checkpoint whose metadata names one of ``run_ids``."""
    doomed = {str(run_id) for run_id in run_ids}
    if not doomed:
        return

    def survives(_cid: str, entry: IndexEntry) -> bool:
        stored = entry.metadata.get("run_id")
        return stored is None or str(ctx.codec.decode(stored)) not in doomed

    for key in (yield from _namespaces({})):
        yield from rebuild(ctx, key, survives, "delete_for_runs")


def _only(checkpoint_id: str) -> Keep:
    return lambda cid, _entry: cid == checkpoint_id


def _namespaces(labels: dict[str, str]) -> Flow[list[ThreadKey]]:
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, ROLE_LABEL: THREAD_ROLE, **labels})
    keys = [ThreadKey.from_labels(run.labels) for run in found]
    return [key for key in keys if key is not None]


def rebuild(ctx: Context, key: ThreadKey, keep: Keep, operation: str) -> Flow[int]:
    """Rebuild ``key``'s thread run with only the checkpoints ``keep`` accepts; how many it dropped."""
    head = yield from load_or_none(key.thread_run)
    if head is None:
        return 0
    entries = yield from read_index(head, key)
    kept = sorted((entry.step, cid) for cid, entry in entries.items() if keep(cid, entry))
    dropped = len(entries) - len(kept)
    if dropped == 0:
        return 0
    if not kept:  # nothing survives in this namespace
        for run_id in (key.thread_run, key.index_run):
            ctx.cache.drop(run_id)
            yield from delete_if_present(run_id)
        return dropped
    first: int | None = None
    for step, _cid in kept:
        source = head if step == head.step else (yield from load_or_none(key.thread_run, step))
        if source is None:
            continue
        copied = yield from append_step(ctx, key, copy_builder(ctx, key, source), flush=False)
        first = copied.step if first is None else first
    if first is None:
        return 0
    switch = yield from append_step(ctx, key, _switch_builder(key, first, operation), flush=False)
    yield from _compact_index(ctx, key, switch)
    info = yield Head(key.thread_run)
    yield KeepLast(key.thread_run, info.head_step - first + 1)
    return dropped


def _switch_builder(key: ThreadKey, floor: int, operation: str) -> Callable[..., Generator[Any, Any, Built]]:
    """The step that makes the rebuilt steps the whole thread: a copy of the head's snapshot
    whose bookkeeping keeps only what lies at or above ``floor``."""

    def build(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
        assert head is not None  # the rebuilt steps are there: the head is one of them, or newer
        entries = {
            cid: entry for cid, entry in (yield from read_index(head, key)).items() if entry.step >= floor
        }
        cp = head.next()
        state = dict(head.state)
        newest = max(entries)
        state["latest"] = [newest, entries[newest].step]
        state["recent"] = {cid: step for cid, step in state.get("recent", {}).items() if step >= floor}
        state["unindexed"] = [e for e in state.get("unindexed", ()) if e["step"] >= floor]
        state["floor"] = floor
        state["rebuilt"] = {"operation": operation, "floor": floor}
        cp.state = state
        return cp, memo.head_log() or Log()

    return build


def _compact_index(ctx: Context, key: ThreadKey, head: Checkpoint) -> Flow[None]:
    """One index step holding exactly the entries at or above the floor; retention drops the rest."""
    entries = yield from read_index(head, key)
    index = yield from load_or_none(key.index_run)
    cp = index.next() if index is not None else Checkpoint(run_id=key.index_run, step=0)
    cp.labels = key.labels(INDEX_ROLE)
    rows = sorted(entries.items(), key=lambda item: item[1].step)
    cp.messages[:] = [{"id": cid, "step": entry.step, "metadata": entry.metadata} for cid, entry in rows]
    cp.counters = {"covers": head.step}
    ctx.cache.drop(key.index_run)
    yield Save(cp)  # a Conflict (another flush at the same moment) propagates: the caller retries
    ctx.cache.put(cp)
    yield KeepLast(key.index_run, 1)
