"""A LangGraph checkpointer backed by a safepoint store: ``SafepointSaver``.

Switch a graph over in one line::

    store = safepoint.open_store("sqlite:///state.db")       # or postgresql://…
    graph = builder.compile(checkpointer=SafepointSaver(store))

How LangGraph's data maps onto safepoint (details in ``langgraph_layout.py``):

* One **thread run** per ``(thread_id, checkpoint_ns)``, named
  ``langgraph/<thread_id>[/<checkpoint_ns>]`` (percent-encoded; a SHA-256
  form when too long) and labelled ``langgraph.thread_id``,
  ``langgraph.checkpoint_ns``, ``langgraph.role=thread``. Each ``put`` and each
  ``put_writes`` appends one step; every step is the full LangGraph
  checkpoint plus its pending writes so far, so any checkpoint loads with
  one ``store.load``.
* The ``messages`` channel (``messages_channel=``), when it holds LangChain
  messages (or plain JSON dicts), is the step's **message log**: one dict per
  message (its fields plus an OpenAI-style ``role``), stored once and appended
  incrementally — a turn writes only its new messages, never the whole
  conversation again. ``RemoveMessage`` and other rewrites start a new
  stored range.
* Every other channel value, the versions, metadata and parent id are JSON in
  the step's ``state``; values that are not plain JSON go through LangGraph's
  serializer, locked down (no pickle, an allow-list of types —
  ``allowed_types=``), and are stored as ``{"$typed": ["msgpack", tree]}``, a
  JSON tree the scrubber can read (``langgraph_codec.py``).
* Pending writes keep LangGraph's contract: keyed ``(task_id, idx)``, special
  channels at their negative idx and replaced on re-put, regular ones kept
  (idempotent), returned in ``(task_path, task_id, idx)`` order. Writes that
  arrive before their checkpoint wait in the thread run until it does.
* An **index run** (``langgraph-index/…``, ``langgraph.role=index``) logs
  which step holds each checkpoint id, for ``list`` and lookups by id;
  ``get_tuple`` for the latest checkpoint does not need it.
* A step's status is ``waiting`` while its checkpoint has a pending interrupt,
  so ``safepoint runs --status waiting`` lists threads waiting for a human.
* A saver remembers the last steps it saved or loaded of each thread
  (``langgraph_memo.py``), so a turn costs what it adds: ``put`` converts only
  new messages (the old ones are the same objects), and ``get_tuple`` answers
  from memory once ``store.run`` shows the head has not moved.

Supported: ``get_tuple``, ``list`` (filter, before, limit; all namespaces of a
thread when the config has no ``checkpoint_ns``; all threads for ``None``),
``put``, ``put_writes``, ``delete_thread``, ``copy_thread`` — each sync and
async. Not supported: ``prune`` and ``delete_for_runs``, which would delete
steps from the middle of a run, and safepoint runs only grow.
"""

from __future__ import annotations

try:
    import langchain_core.messages  # noqa: F401  # the adapter's own imports need both
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "safepoint.adapters.langgraph needs LangGraph's checkpoint package: pip install safepoint[langgraph]"
    ) from exc

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from safepoint import DEFAULT_URL, AsyncStore, InvalidArgument, Store, open_async_store, open_store
from safepoint.flow import Flow

from . import langgraph_flows as flows
from .cache import CheckpointCache
from .langgraph_codec import ValueCodec, make_serde
from .langgraph_layout import ThreadKey
from .runner import Runner

__all__ = ["SafepointSaver"]


class SafepointSaver(BaseCheckpointSaver[int]):
    """LangGraph checkpointer storing threads in a safepoint ``Store`` or ``AsyncStore``.

    ``allowed_types``: classes (or ``(module, name)`` tuples) besides
    LangGraph's built-in safe types that channel values and writes may hold —
    e.g. a dataclass or pydantic model in your state. Anything else is refused
    at save (``NotJSONCompatible``) and at load (``CorruptCheckpoint``), so a
    tampered row cannot make the process import and call arbitrary code.

    ``messages_channel``: the channel stored as the incremental message log.

    With a ``Store`` every method works, the async ones in a worker thread.
    With an ``AsyncStore`` use the async methods (``graph.ainvoke`` …); the
    sync ones work only from threads other than the event loop's.
    """

    def __init__(
        self,
        store: Store | AsyncStore,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        messages_channel: str = "messages",
        cache_size: int = 256,
    ) -> None:
        super().__init__(serde=make_serde(allowed_types))
        self.store = store
        self.messages_channel = messages_channel
        self._runner = Runner(store)
        self._cache = CheckpointCache(cache_size)

    @classmethod
    @contextmanager
    def from_url(
        cls,
        url: str = DEFAULT_URL,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        messages_channel: str = "messages",
        **options: Any,
    ) -> Iterator[SafepointSaver]:
        """A saver on a store it opens at ``url`` and closes at the end:
        ``with SafepointSaver.from_url("sqlite:///state.db") as saver:``, or over an
        ``AsyncStore``, ``async with SafepointSaver.afrom_url(url) as saver:``.

        ``options`` go to ``safepoint.open_store`` (``open_async_store``), e.g.
        ``schema=`` for PostgreSQL.
        """
        store = open_store(url, **options)
        try:
            yield cls(store, allowed_types=allowed_types, messages_channel=messages_channel)
        finally:
            store.close()

    @classmethod
    @asynccontextmanager
    async def afrom_url(
        cls,
        url: str = DEFAULT_URL,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        messages_channel: str = "messages",
        **options: Any,
    ) -> AsyncIterator[SafepointSaver]:
        """A saver on a store it opens at ``url`` and closes at the end:
        ``with SafepointSaver.from_url("sqlite:///state.db") as saver:``, or over an
        ``AsyncStore``, ``async with SafepointSaver.afrom_url(url) as saver:``.

        ``options`` go to ``safepoint.open_store`` (``open_async_store``), e.g.
        ``schema=`` for PostgreSQL.
        """
        store = await open_async_store(url, **options)
        try:
            yield cls(store, allowed_types=allowed_types, messages_channel=messages_channel)
        finally:
            await store.close()

    # --- flows: each operation once; the sync and async methods below only run them

    def _context(self) -> flows.Context:
        # self.serde may be swapped by with_allowlist() (a clone with a wider allow-list).
        return flows.Context(ValueCodec(self.serde), self._cache, self.messages_channel)

    def _get_tuple_flow(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        return flows.get_tuple(self._context(), ThreadKey.from_config(config), get_checkpoint_id(config))

    def _list_flow(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Flow[list[CheckpointTuple]]:
        configurable = (config or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
        keys = (
            [ThreadKey.from_config(config)]
            if config and thread is not None and ("checkpoint_ns" in configurable)
            else None
        )
        return flows.list_tuples(
            self._context(),
            keys,
            thread_id=None if thread is None else str(thread),
            checkpoint_id=configurable.get("checkpoint_id"),
            metadata_filter=filter,
            before=get_checkpoint_id(before) if before is not None else None,
            limit=limit,
        )

    def _put_flow(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[Flow[None], ThreadKey, RunnableConfig]:
        key = ThreadKey.from_config(config)
        parent = config["configurable"].get("checkpoint_id")
        ctx = self._context()
        # Encoded now, on the caller's thread: LangGraph keeps mutating live channel values.
        encoded, log = flows.encode_snapshot(
            ctx, key, checkpoint, get_checkpoint_metadata(config, metadata), parent
        )
        flow = flows.put(ctx, key, encoded, log)
        returned: RunnableConfig = {
            "configurable": {
                "thread_id": config["configurable"]["thread_id"],
                "checkpoint_ns": key.ns,
                "checkpoint_id": checkpoint["id"],
            }
        }
        return flow, key, returned

    def _put_writes_flow(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> tuple[Flow[None], ThreadKey]:
        key = ThreadKey.from_config(config)
        checkpoint_id = config["configurable"].get("checkpoint_id")
        if checkpoint_id is None:
            raise InvalidArgument("put_writes needs config['configurable']['checkpoint_id']")
        ctx = self._context()
        encoded = flows.encode_writes(ctx, writes, task_id, task_path)
        return flows.put_writes(ctx, key, checkpoint_id, encoded), key

    # --- sync

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (latest when it has no ``checkpoint_id``), or None."""
        return self._runner.run(self._get_tuple_flow(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first; ``filter`` matches metadata, ``before`` a checkpoint id."""
        return iter(self._runner.run(self._list_flow(config, filter, before, limit)))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as the thread's next step; returns its config."""
        flow, key, returned = self._put_flow(config, checkpoint, metadata)
        self._runner.run(flow, lock=key.thread_run)
        return returned

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names."""
        flow, key = self._put_writes_flow(config, writes, task_id, task_path)
        self._runner.run(flow, lock=key.thread_run)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's runs in every namespace (a missing thread is not an error)."""
        self._runner.run(flows.delete_thread(self._context(), str(thread_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of one thread to another."""
        self._runner.run(flows.copy_thread(self._context(), str(source_thread_id), str(target_thread_id)))

    # --- async: the same flows, awaited

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (latest when it has no ``checkpoint_id``), or None."""
        return await self._runner.arun(self._get_tuple_flow(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first; ``filter`` matches metadata, ``before`` a checkpoint id."""
        for found in await self._runner.arun(self._list_flow(config, filter, before, limit)):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as the thread's next step; returns its config."""
        flow, key, returned = self._put_flow(config, checkpoint, metadata)
        await self._runner.arun(flow, lock=key.thread_run)
        return returned

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names."""
        flow, key = self._put_writes_flow(config, writes, task_id, task_path)
        await self._runner.arun(flow, lock=key.thread_run)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's runs in every namespace (a missing thread is not an error)."""
        await self._runner.arun(flows.delete_thread(self._context(), str(thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of one thread to another."""
        await self._runner.arun(
            flows.copy_thread(self._context(), str(source_thread_id), str(target_thread_id))
        )
