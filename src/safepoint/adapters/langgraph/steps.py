"""The thread run's steps: how one is built from the head, saved, and indexed.

The thread run only grows: each saver operation appends one step built from
the run's head (``append_step``), so saves are the store's ordinary
incremental saves, fenced by its optimistic concurrency — a ``Conflict`` means
another writer got there first, and the step is rebuilt on the new head. The
head is the cached checkpoint this process last saved or loaded, when there is
one, with what the saver remembers of it (``memo.Memo``), so a turn
neither reloads the history nor re-sends, re-converts or re-compares it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from safepoint import Checkpoint, Conflict
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, save_cached
from safepoint.flow import Flow, Save, load_or_none

from .codec import ValueCodec
from .layout import (
    INDEX_ROLE,
    THREAD_ROLE,
    IndexEntry,
    ThreadKey,
    bookkeeping,
    index_entries,
    reached_end,
    step_status,
)
from .memo import Log, Memo, Step, same_prefix

KEEP_FINISHED_LABEL = "safepoint.keep_finished"  # see Retention: "true" keeps a done thread
FLUSH_AT = 8  # unindexed entries that make a step flush the index even without a new checkpoint
MAX_ORPHANS = 16  # writes whose checkpoint never arrived are dropped beyond this many

Built = tuple[Checkpoint, Log]  # the step to save, and its message log as the store is given it
Builder = Callable[[Checkpoint | None, Memo], Generator[Any, Any, Built]]


@dataclass(frozen=True, slots=True)
class Context:
    """What every flow needs: the codec (with the saver's allow-list) and the checkpoint cache."""

    codec: ValueCodec
    cache: CheckpointCache
    messages_channel: str
    keep_finished: bool = True  # label thread runs so store-wide retention never expires them as done
    owners: dict[str, int] = field(default_factory=dict)  # thread id -> the epoch this saver owns it at
    # With the call journal: whether a write to a thread is outside any turn (then a write that
    # branches the thread starts a new journal lineage: turns.branched). None: no journal.
    outside_turn: Callable[[str], bool] | None = None

    def memo(self, key: ThreadKey) -> tuple[Checkpoint, Memo] | None:
        """The thread run's cached head and what is remembered of it, if this saver has them."""
        cached = self.cache.get(key.thread_run)
        if cached is None:
            return None
        head, memo = cached
        return head, memo if isinstance(memo, Memo) else Memo((Step.loaded(head),))


def encode_snapshot(
    ctx: Context, key: ThreadKey, checkpoint: Any, metadata: Any, parent_id: str | None
) -> tuple[dict[str, Any], Log | None]:
    """A LangGraph checkpoint as a snapshot (no writes yet) and its message log, if any.

    Called when the saver is called, not later when the flow runs: LangGraph
    hands over live channel objects (a barrier's set, say) and goes on
    changing them once ``put`` returns control. Messages a remembered log was
    made from are not converted again (``ValueCodec.encode_messages``).
    """
    codec = ctx.codec
    cached = ctx.memo(key)
    known = cached[1].known_log() if cached is not None else None
    values: dict[str, Any] = {}
    messages_field: dict[str, str] | None = None
    log: Log | None = None
    for name, value in checkpoint["channel_values"].items():
        if name == ctx.messages_channel:
            encoded = codec.encode_messages(value, f"channel_values[{name!r}]", known)
            if encoded is not None:
                messages_field = {"channel": name, "format": encoded[0]}
                log = Log(encoded[1], list(value), encoded[0])
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
    if reached_end(checkpoint):
        snapshot["ended"] = True  # the thread run is marked done; the next put marks it running
    return snapshot, log


def start_step(key: ThreadKey, head: Checkpoint | None, base: Checkpoint | None = None) -> Checkpoint:
    """The next step of the thread run, carrying ``base``'s messages (default: the head's)."""
    source = base if base is not None else head
    cp = Checkpoint(run_id=key.thread_run, step=0) if source is None else source.next()
    cp.step = 0 if head is None else head.step + 1
    cp.labels = key.labels(THREAD_ROLE)
    cp.parent = None
    return cp


def set_messages(cp: Checkpoint, before: Log, new: Log | None) -> Log:
    """Make ``cp``'s log hold ``new`` by changing only the differing tail (so saves stay incremental).

    ``before`` is what this process last handed the store for the log ``cp``
    carries (the stored form may be redacted by the scrubber, so it is
    compared with what was given, not with what came back): entries that are
    the same objects cost a pointer compare, the rest are compared. ``None``
    leaves the log as it is: the checkpoint has no message channel.
    """
    if new is None:
        return before
    new_raw = new.raw
    same = same_prefix(before.raw, new_raw)
    same = min(same, len(cp.messages))  # before describes cp's log; never trust it past its end
    if same == len(cp.messages):
        cp.messages.extend(new_raw[same:])
    else:
        cp.messages[same:] = new_raw[same:]
    # Kept entries are stored as ``before`` says; replaced ones as this save will say.
    faithful = new.faithful and (before.faithful or same == 0)
    return Log(new_raw, new.sources, new.fmt, faithful)


def finish_step(
    cp: Checkpoint,
    head: Checkpoint | None,
    snapshot: dict[str, Any],
    orphans: dict[str, Any],
    covers: int,
    *,
    new: bool,
) -> None:
    """Fill in ``cp``'s state: the snapshot, plus the thread-wide fields carried from ``head``.

    ``new``: the step stores a checkpoint (a put or a copy), not just writes for one.
    """
    if len(orphans) > MAX_ORPHANS:
        keep = sorted(orphans, key=lambda k: orphans[k]["since"])[-MAX_ORPHANS:]
        orphans = {k: orphans[k] for k in keep}
    head_state = head.state if head is not None else None
    cp.state = {**snapshot, **bookkeeping(head_state, cp.step, snapshot, covers, new=new), "orphans": orphans}
    # The run's status speaks for the thread's latest checkpoint, not for an
    # older one that just received late writes.
    latest = cp.state["latest"]
    if head is None or (latest is not None and latest[1] == cp.step):
        cp.status = step_status(snapshot)
    else:
        cp.status = head.status


def append_step(ctx: Context, key: ThreadKey, build: Builder, *, flush: bool) -> Flow[Checkpoint]:
    """Save the step ``build`` makes from the head, rebuilding it after a ``Conflict``."""
    head: Checkpoint | None
    for _ in range(MAX_ATTEMPTS):
        cached = ctx.memo(key)
        if cached is not None:
            head, memo = cached
        else:
            head = yield from load_or_none(key.thread_run)
            memo = Memo((Step.loaded(head),)) if head is not None else Memo()
        cp, log = yield from build(head, memo)
        if ctx.keep_finished:
            cp.labels[KEEP_FINISHED_LABEL] = "true"
        try:
            yield Save(cp)
        except Conflict:
            ctx.cache.drop(key.thread_run)
            continue
        ctx.cache.put(cp, memo.adding(Step.saved(cp, log)))
        if flush or len(cp.state["unindexed"]) >= FLUSH_AT:
            yield from flush_index(ctx, key, cp)
        return cp
    raise gave_up(key.thread_run, cp.step)


def step_at(key: ThreadKey, memo: Memo, step: int) -> Flow[Step | None]:
    """Step ``step`` of the thread run: remembered (a stored step never changes), else loaded."""
    known = memo.step(step)
    if known is not None:
        return known
    loaded = yield from load_or_none(key.thread_run, step)
    return Step.loaded(loaded) if loaded is not None else None


def known_covers(ctx: Context, key: ThreadKey) -> int:
    """The last thread step this process knows the index run holds (-1: none known)."""
    cached = ctx.cache.get(key.index_run)
    return int(cached[0].counters.get("covers", -1)) if cached is not None else -1


def flush_index(ctx: Context, key: ThreadKey, step: Checkpoint) -> Flow[None]:
    """Append ``step``'s unindexed entries to the index run (a failed flush only delays them)."""
    for _ in range(MAX_ATTEMPTS):
        cached = ctx.cache.get(key.index_run)
        index = cached[0] if cached is not None else (yield from load_or_none(key.index_run))
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
        if (yield from save_cached(ctx.cache, cp)):
            return


def read_index(head: Checkpoint, key: ThreadKey) -> Flow[dict[str, IndexEntry]]:
    """Where each checkpoint id's newest snapshot is. Load ``head`` first: entries the
    index gains later leave the head, so reading the head after the index could miss some."""
    index = yield from load_or_none(key.index_run)
    entries = list(index.messages) if index is not None else []
    entries.extend(head.state.get("unindexed", ()))
    floor = head.state.get("floor", 0)  # steps below it were dropped by a rebuild (pruning.py)
    return index_entries([e for e in entries if e["step"] >= floor])
