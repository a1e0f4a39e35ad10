"""Where a LangGraph thread lives in the store, and the shape of each step's state.

One ``(thread_id, checkpoint_ns)`` is two runs:

* the **thread run** (``langgraph/<thread>[/<ns>]``): one step per saver call.
  Every step is a complete snapshot — one LangGraph checkpoint (its channel
  values, versions, metadata, parent id) with the pending writes known for it
  so far — so any checkpoint loads in one ``store.load``. The ``messages``
  channel is the step's message log, stored incrementally; every other value
  is in ``state``.
* the **index run** (``langgraph-index/<thread>[/<ns>]``): an append-only log
  (its messages) of ``{"id", "step"[, "metadata"]}`` entries saying which step
  holds the newest snapshot of each checkpoint id, for ``list`` and lookups
  by id. It is appended after the thread run, in batches; entries not yet in
  it ride along in the thread run's latest step (``unindexed``), so a crash
  between the two saves loses nothing.

Step state (all JSON):

    id, parent        the snapshot's checkpoint id and its parent's (or None)
    checkpoint        the LangGraph checkpoint's other fields (v, ts, versions …)
    values            channel values, except the message channel
    messages          {"channel", "format"[, "count"]} when the message log holds a channel,
                      else None; with "count", only the log's first count messages are
                      the checkpoint's (the step kept a newer log to stay incremental)
    metadata          the checkpoint's metadata
    writes            [task_id, idx, channel, value, task_path] sorted as LangGraph replays them
    latest            [id, step]: the newest snapshot of the greatest checkpoint id
    recent            {id: step} for the last few checkpoint ids
    orphans           {id: {"since", "writes"}}: writes that arrived before their checkpoint
    unindexed         index entries not yet known to be in the index run
    floor             the first step reads look at (0 unless ``prune`` or ``delete_for_runs``
                      rebuilt the thread: see ``pruning.py``)
    owner             the thread's write owner, once one claimed it (``ownership.py``)
    journal           {"lineage": n}: the call journal's lineage, once a fork started a new one
                      (``turns.py``)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.types import INTERRUPT

from safepoint import Checkpoint, CorruptCheckpoint, InvalidArgument, Status

from .codec import RefusedValue, ValueCodec

ADAPTER_LABEL = "safepoint.adapter"
ADAPTER = "langgraph"
THREAD_LABEL = "langgraph.thread_id"
NS_LABEL = "langgraph.checkpoint_ns"
ROLE_LABEL = "langgraph.role"
THREAD_ROLE = "thread"
INDEX_ROLE = "index"
SNAPSHOT_FIELDS = ("id", "parent", "checkpoint", "values", "messages", "metadata", "writes")
_MAX_RUN_ID = 255
RECENT = 4  # checkpoint ids whose newest step the head remembers, so late writes need no index


@dataclass(frozen=True, slots=True)
class ThreadKey:
    """One LangGraph ``(thread_id, checkpoint_ns)`` and the two runs that hold it."""

    thread_id: str
    ns: str

    @classmethod
    def from_config(cls, config: RunnableConfig) -> ThreadKey:
        configurable = config.get("configurable") or {}
        if configurable.get("thread_id") is None:
            raise InvalidArgument("config['configurable']['thread_id'] is required by SafepointSaver")
        return cls(str(configurable["thread_id"]), str(configurable.get("checkpoint_ns") or ""))

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> ThreadKey | None:
        if labels.get(ADAPTER_LABEL) != ADAPTER or THREAD_LABEL not in labels:
            return None
        return cls(labels[THREAD_LABEL], labels.get(NS_LABEL, ""))

    @property
    def thread_run(self) -> str:
        return self._run_id("langgraph/")

    @property
    def index_run(self) -> str:
        return self._run_id("langgraph-index/")

    def labels(self, role: str) -> dict[str, str]:
        return {ADAPTER_LABEL: ADAPTER, THREAD_LABEL: self.thread_id, NS_LABEL: self.ns, ROLE_LABEL: role}

    def config(self, checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _run_id(self, prefix: str) -> str:
        # Percent-encoding keeps "/" as an unambiguous separator and the id readable.
        parts = [_quote(self.thread_id)] + ([_quote(self.ns)] if self.ns else [])
        run_id = prefix + "/".join(parts)
        if len(run_id) <= _MAX_RUN_ID:
            return run_id
        # "#" never survives quoting, so a hashed id cannot collide with a readable one.
        digest = hashlib.sha256(f"{self.thread_id}\x00{self.ns}".encode("utf-8", "surrogatepass"))
        return f"{prefix}#{digest.hexdigest()}"


def _quote(text: str) -> str:
    return quote(text, safe=":|", errors="surrogatepass")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """Where the newest snapshot of one checkpoint id is, and its metadata (encoded)."""

    step: int
    metadata: dict[str, Any]


def empty_snapshot() -> dict[str, Any]:
    """The snapshot part of a step that holds no checkpoint (only orphan writes so far)."""
    return {
        "id": None,
        "parent": None,
        "checkpoint": {},
        "values": {},
        "messages": None,
        "metadata": {},
        "writes": [],
    }


def snapshot_of(state: dict[str, Any] | None) -> dict[str, Any]:
    """The snapshot fields of a step's state (a fresh copy of the containers)."""
    if not state:
        return empty_snapshot()
    snapshot = {name: state[name] for name in SNAPSHOT_FIELDS}
    if state.get("ended"):
        snapshot["ended"] = True
    return snapshot


def merge_writes(existing: list[list[Any]], new: list[list[Any]]) -> list[list[Any]]:
    """Add ``new`` writes the way every LangGraph saver does, sorted for replay.

    A regular write (idx >= 0) already stored under its (task_id, idx) is kept
    (a re-put is idempotent); a special one (ERROR, INTERRUPT … negative idx)
    is replaced. Sorted by (task_path, task_id, idx), LangGraph's replay order.
    """
    by_key = {(w[0], w[1]): w for w in existing}
    for write in new:
        key = (write[0], write[1])
        if key in by_key and write[1] >= 0:
            continue
        by_key[key] = write
    return sorted(by_key.values(), key=lambda w: (w[4], w[0], w[1]))


def bookkeeping(
    head_state: dict[str, Any] | None, step: int, snapshot: dict[str, Any], covers: int, *, new: bool
) -> dict[str, Any]:
    """The thread-wide fields of a new step: ``latest``, ``recent``, ``unindexed`` (orphans: the caller)."""
    state = head_state or {}
    latest = state.get("latest")
    recent = dict(state.get("recent", {}))
    checkpoint_id = snapshot["id"]
    unindexed = [dict(e) for e in state.get("unindexed", ()) if e["step"] > covers]
    if checkpoint_id is not None:
        if latest is None or checkpoint_id >= latest[0]:
            latest = [checkpoint_id, step]
        recent[checkpoint_id] = step
        if len(recent) > RECENT:
            recent = dict(sorted(recent.items(), key=lambda item: item[1])[-RECENT:])
        entry = {"id": checkpoint_id, "step": step}
        if new:  # a put (a new checkpoint): only its entry needs the metadata list() filters on
            entry["metadata"] = snapshot["metadata"]
        unindexed.append(entry)
    carried = {"latest": latest, "recent": recent, "unindexed": unindexed}
    # A rebuilt thread's floor (pruning.py), an owner (ownership.py), the journal's lineage (turns.py).
    for name in ("floor", "owner", "journal"):
        if state.get(name):
            carried[name] = state[name]
    return carried


def log_length(cp: Checkpoint) -> int:
    """How many messages of a step's log belong to its checkpoint (see ``messages.count``)."""
    field = cp.state.get("messages")
    count = field.get("count") if field else None
    return len(cp.messages) if count is None else min(count, len(cp.messages))


def log_of(cp: Checkpoint) -> list[Any]:
    """The part of a step's message log that belongs to its checkpoint (see ``messages.count``)."""
    return list(cp.messages[: log_length(cp)])


def step_status(snapshot: dict[str, Any]) -> Status:
    """``waiting`` while the checkpoint has a pending interrupt (human input); ``done`` where the
    graph reached its end (``reached_end``, noted at ``put``); else ``running``."""
    if any(w[2] == INTERRUPT for w in snapshot["writes"]):
        return Status.WAITING
    return Status.DONE if snapshot.get("ended") else Status.RUNNING


_TRIGGER = "branch:to:"  # a StateGraph node runs when its branch:to:<node> channel holds a value
_PENDING = ("__start__", "__pregel_tasks")  # input not yet taken in; Sends not yet run


def reached_end(checkpoint: Any) -> bool:
    """Whether a StateGraph stopped at ``checkpoint``: no node's trigger channel holds a value
    (LangGraph clears one as its node takes it), no input waits, no ``Send`` is pending. A graph
    that triggers nodes otherwise (a hand-built Pregel) is never taken as ended: its thread
    stays ``running``."""
    if not any(ch.startswith(_TRIGGER) for ch in checkpoint.get("channel_versions") or {}):
        return False
    values = checkpoint.get("channel_values") or {}
    return not any(ch.startswith(_TRIGGER) or ch in _PENDING for ch in values)


def index_entries(entries: list[Any]) -> dict[str, IndexEntry]:
    """The newest step of each checkpoint id among index ``entries`` (any order, duplicates allowed),
    with the metadata of its newest entry that carries some."""
    steps: dict[str, int] = {}
    metadata: dict[str, tuple[int, dict[str, Any]]] = {}
    for entry in entries:
        checkpoint_id, step = entry["id"], entry["step"]
        if step > steps.get(checkpoint_id, -1):
            steps[checkpoint_id] = step
        if "metadata" in entry and step > metadata.get(checkpoint_id, (-1, {}))[0]:
            metadata[checkpoint_id] = (step, entry["metadata"])
    return {cid: IndexEntry(step, metadata.get(cid, (-1, {}))[1]) for cid, step in steps.items()}


def decode_tuple(
    codec: ValueCodec, cp: Checkpoint, messages: list[Any] | None = None
) -> CheckpointTuple | None:
    """The ``CheckpointTuple`` a step holds (None for a step with no checkpoint yet).

    ``messages``: the message channel's value when the caller already has it
    (the objects the log was made from); every other value is decoded afresh.
    """
    key = ThreadKey.from_labels(cp.labels)
    state = cp.state
    if key is None or state.get("id") is None:
        return None
    try:
        checkpoint: dict[str, Any] = {k: codec.decode(v) for k, v in state["checkpoint"].items()}
        values = {k: codec.decode(v) for k, v in state["values"].items()}
        field = state["messages"]
        if field is not None:
            decoded = (
                codec.decode_messages(field["format"], log_of(cp)) if messages is None else list(messages)
            )
            values[field["channel"]] = decoded
        metadata = {k: codec.decode(v) for k, v in state["metadata"].items()}
        writes = [(w[0], w[2], codec.decode(w[3])) for w in state["writes"]]
    except RefusedValue as refused:
        raise CorruptCheckpoint(cp.run_id, cp.step, f"refused to load a value: {refused.reason}") from None
    except (KeyError, TypeError, IndexError):
        raise CorruptCheckpoint(
            cp.run_id, cp.step, "not a LangGraph checkpoint SafepointSaver wrote"
        ) from None
    checkpoint["id"] = state["id"]
    checkpoint["channel_values"] = values
    parent = state["parent"]
    return CheckpointTuple(
        config=key.config(state["id"]),
        checkpoint=checkpoint,  # type: ignore[arg-type]  # built field by field from what put stored
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=key.config(parent) if parent is not None else None,
        pending_writes=writes,
    )
