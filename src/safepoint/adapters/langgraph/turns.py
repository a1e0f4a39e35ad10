"""A graph turn under the call journal: one live writer per thread, and the journal's lineage.

A journaling saver holds its thread's root run for the whole of a graph
turn — from the start of ``invoke``/``ainvoke``/``stream``/``astream`` of
the root graph to its end — with the run's lease (``Store.hold_run``), the
very lease an exclusive ``Run`` holds (``safepoint.harness.holders``: a
heartbeat renews it, a SIGKILLed holder on this host is taken over at once,
a live one is waited for, up to ``JournalOptions.wait``). Every save the
saver makes to that run meanwhile goes under the lease, and so does every
journal entry: a second process resuming the same thread waits at its
turn's start, then reads the checkpoint the first one left, so no effect
happens twice; a writer that lost its lease gets ``LeaseLost`` and writes
nothing.

The turn also settles the thread's journal **lineage**, part of every key:
LangGraph's step numbers restart below the head when a thread is forked
(``invoke`` with an older ``checkpoint_id``, or ``update_state`` on one),
so keys from the abandoned branch could be met again. A turn that starts
from a checkpoint other than the thread's latest, and a write outside any
turn whose parent is not the latest (``branched``), start a new lineage
(a step of the root run), and nothing recorded under an older one is ever
replayed into the fork.

A turn given new input first keeps the **finished step** a crash left
unapplied (``FinishedStep``): when every task of the thread's latest step
wrote its result but the checkpoint after it was lost (a SIGKILL between
the two, under any durability), LangGraph's ``get_state`` shows the step as
done — values with its results, ``next`` empty — yet new input discards
those results, so a model response already paid for (and recorded) would
vanish from the conversation. The turn applies them first, as LangGraph's
own ``update_state(config, None, as_node=END)`` does (finished tasks' writes
kept, nothing run), so the new input lands on the state ``get_state`` showed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Generator
from typing import Any

from langgraph.constants import END

from safepoint import AsyncStore, Checkpoint, Conflict, InvalidArgument, NotFound
from safepoint.adapters.cache import is_head
from safepoint.flow import Flow, Save, head_or_none, load_or_none
from safepoint.harness import exclusive
from safepoint.harness.exclusive import Terms
from safepoint.harness.holders import AsyncHolding, Holding
from safepoint.journal import Place, Tally
from safepoint.journal import counters as journal_counters
from safepoint.records import Lease
from safepoint.twins import awaiting, blocking

from .layout import THREAD_ROLE, ThreadKey, empty_snapshot
from .memo import Log, Memo
from .steps import KEEP_FINISHED_LABEL, Built, Context, append_step

__all__ = ["LINEAGE", "FinishedStep", "Turn", "branched", "lineage_of"]

LINEAGE = "journal"  # the step-state field: {"lineage": int}; carried by every step (layout.bookkeeping)


def lineage_of(state: dict[str, Any] | None) -> int:
    record = (state or {}).get(LINEAGE)
    return int(record["lineage"]) if isinstance(record, dict) else 0


def branched(cp: Checkpoint, head_state: dict[str, Any] | None, parent: str | None) -> None:
    """Start a new lineage in ``cp`` when it stores a checkpoint whose parent is not the thread's
    latest (an ``update_state`` on an older checkpoint, outside any turn)."""
    latest = (head_state or {}).get("latest")
    if parent is not None and latest is not None and parent != latest[0]:
        cp.state[LINEAGE] = {"lineage": lineage_of(head_state) + 1}


# What a call's tally adds to its turn's counters (never ``replayed``: a replayed call's entry
# was counted when the turn began).
_ADDED = (
    "called",
    "resent",
    "reconciled",
    "skipped",
    "tokens_in",
    "tokens_out",
    "spend",
    "lost_tokens_in",
    "lost_tokens_out",
    "lost_spend",
)


class Turn:
    """One graph turn on one thread: its hold, its lineage, its model calls' order per task."""

    def __init__(self, journal: Any, thread_id: str, checkpoint_id: str | None) -> None:
        self.journal = journal  # the saver's journal.Journal (which imports this module)
        self.thread_id = thread_id
        self.key = ThreadKey(thread_id, "")
        self.run_id = self.key.thread_run
        self.checkpoint_id = checkpoint_id
        self.lineage = 0
        self.holding: Holding | AsyncHolding | None = None
        self.finishing: FinishedStep | None = None  # set for a turn given new input (journal.turn_hook)
        self._calls: dict[Any, int] = {}
        self._lock = threading.Lock()
        # The thread's counters from its entries when the turn began, and the calls it recorded
        # anew since (a replayed call is among the entries already: counted once).
        self.base: dict[str, int | float] | None = None  # known once the turn holds the thread
        self.stamped: tuple[int, dict[str, int | float]] | None = None  # the last save's step, counters
        self.models = Tally()
        self.tools = Tally()

    # -- what calls read -------------------------------------------------------------------

    @property
    def lease(self) -> Lease | None:
        holding = self.holding
        return None if holding is None else holding.lease

    def place(self) -> Place:
        return Place(self.run_id, self.lease)

    def next_call(self, scope: Any) -> int:
        """The number of the next model call of ``scope`` (a task, or a tool call in it) this turn."""
        with self._lock:
            number = self._calls.get(scope, 0)
            self._calls[scope] = number + 1
            return number

    def recorded(self, tally: Tally, *, model: bool) -> None:
        """Count one call's tally (a model call's, or a tool call's) into the turn's counters."""
        if model and tally.replayed:
            return  # a replayed response: its entry was counted when the turn began
        into = self.models if model else self.tools
        with self._lock:
            for name in _ADDED:
                setattr(into, name, getattr(into, name) + getattr(tally, name))

    def counters(self) -> dict[str, int | float]:
        """The thread's counters now: its entries' when the turn began, plus this turn's."""
        with self._lock:
            base = self.base or {}
            return journal_counters.counters(self.models, self.tools, base, base)

    # -- begin and end ---------------------------------------------------------------------

    def begin(self) -> None:
        store = self.journal.store
        if isinstance(store, AsyncStore):
            raise InvalidArgument(
                "a journaling saver on an AsyncStore runs graphs with ainvoke/astream; "
                "give it a sync Store (safepoint.open_store) for invoke/stream"
            )
        holding = self._holding(Holding(store, self._terms()))
        holding.enter()  # the same thread opening the thread again (a nested turn) is refused
        self._start_blocking(holding)

    async def abegin(self) -> None:
        store = self.journal.store
        if not isinstance(store, AsyncStore):
            # Made here, so another turn of this process judges it by this task; held from a worker
            # thread (the heartbeat is a thread of its own), so the event loop never blocks.
            holding = self._holding(Holding(store, self._terms()))
            await asyncio.to_thread(self._start_blocking, holding)
            return
        aholding = self._holding(AsyncHolding(store, self._terms()))
        try:
            try:
                await awaiting(exclusive.hold(aholding, self.run_id))
            except NotFound:
                await self.journal.runner.arun(ensure_run(self.journal.context(), self.key), lock=self.run_id)
                await awaiting(exclusive.hold(aholding, self.run_id))
            self.base = await self.journal.runner.arun(self.journal.counted(self))
            self.journal.started(self)
            ctx = self.journal.context()
            self.lineage = await self.journal.runner.arun(settle_lineage(ctx, self.key, self.checkpoint_id))
            if self.finishing is not None and self.checkpoint_id is None:
                await self.finishing.aapply()
        except BaseException:
            await self.aend()
            raise

    def _holding(self, holding: Any) -> Any:
        holding.attach(self)  # known to this process's other turns from now on (exclusive.judge)
        self.holding = holding
        return holding

    def _start_blocking(self, holding: Holding) -> None:
        """Hold the thread's run (made first on a thread's first turn), then settle the lineage."""
        try:
            try:
                blocking(exclusive.hold(holding, self.run_id))
            except NotFound:  # a thread's first turn: its run is made first (before any entry)
                self.journal.runner.run(ensure_run(self.journal.context(), self.key), lock=self.run_id)
                blocking(exclusive.hold(holding, self.run_id))
            self.base = self.journal.runner.run(self.journal.counted(self))
            self.journal.started(self)
            ctx = self.journal.context()
            self.lineage = self.journal.runner.run(settle_lineage(ctx, self.key, self.checkpoint_id))
            if self.finishing is not None and self.checkpoint_id is None:
                self.finishing.apply()
        except BaseException:
            self._let_go()
            raise

    def end(self) -> None:
        self._let_go()

    async def aend(self) -> None:
        holding = self.holding
        self.journal.ended(self)
        if isinstance(holding, AsyncHolding):
            await holding.release()
        elif holding is not None:
            await asyncio.to_thread(self._let_go)

    def _let_go(self) -> None:
        self.journal.ended(self)
        holding = self.holding
        if isinstance(holding, Holding):
            if holding.busy:
                holding.leave()
            holding.release()

    def _terms(self) -> Terms:
        options = self.journal.options
        return Terms.of(options.hold, options.wait)


class FinishedStep:
    """The thread's latest step, if a crash left it finished but unapplied, applied before a
    turn's new input (see the module's docstring). Served by the graph's public state API, in
    the turn, under its lease: one ``get_state`` per turn given input, and an ``update_state``
    only after such a crash."""

    def __init__(self, graph: Any, config: dict[str, Any]) -> None:
        self.graph, self.config = graph, config

    @staticmethod
    def unapplied(snapshot: Any) -> bool:
        """Every task of the step has written (``next`` is empty) and none is paused or failed:
        only the checkpoint after it is missing."""
        tasks = snapshot.tasks
        return bool(tasks) and not snapshot.next and not any(t.interrupts or t.error for t in tasks)

    def apply(self) -> None:
        if self.unapplied(self.graph.get_state(self.config)):
            self.graph.update_state(self.config, None, as_node=END)

    async def aapply(self) -> None:
        if self.unapplied(await self.graph.aget_state(self.config)):
            await self.graph.aupdate_state(self.config, None, as_node=END)


# -- flows on the thread's root run --------------------------------------------------------


def ensure_run(ctx: Context, key: ThreadKey) -> Flow[None]:
    """The thread's root run, made (a step holding no checkpoint yet) if it does not exist, so
    its lease can be held and entries recorded before LangGraph's first ``put`` (under
    ``durability="exit"`` that is the turn's end)."""
    head = yield from load_or_none(key.thread_run)
    if head is not None:
        return
    cp = Checkpoint(run_id=key.thread_run, step=0)
    cp.state = {**empty_snapshot(), "latest": None, "recent": {}, "unindexed": [], "orphans": {}}
    cp.labels = key.labels(THREAD_ROLE)
    if ctx.keep_finished:
        cp.labels[KEEP_FINISHED_LABEL] = "true"
    with contextlib.suppress(Conflict):  # another process made it first
        yield Save(cp)
    ctx.cache.drop(key.thread_run)


def settle_lineage(ctx: Context, key: ThreadKey, checkpoint_id: str | None) -> Flow[int]:
    """The lineage this turn records under: the thread's, or a new one when the turn starts
    from a checkpoint other than the latest (a fork)."""
    head = yield from _fresh_head(ctx, key)
    if head is None:
        return 0
    latest = head.state.get("latest")
    if checkpoint_id is None or latest is None or latest[0] == checkpoint_id:
        return lineage_of(head.state)
    saved = yield from append_step(ctx, key, _new_lineage, flush=False)
    return lineage_of(saved.state)


def _fresh_head(ctx: Context, key: ThreadKey) -> Flow[Checkpoint | None]:
    cached = ctx.memo(key)
    if cached is not None:
        info = yield from head_or_none(key.thread_run)
        if is_head(info, cached[0]):
            return cached[0]
        ctx.cache.drop(key.thread_run, only=cached[0])
    return (yield from load_or_none(key.thread_run))


def _new_lineage(head: Checkpoint | None, memo: Memo) -> Generator[Any, Any, Built]:
    assert head is not None  # settle_lineage found it
    cp = head.next()
    cp.state = dict(head.state)
    cp.state[LINEAGE] = {"lineage": lineage_of(head.state) + 1}
    return cp, memo.head_log() or Log()
    yield  # a generator, for append_step's ``yield from``
