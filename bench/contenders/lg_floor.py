"""The floor for the LangGraph benchmarks: a checkpointer that does the least LangGraph needs.

``LatestOnlySaver`` keeps, per ``(thread_id, checkpoint_ns)``, only the latest
checkpoint and the pending writes for it, as the very objects LangGraph handed
over (``copy_checkpoint`` already gave ``put`` its own dicts; channel values
are replaced, not changed in place, by this graph's reducers). It serializes
nothing, copies nothing but the checkpoint's top-level dicts on the way out,
and forgets every older checkpoint, so each call costs O(1) whatever the
thread's length. A graph run on it shows LangGraph's own per-turn work
(``add_messages`` over the growing list, channel bookkeeping, task
preparation); a real saver's time above it is the latency the saver adds.

Not a usable checkpointer: no history, no ``list``, nothing survives the
process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    copy_checkpoint,
    get_checkpoint_id,
)


class LatestOnlySaver(BaseCheckpointSaver[str]):
    """Only the latest checkpoint of each thread and namespace, kept as objects in memory."""

    def __init__(self) -> None:
        super().__init__()
        # (thread, ns) -> (config, checkpoint, metadata, parent config, {(task, idx): (task, channel, value)})
        self._latest: dict[tuple[str, str], tuple[Any, Checkpoint, Any, Any, dict[Any, Any]]] = {}
        self._guard = threading.Lock()

    @staticmethod
    def _key(config: RunnableConfig) -> tuple[str, str]:
        configurable = config["configurable"]
        return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        with self._guard:
            found = self._latest.get(self._key(config))
        if found is None:
            return None
        saved_config, checkpoint, metadata, parent, writes = found
        wanted = get_checkpoint_id(config)
        if wanted is not None and wanted != checkpoint["id"]:
            return None  # older checkpoints are forgotten
        return CheckpointTuple(
            saved_config, copy_checkpoint(checkpoint), metadata, parent, list(writes.values())
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        found = self.get_tuple(config) if config is not None else None
        return iter([found] if found is not None else [])

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread, ns = self._key(config)
        saved: RunnableConfig = {
            "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }
        parent = config if config["configurable"].get("checkpoint_id") else None
        with self._guard:
            self._latest[(thread, ns)] = (saved, checkpoint, metadata, parent, {})
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        with self._guard:
            found = self._latest.get(self._key(config))
            if found is None or found[1]["id"] != config["configurable"].get("checkpoint_id"):
                return  # writes for a checkpoint no longer the latest are forgotten with it
            stored = found[4]
            for i, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, i)
                if idx >= 0 and (task_id, idx) in stored:
                    continue
                stored[(task_id, idx)] = (task_id, channel, value)

    def delete_thread(self, thread_id: str) -> None:
        with self._guard:
            for key in [k for k in self._latest if k[0] == str(thread_id)]:
                del self._latest[key]
