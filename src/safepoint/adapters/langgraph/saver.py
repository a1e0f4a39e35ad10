"""``SafepointSaver``: LangGraph's checkpointer interface over a safepoint ``Store`` or ``AsyncStore``.

Every method runs one flow of ``reads.py`` or ``writes.py`` on the saver's
``Runner``: blocking for the sync methods, awaited for the async ones. How
LangGraph's data maps onto safepoint is in the package's docstring.
"""

from __future__ import annotations

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
from safepoint.adapters.cache import CheckpointCache
from safepoint.adapters.runner import Runner
from safepoint.flow import Flow

from . import reads as read_flows
from . import steps
from . import writes as write_flows
from .codec import ValueCodec, make_serde
from .journal import Journal, JournalOptions, JournalRunner
from .layout import ThreadKey
from .ownership import OwnershipMethods
from .pruning import PruningMethods

__all__ = ["SafepointSaver"]


class SafepointSaver(PruningMethods, OwnershipMethods, BaseCheckpointSaver[int]):
    """LangGraph checkpointer storing threads in a safepoint ``Store`` or ``AsyncStore``.

    ``allowed_types``: classes (or ``(module, name)`` tuples) besides
    LangGraph's built-in safe types that channel values and writes may hold —
    e.g. a dataclass or pydantic model in your state. Anything else is refused
    at save (``NotJSONCompatible``) and at load (``CorruptCheckpoint``), so a
    tampered row cannot make the process import and call arbitrary code.

    ``messages_channel``: the channel stored as the incremental message log.

    A thread whose graph reached its end is marked ``done`` (the next ``put``
    marks it ``running``); a store-wide ``Retention(delete_finished_after=…)``
    leaves such threads alone unless ``expire_finished_threads=True``.

    With a ``Store`` every method works, the async ones in a worker thread.
    With an ``AsyncStore`` use the async methods (``graph.ainvoke`` …); the
    sync ones work only from threads other than the event loop's.

    ``journal``: ``True`` (or ``JournalOptions``) records every chat-model
    response and tool result of a graph turn and replays them when the turn
    is resumed after a crash, so no recorded call is made again and no tool
    effect is repeated (``journal.py``; tools need ``ToolNode(tools,
    **journal_tools())``). Each turn then holds the thread's run, one live
    writer at a time. Off by default. ``saver.journal`` is the journal
    (``saver.journal.tally(thread_id)``: the thread's counters), or None.
    """

    def __init__(
        self,
        store: Store | AsyncStore,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        messages_channel: str = "messages",
        cache_size: int = 256,
        expire_finished_threads: bool = False,
        journal: bool | JournalOptions = False,
    ) -> None:
        super().__init__(serde=make_serde(allowed_types))
        self.expire_finished_threads = expire_finished_threads
        self._owners: dict[str, int] = {}  # the threads this saver claimed (ownership.py)
        self.store = store
        self.messages_channel = messages_channel
        self._cache = CheckpointCache(cache_size)
        self.journal: Journal | None = None
        if journal is False:
            self._runner = Runner(store)
        else:
            options = journal if isinstance(journal, JournalOptions) else JournalOptions()
            self._runner = JournalRunner(store, lambda: self.journal)  # type: ignore[arg-type,return-value]
            self.journal = Journal(self, options)

    @classmethod
    @contextmanager
    def from_url(
        cls,
        url: str = DEFAULT_URL,
        *,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        messages_channel: str = "messages",
        journal: bool | JournalOptions = False,
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
            yield cls(store, allowed_types=allowed_types, messages_channel=messages_channel, journal=journal)
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
        journal: bool | JournalOptions = False,
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
            yield cls(store, allowed_types=allowed_types, messages_channel=messages_channel, journal=journal)
        finally:
            await store.close()

    # --- flows: each operation once; the sync and async methods below only run them

    def _context(self) -> steps.Context:
        # self.serde may be swapped by with_allowlist() (a clone with a wider allow-list).
        return steps.Context(
            ValueCodec(self.serde),
            self._cache,
            self.messages_channel,
            not self.expire_finished_threads,
            self._owners,
            None if self.journal is None else self.journal.outside_turn,
        )

    def _get_tuple_flow(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        return read_flows.get_tuple(self._context(), ThreadKey.from_config(config), get_checkpoint_id(config))

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
        return read_flows.list_tuples(
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
        encoded, log = steps.encode_snapshot(
            ctx, key, checkpoint, get_checkpoint_metadata(config, metadata), parent
        )
        flow = write_flows.put(ctx, key, encoded, log)
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
        encoded = write_flows.encode_writes(ctx, writes, task_id, task_path)
        return write_flows.put_writes(ctx, key, checkpoint_id, encoded), key

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
        self._runner.run(write_flows.delete_thread(self._context(), str(thread_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of one thread to another."""
        self._runner.run(
            write_flows.copy_thread(self._context(), str(source_thread_id), str(target_thread_id))
        )

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
        await self._runner.arun(write_flows.delete_thread(self._context(), str(thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of one thread to another."""
        await self._runner.arun(
            write_flows.copy_thread(self._context(), str(source_thread_id), str(target_thread_id))
        )
