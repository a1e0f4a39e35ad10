"""The writes of ``SafepointSaver``, as flows (``safepoint.flow``): ``put``, ``put_writes``,
``delete_thread``, ``copy_thread``.

Each write appends one step to the thread run through ``steps.append_step``;
the reads (``get_tuple``, ``list``) are in ``reads.py``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP

from safepoint import Checkpoint
from safepoint.flow import FindRuns, Flow, delete_if_present, load_or_none

from .layout import (
    ADAPTER,
    ADAPTER_LABEL,
    ROLE_LABEL,
    THREAD_LABEL,
    THREAD_ROLE,
    ThreadKey,
    log_length,
    log_of,
    merge_writes,
    snapshot_of,
)
from .memo import Log, Memo, Step, same_prefix
from .ownership import fence, stamp
from .steps import (
    Builder,
    Built,
    Context,
    append_step,
    finish_step,
    flush_index,
    known_covers,
    read_index,
    set_messages,
    start_step,
    step_at,
)
from .turns import branched

__all__ = ["copy_builder", "copy_thread", "delete_thread", "encode_writes", "put", "put_writes"]


def put(ctx: Context, key: ThreadKey, encoded: dict[str, Any], log: Log | None) -> Flow[None]:
    """A new checkpoint (from ``encode_snapshot``): one step holding it, with any writes that came first."""
    checkpoint_id = encoded["id"]

    def build(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
        yield from fence(ctx, key, head)
        cp = start_step(key, head)
        snapshot = dict(encoded)  # a retry after a Conflict starts again from the new head
        orphans = dict(cp.state.get("orphans", {}))
        if checkpoint_id in orphans:
            snapshot["writes"] = orphans.pop(checkpoint_id)["writes"]
        elif head is not None and head.state.get("id") == checkpoint_id:
            snapshot["writes"] = head.state["writes"]  # the same checkpoint again keeps its writes
        elif head is not None and checkpoint_id in head.state.get("recent", {}):
            older = yield from step_at(key, memo, head.state["recent"][checkpoint_id])
            if older is not None:
                snapshot["writes"] = older.cp.state["writes"]
        kept = set_messages(cp, memo.head_log() or Log(), log)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key), new=True)
        stamp(ctx, key, cp)
        if ctx.outside_turn is not None and not key.ns and ctx.outside_turn(key.thread_id):
            branched(cp, None if head is None else head.state, snapshot["parent"])
        return cp, kept

    # The index is appended in batches (FLUSH_AT entries) once this saver knows it: its entries
    # ride in the head meanwhile, and an index save per put would be a second commit each time.
    # The first put of a thread this saver has not indexed yet flushes, so it learns the index
    # (loading or creating it) then, not in the middle of a later turn.
    yield from append_step(ctx, key, build, flush=ctx.cache.get(key.index_run) is None)


def encode_writes(
    ctx: Context, raw_writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
) -> list[list[Any]]:
    """A task's writes as stored: [task_id, idx, channel, value, task_path].

    idx is the write's position, or the negative index LangGraph reserves for
    a special channel (ERROR, INTERRUPT …), which a later put replaces.
    """
    return [
        [task_id, WRITES_IDX_MAP.get(channel, i), channel, ctx.codec.encode(value, f"writes[{i}]"), task_path]
        for i, (channel, value) in enumerate(raw_writes)
    ]


def put_writes(ctx: Context, key: ThreadKey, checkpoint_id: str, writes: list[list[Any]]) -> Flow[None]:
    """Pending writes (from ``encode_writes``): a step repeating the checkpoint's snapshot with them added."""

    def build(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
        yield from fence(ctx, key, head)
        head_state = head.state if head is not None else {}
        orphans = dict(head_state.get("orphans", {}))
        log = memo.head_log() or Log()
        base: Step | None = None
        if head is not None and head_state.get("id") == checkpoint_id:
            snapshot = snapshot_of(head_state)
            snapshot["writes"] = merge_writes(snapshot["writes"], writes)
        elif checkpoint_id in orphans:
            snapshot = snapshot_of(head_state)
            orphan = orphans[checkpoint_id]
            orphans[checkpoint_id] = {
                "since": orphan["since"],
                "writes": merge_writes(orphan["writes"], writes),
            }
        else:
            if not newer_than_stored(head_state, checkpoint_id):
                base = yield from find_step(head, memo, key, checkpoint_id)
            if base is None:  # not stored (yet): LangGraph may save writes before their checkpoint
                snapshot = snapshot_of(head_state)
                orphans[checkpoint_id] = {
                    "since": 0 if head is None else head.step + 1,
                    "writes": merge_writes([], writes),
                }
            else:  # an older checkpoint (late writes, or resumed by time travel): repeat its snapshot
                snapshot = snapshot_of(base.cp.state)
                snapshot["writes"] = merge_writes(snapshot["writes"], writes)
                if not keeps_newer_log(log, base, snapshot):
                    cp = start_step(key, head, base.cp)
                    log = set_messages(cp, base.log, base.log.prefix(log_length(base.cp)))
                    finish_step(cp, head, snapshot, orphans, known_covers(ctx, key), new=False)
                    stamp(ctx, key, cp)
                    return cp, log
        cp = start_step(key, head)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key), new=False)
        stamp(ctx, key, cp)
        return cp, log

    yield from append_step(ctx, key, build, flush=False)


def newer_than_stored(head_state: dict[str, Any], checkpoint_id: str) -> bool:
    """True when no stored checkpoint can have ``checkpoint_id``: it is greater than every stored id.

    (LangGraph's ids grow with time; ``latest`` holds the greatest stored.) So
    writes that arrive before their checkpoint need no look at the index.
    """
    latest = head_state.get("latest")
    return latest is None or checkpoint_id > latest[0]


def find_step(head: Checkpoint | None, memo: Memo, key: ThreadKey, checkpoint_id: str) -> Flow[Step | None]:
    """The step holding the newest snapshot of ``checkpoint_id`` (None if there is none)."""
    if head is None:
        return None
    step = head.state.get("recent", {}).get(checkpoint_id)
    if step is None:
        found = (yield from read_index(head, key)).get(checkpoint_id)
        step = None if found is None else found.step
    if step is None:
        return None
    return (yield from step_at(key, memo, step))


def keeps_newer_log(head_log: Log, base: Step, snapshot: dict[str, Any]) -> bool:
    """Whether a step repeating an older checkpoint can carry the head's log (and says how much is its).

    If the older checkpoint's messages are a prefix of the head's (it is an
    ancestor), the step keeps the head's log and records the count, so the
    next turn still only appends: True. Otherwise (a branch) the step must
    carry the older log itself: False.
    """
    field = snapshot["messages"]
    if field is None:
        return True
    older = base.log.prefix(log_length(base.cp)).raw
    newer = head_log.raw
    # The same objects when this saver wrote both: a pointer compare each.
    if len(older) <= len(newer) and same_prefix(older, newer) == len(older):
        snapshot["messages"] = {"channel": field["channel"], "format": field["format"], "count": len(older)}
        return True
    snapshot["messages"] = {"channel": field["channel"], "format": field["format"]}
    return False


def delete_thread(ctx: Context, thread_id: str) -> Flow[None]:
    """Delete every run of the thread, in every namespace (a missing thread is not an error)."""
    root = yield from load_or_none(ThreadKey(thread_id, "").thread_run)
    yield from fence(ctx, ThreadKey(thread_id, ""), root)  # checked now; not fenced against a claim racing it
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, THREAD_LABEL: thread_id})
    for run in found:
        ctx.cache.drop(run.run_id)
        yield from delete_if_present(run.run_id)
        ctx.cache.drop(run.run_id)


def copy_thread(ctx: Context, source: str, target: str) -> Flow[None]:
    """Append every checkpoint of ``source`` (each namespace, oldest step first) to ``target``."""
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, THREAD_LABEL: source, ROLE_LABEL: THREAD_ROLE})
    for run in found:
        src = ThreadKey.from_labels(run.labels)
        head = yield from load_or_none(run.run_id)
        if src is None or head is None:
            continue
        dst = ThreadKey(target, src.ns)
        entries = yield from read_index(head, src)
        last: Checkpoint | None = None
        for entry in sorted(entries.values(), key=lambda e: e.step):
            step = head if entry.step == head.step else (yield from load_or_none(src.thread_run, entry.step))
            if step is not None:
                last = yield from append_step(ctx, dst, copy_builder(ctx, dst, step), flush=False)
        if last is not None:
            yield from flush_index(ctx, dst, last)


def copy_builder(ctx: Context, key: ThreadKey, source: Checkpoint) -> Builder:
    snapshot = snapshot_of(source.state)
    log: Log | None = None
    if snapshot["messages"] is not None:
        log = Log([dict(m) for m in log_of(source)])
        snapshot["messages"] = {k: v for k, v in snapshot["messages"].items() if k != "count"}

    def build(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
        yield from fence(ctx, key, head)
        cp = start_step(key, head)
        orphans = dict(head.state.get("orphans", {})) if head is not None else {}
        kept = set_messages(cp, memo.head_log() or Log(), log)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key), new=True)
        stamp(ctx, key, cp)
        return cp, kept

    return build
