"""The reads of ``SafepointSaver``, as flows: ``get_tuple`` and ``list``.

A read loads the thread run's head first, then (for a checkpoint other than
the latest) the index, then the one step that holds the checkpoint — unless
the saver remembers the thread (``memo.py``) and one small query shows
its head has not moved: then the latest checkpoint, and the few before it,
come from memory.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from safepoint import Checkpoint
from safepoint.adapters.cache import is_head
from safepoint.flow import FindRuns, Flow, head_or_none, load_or_none

from .layout import (
    ADAPTER,
    ADAPTER_LABEL,
    ROLE_LABEL,
    THREAD_LABEL,
    THREAD_ROLE,
    IndexEntry,
    ThreadKey,
    decode_tuple,
    log_length,
)
from .memo import Memo, Step
from .steps import Context, read_index

__all__ = ["get_tuple", "list_tuples"]


def get_tuple(ctx: Context, key: ThreadKey, checkpoint_id: str | None) -> Flow[CheckpointTuple | None]:
    """The latest checkpoint (greatest id), or the one with ``checkpoint_id``, with its writes.

    When this saver remembers the thread and one small query shows its head
    has not moved, the answer comes from memory (``memo.py``).
    """
    cached = ctx.memo(key)
    if cached is not None:
        info = yield from head_or_none(key.thread_run)
        if is_head(info, cached[0]):
            return (yield from tuple_from(ctx, key, cached[0], cached[1], checkpoint_id))
        ctx.cache.drop(key.thread_run, only=cached[0])
    head = yield from load_or_none(key.thread_run)
    if head is None:
        return None
    memo = Memo((Step.loaded(head),))
    ctx.cache.put(head, memo)
    return (yield from tuple_from(ctx, key, head, memo, checkpoint_id))


def tuple_from(
    ctx: Context, key: ThreadKey, head: Checkpoint, memo: Memo, checkpoint_id: str | None
) -> Flow[CheckpointTuple | None]:
    """``get_tuple`` once the head is known to be current."""
    state = head.state
    if checkpoint_id is None:
        if state.get("latest") is None:
            return None
        step = state["latest"][1]
    elif state.get("id") == checkpoint_id:
        step = head.step
    elif checkpoint_id in state.get("recent", {}):
        step = state["recent"][checkpoint_id]
    else:
        found = (yield from read_index(head, key)).get(checkpoint_id)
        if found is None:
            return None
        step = found.step
    known = memo.step(step)
    if known is None or not known.faithful:
        loaded = yield from load_or_none(key.thread_run, step)
        if loaded is None:
            return None
        known = Step.loaded(loaded)
    count = log_length(known.cp)
    sources = known.log.sources
    if sources is not None:
        return decode_tuple(ctx.codec, known.cp, messages=sources[:count])
    decoded = decode_tuple(ctx.codec, known.cp)
    field = known.cp.state.get("messages")
    if decoded is not None and field is not None:
        # Remember the objects handed out: the next put finds them in the channel, already stored.
        known = known.with_sources(
            list(decoded.checkpoint["channel_values"][field["channel"]]), field["format"]
        )
    ctx.cache.put(known.cp if known.cp.step == head.step else head, memo.adding(known), replace=True)
    return decoded


def list_tuples(
    ctx: Context,
    keys: list[ThreadKey] | None,
    *,
    thread_id: str | None,
    checkpoint_id: str | None,
    metadata_filter: dict[str, Any] | None,
    before: str | None,
    limit: int | None,
) -> Flow[list[CheckpointTuple]]:
    """Checkpoints newest first (by id), filtered as ``BaseCheckpointSaver.list`` describes.

    ``keys`` None means every namespace of ``thread_id`` (or every thread, when
    that is None too), found by the runs' labels.
    """
    if keys is None:
        labels = {ADAPTER_LABEL: ADAPTER, ROLE_LABEL: THREAD_ROLE}
        if thread_id is not None:
            labels[THREAD_LABEL] = thread_id
        found = yield FindRuns(labels)
        keys = [k for k in (ThreadKey.from_labels(run.labels) for run in found) if k is not None]
    candidates: list[tuple[str, ThreadKey, Checkpoint, IndexEntry]] = []
    for key in keys:
        head = yield from load_or_none(key.thread_run)
        if head is None:
            continue
        for cid, entry in (yield from read_index(head, key)).items():
            if checkpoint_id is not None and cid != checkpoint_id:
                continue
            if before is not None and not cid < before:
                continue
            if metadata_filter and not _metadata_matches(ctx, entry.metadata, metadata_filter):
                continue
            candidates.append((cid, key, head, entry))
    candidates.sort(key=lambda c: (c[0], c[1].ns), reverse=True)
    if limit is not None:
        candidates = candidates[: max(limit, 0)]
    out: list[CheckpointTuple] = []
    for _cid, key, head, entry in candidates:
        cp = head if entry.step == head.step else (yield from load_or_none(key.thread_run, entry.step))
        decoded = decode_tuple(ctx.codec, cp) if cp is not None else None
        if decoded is not None:
            out.append(decoded)
    return out


def _metadata_matches(ctx: Context, stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for name, value in wanted.items():
        if name not in stored or ctx.codec.decode(stored[name]) != value:
            return False
    return True
