"""Every ``SafepointSaver`` operation, written once as a flow (see ``_flow.py``).

The thread run only grows: each operation appends one step built from the
run's head (``append_step``), so saves are the store's ordinary incremental
saves, fenced by its optimistic concurrency — a ``Conflict`` means another
writer got there first, and the step is rebuilt on the new head.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple

from safepoint import Checkpoint, Conflict

from ._flow import CheckpointCache, Delete, FindRuns, Flow, Load, Save
from .langgraph_codec import ValueCodec
from .langgraph_layout import (
    ADAPTER,
    ADAPTER_LABEL,
    INDEX_ROLE,
    ROLE_LABEL,
    THREAD_LABEL,
    THREAD_ROLE,
    IndexEntry,
    ThreadKey,
    bookkeeping,
    decode_tuple,
    index_entries,
    merge_writes,
    snapshot_of,
    step_status,
)

MAX_ATTEMPTS = 50
FLUSH_AT = 8  # unindexed entries that make a step flush the index even without a new checkpoint
MAX_ORPHANS = 16  # writes whose checkpoint never arrived are dropped beyond this many

Built = tuple[Checkpoint, list[Any]]  # the step to save, and the raw messages it was given
Builder = Callable[[Checkpoint | None, list[Any]], Generator[Any, Any, Built]]


@dataclass(frozen=True, slots=True)
class Context:
    """What every flow needs: the codec (with the saver's allow-list) and the checkpoint cache."""

    codec: ValueCodec
    cache: CheckpointCache
    messages_channel: str


def encode_snapshot(
    ctx: Context, checkpoint: Any, metadata: Any, parent_id: str | None
) -> tuple[dict[str, Any], list[Any] | None]:
    """A LangGraph checkpoint as a snapshot (no writes yet) and its message log entries, if any."""
    codec = ctx.codec
    values: dict[str, Any] = {}
    messages_field: dict[str, str] | None = None
    log: list[Any] | None = None
    for name, value in checkpoint["channel_values"].items():
        if name == ctx.messages_channel:
            encoded = codec.encode_messages(value, f"channel_values[{name!r}]")
            if encoded is not None:
                messages_field = {"channel": name, "format": encoded[0]}
                log = encoded[1]
                continue
        values[name] = codec.encode(value, f"channel_values[{name!r}]")
    rest = {
        k: codec.encode(v, f"checkpoint[{k!r}]")
        for k, v in checkpoint.items()
        if k not in ("id", "channel_values")
    }
    snapshot = {
        "id": checkpoint["id"],
        "parent": parent_id,
        "checkpoint": rest,
        "values": values,
        "messages": messages_field,
        "metadata": {k: codec.encode(v, f"metadata[{k!r}]") for k, v in metadata.items()},
        "writes": [],
    }
    return snapshot, log


def start_step(key: ThreadKey, head: Checkpoint | None, base: Checkpoint | None = None) -> Checkpoint:
    """The next step of the thread run, carrying ``base``'s messages (default: the head's)."""
    source = base if base is not None else head
    cp = Checkpoint(run_id=key.thread_run, step=0) if source is None else source.next()
    cp.step = 0 if head is None else head.step + 1
    cp.labels = key.labels(THREAD_ROLE)
    cp.parent = None
    return cp


def set_messages(cp: Checkpoint, raw_before: list[Any], new: list[Any] | None) -> list[Any]:
    """Make ``cp``'s log hold ``new`` by changing only the differing tail (so saves stay incremental).

    ``raw_before`` is what this process last handed the store for the log
    ``cp`` carries (the stored form may be redacted by the scrubber, so it is
    compared with what was given, not with what came back). ``None`` leaves
    the log as it is: the checkpoint has no message channel.
    """
    if new is None:
        return raw_before
    same = 0
    for old, fresh in zip(raw_before, new, strict=False):
        if old != fresh:
            break
        same += 1
    if same == len(cp.messages):
        cp.messages.extend(new[same:])
    else:
        cp.messages[same:] = new[same:]
    return new


def finish_step(
    cp: Checkpoint, head: Checkpoint | None, snapshot: dict[str, Any], orphans: dict[str, Any], covers: int
) -> None:
    """Fill in ``cp``'s state: the snapshot, plus the thread-wide fields carried from ``head``."""
    if len(orphans) > MAX_ORPHANS:
        keep = sorted(orphans, key=lambda k: orphans[k]["since"])[-MAX_ORPHANS:]
        orphans = {k: orphans[k] for k in keep}
    head_state = head.state if head is not None else None
    cp.state = {**snapshot, **bookkeeping(head_state, cp.step, snapshot, covers), "orphans": orphans}
    cp.status = step_status(snapshot)


def append_step(ctx: Context, key: ThreadKey, build: Builder, *, flush: bool) -> Flow[Checkpoint]:
    """Save the step ``build`` makes from the head, rebuilding it after a ``Conflict``."""
    for _ in range(MAX_ATTEMPTS):
        cached = ctx.cache.get(key.thread_run)
        if cached is not None:
            head, raw = cached
        else:
            head = yield Load(key.thread_run)
            raw = list(head.messages) if head is not None else []
        cp, raw = yield from build(head, raw)
        try:
            yield Save(cp)
        except Conflict:
            ctx.cache.drop(key.thread_run)
            continue
        ctx.cache.put(cp, raw)
        if flush or len(cp.state["unindexed"]) >= FLUSH_AT:
            yield from flush_index(ctx, key, cp)
        return cp
    raise Conflict(key.thread_run, -1, None, detail=f"gave up after {MAX_ATTEMPTS} concurrent-write retries")


def known_covers(ctx: Context, key: ThreadKey) -> int:
    """The last thread step this process knows the index run holds (-1: none known)."""
    cached = ctx.cache.get(key.index_run)
    return int(cached[0].counters.get("covers", -1)) if cached is not None else -1


def flush_index(ctx: Context, key: ThreadKey, step: Checkpoint) -> Flow[None]:
    """Append ``step``'s unindexed entries to the index run (a failed flush only delays them)."""
    for _ in range(MAX_ATTEMPTS):
        cached = ctx.cache.get(key.index_run)
        index = cached[0] if cached is not None else (yield Load(key.index_run))
        covers = int(index.counters.get("covers", -1)) if index is not None else -1
        new = [dict(e) for e in step.state["unindexed"] if e["step"] > covers]
        if not new:
            if index is not None:
                ctx.cache.put(index)
            return
        cp = index.next() if index is not None else Checkpoint(run_id=key.index_run, step=0)
        cp.labels = key.labels(INDEX_ROLE)
        cp.messages.extend(new)
        cp.counters = {"covers": max(e["step"] for e in new)}
        try:
            yield Save(cp)
        except Conflict:
            ctx.cache.drop(key.index_run)
            continue
        ctx.cache.put(cp)
        return


def read_index(head: Checkpoint, key: ThreadKey) -> Flow[dict[str, IndexEntry]]:
    """Where each checkpoint id's newest snapshot is. Load ``head`` first: entries the
    index gains later leave the head, so reading the head after the index could miss some."""
    index = yield Load(key.index_run)
    entries = list(index.messages) if index is not None else []
    entries.extend(head.state.get("unindexed", ()))
    return index_entries(entries)


def put(ctx: Context, key: ThreadKey, checkpoint: Any, metadata: Any, parent_id: str | None) -> Flow[None]:
    """A new checkpoint: one step holding it, with any writes that arrived before it."""
    encoded, log = encode_snapshot(ctx, checkpoint, metadata, parent_id)
    checkpoint_id = encoded["id"]

    def build(head: Checkpoint | None, raw: list[Any]) -> Generator[Any, Any, Built]:
        cp = start_step(key, head)
        snapshot = dict(encoded)  # a retry after a Conflict starts again from the new head
        orphans = dict(cp.state.get("orphans", {}))
        if checkpoint_id in orphans:
            snapshot["writes"] = orphans.pop(checkpoint_id)["writes"]
        elif head is not None and head.state.get("id") == checkpoint_id:
            snapshot["writes"] = head.state["writes"]  # the same checkpoint again keeps its writes
        raw = set_messages(cp, raw, log)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key))
        return cp, raw
        yield  # a generator, for append_step's ``yield from``

    yield from append_step(ctx, key, build, flush=True)


def put_writes(
    ctx: Context,
    key: ThreadKey,
    checkpoint_id: str,
    raw_writes: Sequence[tuple[str, Any]],
    *,
    task_id: str,
    task_path: str,
) -> Flow[None]:
    """Pending writes for ``checkpoint_id``: a step repeating its snapshot with the writes added.

    Each write is keyed (task_id, idx) — idx its position, or the negative index
    LangGraph reserves for a special channel (ERROR, INTERRUPT …).
    """
    writes = [
        [task_id, WRITES_IDX_MAP.get(channel, i), channel, ctx.codec.encode(value, f"writes[{i}]"), task_path]
        for i, (channel, value) in enumerate(raw_writes)
    ]

    def build(head: Checkpoint | None, raw: list[Any]) -> Generator[Any, Any, Built]:
        head_state = head.state if head is not None else {}
        orphans = dict(head_state.get("orphans", {}))
        base: Checkpoint | None = None
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
            found = (yield from read_index(head, key)).get(checkpoint_id) if head is not None else None
            base = (yield Load(key.thread_run, found.step)) if found is not None else None
            if base is None:  # not stored (yet): LangGraph may save writes before their checkpoint
                snapshot = snapshot_of(head_state)
                orphans[checkpoint_id] = {
                    "since": 0 if head is None else head.step + 1,
                    "writes": merge_writes([], writes),
                }
            else:  # an older checkpoint (resumed by time travel): repeat its snapshot
                snapshot = snapshot_of(base.state)
                snapshot["writes"] = merge_writes(snapshot["writes"], writes)
                raw = list(base.messages)
        cp = start_step(key, head, base)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key))
        return cp, raw

    yield from append_step(ctx, key, build, flush=False)


def get_tuple(ctx: Context, key: ThreadKey, checkpoint_id: str | None) -> Flow[CheckpointTuple | None]:
    """The latest checkpoint (greatest id), or the one with ``checkpoint_id``, with its writes."""
    head = yield Load(key.thread_run)
    if head is None:
        return None
    ctx.cache.put(head, list(head.messages))
    state = head.state
    if checkpoint_id is None:
        if state.get("latest") is None:
            return None
        step = state["latest"][1]
    elif state.get("id") == checkpoint_id:
        step = head.step
    else:
        found = (yield from read_index(head, key)).get(checkpoint_id)
        if found is None:
            return None
        step = found.step
    cp = head if step == head.step else (yield Load(key.thread_run, step))
    return decode_tuple(ctx.codec, cp) if cp is not None else None


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
        head = yield Load(key.thread_run)
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
        cp = head if entry.step == head.step else (yield Load(key.thread_run, entry.step))
        decoded = decode_tuple(ctx.codec, cp) if cp is not None else None
        if decoded is not None:
            out.append(decoded)
    return out


def _metadata_matches(ctx: Context, stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    for name, value in wanted.items():
        if name not in stored or ctx.codec.decode(stored[name]) != value:
            return False
    return True


def delete_thread(ctx: Context, thread_id: str) -> Flow[None]:
    """Delete every run of the thread, in every namespace (a missing thread is not an error)."""
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, THREAD_LABEL: thread_id})
    for run in found:
        ctx.cache.drop(run.run_id)
        yield Delete(run.run_id)
        ctx.cache.drop(run.run_id)


def copy_thread(ctx: Context, source: str, target: str) -> Flow[None]:
    """Append every checkpoint of ``source`` (each namespace, oldest step first) to ``target``."""
    found = yield FindRuns({ADAPTER_LABEL: ADAPTER, THREAD_LABEL: source, ROLE_LABEL: THREAD_ROLE})
    for run in found:
        src = ThreadKey.from_labels(run.labels)
        head = yield Load(run.run_id)
        if src is None or head is None:
            continue
        dst = ThreadKey(target, src.ns)
        entries = yield from read_index(head, src)
        last: Checkpoint | None = None
        for entry in sorted(entries.values(), key=lambda e: e.step):
            step = head if entry.step == head.step else (yield Load(src.thread_run, entry.step))
            if step is not None:
                last = yield from append_step(ctx, dst, _copy_builder(ctx, dst, step), flush=False)
        if last is not None:
            yield from flush_index(ctx, dst, last)


def _copy_builder(ctx: Context, key: ThreadKey, source: Checkpoint) -> Builder:
    snapshot = snapshot_of(source.state)
    log = [dict(m) for m in source.messages] if snapshot["messages"] is not None else None

    def build(head: Checkpoint | None, raw: list[Any]) -> Generator[Any, Any, Built]:
        cp = start_step(key, head)
        orphans = dict(head.state.get("orphans", {})) if head is not None else {}
        raw = set_messages(cp, raw, log)
        finish_step(cp, head, snapshot, orphans, known_covers(ctx, key))
        return cp, raw
        yield  # a generator, for append_step's ``yield from``

    return build
