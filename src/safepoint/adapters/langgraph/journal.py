"""LangGraph's call journal: a journaling ``SafepointSaver`` records every chat-model response
and tool result of a graph turn, and a resumed turn replays them instead of calling again.

Turn it on with the saver line, and journal the tools with the ``ToolNode`` line::

    saver = SafepointSaver(store, journal=True)
    tools = ToolNode([pay, lookup], **journal_tools())

Nothing else changes: no node, tool or model body. What it covers, and how:

* **Chat models** — ``invoke``, ``ainvoke``, ``stream``, ``astream`` (and
  ``generate``/``batch``), whatever the model's ``cache`` setting — through
  one class-level patch of ``BaseChatModel`` (``patches.py``), inert unless
  the running task's checkpointer is a journaling saver. A stream is
  recorded once it is complete; a stream cut short is a call in flight.
* **Tools** through ``ToolNode``'s public ``wrap_tool_call``/``awrap_tool_call``
  (``tools.py``). A tool marked ``@non_idempotent`` (or named in
  ``JournalOptions.non_idempotent``) writes an intent before it runs; found
  in flight after a crash it goes to its reconcile hook (``Reconcile.rerun``,
  ``skip``, ``wait`` — ``wait`` becomes a LangGraph ``interrupt``).
  ``current_call_key()`` is the key, for the tool to pass on as its
  idempotency key.
* **Keys** (``key_base``): the thread id, the checkpoint namespace with its
  task ids stripped, the journal lineage (``turns.py``), ``langgraph_step``,
  ``langgraph_path``, then the call's number in its task (a model) or its
  tool-call id (a tool) — never a checkpoint or task id, which a re-run
  under the default durability renews. The request's digest
  (``calls.request_digest``, without message ids) guards each replay: a
  changed request is called, recorded under a key of its own and counted as
  a divergence.
* **One live writer per turn** (``turns.py``): the thread's root run is held
  for the turn; its saves and every entry go under that lease.
* **Counters** come from the entries (``Journal.tally``), never from a
  replayed message's ``usage_metadata``. A turn reads the thread's entries
  once when it starts (``counters_flow``), adds each call it records anew,
  and stamps the sum on every save of the thread's run it makes
  (``safepoint.journal.counters``' names), so ``safepoint runs`` shows them.

Entries belong to the thread's root-namespace run (``langgraph/<thread>``),
so retention, export, ``verify`` and ``safepoint show`` treat them as that
run's. Replay is not caching: an entry is read only by its own thread, at its
own place, for the same request — never by another thread, never into a fork.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from safepoint import AsyncStore, NotFound, Store
from safepoint.adapters.runner import Runner
from safepoint.flow import CallIntent, Flow, RecordCall, RecordedCall, Save, head_or_none
from safepoint.journal import RESENT, Tally, resends
from safepoint.journal import counters as journal_counters
from safepoint.reconcile import Reconcile
from safepoint.records import Recorded
from safepoint.twins import Invoke, ask, translate

from . import patches
from .digests import MessageDigests
from .layout import ThreadKey
from .patches import CHECKPOINTER, TASK_ID
from .turns import FinishedStep, Turn

if TYPE_CHECKING:
    from .steps import Context

__all__ = ["RESENT", "Journal", "JournalOptions", "JournalRunner", "key_base"]

_DIVERGED = re.compile(r"~[0-9a-f]{16}$")
_MODEL = re.compile(r"/model#\d+(~[0-9a-f]{16})?$")  # a model call's key (calls.model_hook); else a tool's
_COUNTS = ("called", "replayed", "resent", "divergences", "unrecorded", "reconciled", "skipped")
KEPT_KEYS = 256  # the last keys replayed that ``Journal.seen`` names (a long-lived process keeps no more)


@dataclass(frozen=True, slots=True)
class JournalOptions:
    """How a saver journals (``SafepointSaver(store, journal=JournalOptions(...))``; ``True``
    takes these defaults).

    ``non_idempotent``: tool names whose calls write an intent first, each
    with its reconcile decision or hook (``Reconcile.skip(...)``, or a
    function of ``(key, tool_name, args)`` returning one; None: ``wait``) —
    the same as marking the tool ``@non_idempotent``. ``price``: the spend of
    one model response, from its ``usage_metadata`` (default: no spend is
    counted). ``resolve_secrets``: how a replay resolves secret references
    (as ``Store.load``'s). ``hold``: the thread's lease period in seconds
    during a turn; ``wait``: how long a turn waits for another live writer
    of its thread (default: one lease period).
    """

    non_idempotent: Mapping[str, Any] = field(default_factory=dict)
    price: Callable[[Mapping[str, Any]], float] | None = None
    resolve_secrets: Any = False
    hold: float = 30.0
    wait: float | None = None


class Journal:
    """A saver's journal: its turns in progress, its options, and what this process saw."""

    def __init__(self, saver: Any, options: JournalOptions) -> None:
        self.saver = saver  # its SafepointSaver (saver.py imports this module)
        self.options = options
        self.turns: dict[str, Turn] = {}  # thread id -> its turn in progress in this process
        self._held: dict[str, Turn] = {}  # root run id -> the same turn
        self._seen = Tally()
        # thread run -> (lease epoch, step, counters) of this process's last turn there (counted)
        self._bases: dict[str, tuple[int, int, dict[str, int | float]]] = {}
        self._lock = threading.Lock()
        self.digests = MessageDigests()  # the model requests' messages digested so far (digests.py)
        patches.install()

    @property
    def store(self) -> Store | AsyncStore:
        store: Store | AsyncStore = self.saver.store
        return store

    @property
    def runner(self) -> Runner:
        runner: Runner = self.saver._runner
        return runner

    def context(self) -> Context:
        context: Context = self.saver._context()
        return context

    # -- turns ------------------------------------------------------------------------------

    def started(self, turn: Turn) -> None:
        with self._lock:
            self.turns[turn.thread_id] = turn
            self._held[turn.run_id] = turn

    def ended(self, turn: Turn) -> None:
        if self.turns.get(turn.thread_id) is turn:
            self.remember(turn)
        with self._lock:
            if self.turns.get(turn.thread_id) is turn:
                del self.turns[turn.thread_id]
                del self._held[turn.run_id]

    def turn_of(self, config: Mapping[str, Any]) -> Turn | None:
        thread = (config.get("configurable") or {}).get("thread_id")
        return None if thread is None else self.turns.get(str(thread))

    def outside_turn(self, thread_id: str) -> bool:
        """Whether a write to the thread now is outside any turn of this saver (``update_state``)."""
        return thread_id not in self.turns

    def fence(self, request: Any) -> Any:
        """A save to a run this saver holds for a turn, made under the turn's lease and stamped
        with the thread's counters (``safepoint runs`` and the inspector read them there)."""
        if type(request) is Save:
            turn = self._held.get(request.checkpoint.run_id)
            if turn is not None and turn.base is not None:  # None: not yet known (begin's saves)
                counters = turn.counters()
                request.checkpoint.counters.update(counters)
                turn.stamped = (request.checkpoint.step, counters)
            lease = None if turn is None else turn.lease
            if lease is not None:
                return Invoke(self.store.save, (request.checkpoint,), {"lease": lease})
        return request

    def counted(self, turn: Turn) -> Flow[dict[str, int | float]]:
        """Where a turn's counting starts: the thread's counters from its entries. Read from
        every entry, unless this process's last turn of the thread ended with all it recorded
        saved, the thread's run is still at that turn's last save and no one held it since
        (this turn's lease is the next claim): then that save's counters are the entries'."""
        lease = turn.lease
        with self._lock:
            known = self._bases.get(turn.run_id)
        if known is not None and lease is not None and lease.epoch == known[0] + 1:
            info = yield from head_or_none(turn.run_id)
            if info is not None and info.head_step == known[1]:
                return dict(known[2])
        return (yield from counters_flow(self.store, turn.run_id))

    def remember(self, turn: Turn) -> None:
        """Keep where a turn ended, for the thread's next turn in this process (``counted``):
        only when its last save holds every call it recorded."""
        lease, stamped = turn.lease, turn.stamped
        with self._lock:
            self._bases.pop(turn.run_id, None)
            if lease is not None and stamped is not None and stamped[1] == turn.counters():
                self._bases[turn.run_id] = (lease.epoch, stamped[0], stamped[1])

    # -- journal requests, for the call flows (calls.py, tools.py) --------------------------

    def rule(self, *, is_async: bool) -> Callable[[Any], Any]:
        """How a call flow's journal requests are served: each one a flow of the saver's runner,
        blocking or awaited. (A model request found in flight is marked before it is sent again
        by ``model_call`` itself — ``RESENT`` — so the count survives kills.)"""
        run = self.runner.arun if is_async else self.runner.run

        def served(request: Any) -> Any:
            if not isinstance(request, RecordedCall | CallIntent | RecordCall):
                return request
            return Invoke(run, (ask(request),))

        return served

    def absorb(self, tally: Tally, turn: Turn | None = None, *, model: bool = False) -> None:
        """Add one call's tally to what this process saw, and to its turn's counters."""
        if turn is not None:
            turn.recorded(tally, model=model)
        with self._lock:
            seen = self._seen
            for name in _COUNTS:
                setattr(seen, name, getattr(seen, name) + getattr(tally, name))
            _add_costs(seen, tally)
            seen.keys[:] = [*seen.keys, *tally.keys][-KEPT_KEYS:]

    # -- what users read --------------------------------------------------------------------

    @property
    def seen(self) -> Tally:
        """What this saver saw in this process: calls made, replayed, re-sent, diverged,
        unrecorded, reconciled (a copy). Counters to report are ``tally(thread_id)``'s."""
        with self._lock:
            copy = Tally(**{f.name: getattr(self._seen, f.name) for f in fields(Tally)})
            copy.keys = list(self._seen.keys)
            return copy

    def tally(self, thread_id: str) -> Tally:
        """The thread's cost, from its journal: tokens and spend of every recorded call, once
        each however often it was replayed; ``resent`` requests sent again after a crash, and
        ``lost_*`` their cost as each re-sent call reported it (an estimate, apart)."""
        return self.runner.run(tally_flow(self.store, _root_run(thread_id)))

    async def atally(self, thread_id: str) -> Tally:
        """``tally``, awaited."""
        return await self.runner.arun(tally_flow(self.store, _root_run(thread_id)))


class JournalRunner(Runner):
    """The saver's runner when it journals: every flow's saves to a run it holds for a turn go
    under the turn's lease."""

    def __init__(self, store: Store | AsyncStore, journal: Callable[[], Journal]) -> None:
        super().__init__(store)
        self._journal = journal

    def run(self, flow: Any, lock: str | None = None) -> Any:
        return super().run(translate(flow, self._journal().fence), lock)

    async def arun(self, flow: Any, lock: str | None = None) -> Any:
        return await super().arun(translate(flow, self._journal().fence), lock)


def key_base(turn: Turn, config: Mapping[str, Any]) -> str | None:
    """Where a call runs, as a key's stem: thread, namespace (task ids stripped), lineage,
    superstep, task path. None outside a LangGraph task."""
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    step, path = metadata.get("langgraph_step"), metadata.get("langgraph_path")
    if step is None or path is None:
        return None
    parts = str(configurable.get("checkpoint_ns") or "").split("|")
    ns = "|".join(part.split(":")[0] for part in parts if part)
    where = [turn.thread_id, ns, turn.lineage, step, path]
    return json.dumps(where, separators=(",", ":"), default=str)


def call_scope(config: Mapping[str, Any], tool_call: str | None) -> tuple[Any, str | None]:
    """What a model call's number counts within: its task's execution (and the tool call it is
    made from, if any)."""
    return ((config.get("configurable") or {}).get(TASK_ID), tool_call)


def journal_of(config: Mapping[str, Any]) -> Journal | None:
    """The journal of the running task's checkpointer, if it is a journaling saver."""
    found = getattr((config.get("configurable") or {}).get(CHECKPOINTER), "journal", None)
    return found if isinstance(found, Journal) else None


def turn_hook(graph: Any, given_input: Any, config: Any) -> Turn | None:
    """A root graph's turn on a journaling saver (None: a subgraph, another saver, no thread)."""
    given = (config or {}).get("configurable") or {}
    configurable = {**(patches.running_config().get("configurable") or {}), **given}
    if TASK_ID in configurable:  # run as a task of a parent graph: inside the parent's turn
        return None
    journal = getattr(graph.checkpointer, "journal", None)
    if not isinstance(journal, Journal):
        journal = journal_of({"configurable": configurable})
    thread = configurable.get("thread_id")
    if journal is None or thread is None:
        return None
    turn = Turn(journal, str(thread), configurable.get("checkpoint_id"))
    if given_input is not None and not isinstance(given_input, Command):  # new input, not a resume
        turn.finishing = FinishedStep(graph, {**(config or {}), "configurable": configurable})
    return turn


def tally_flow(store: Store | AsyncStore, run_id: str) -> Flow[Tally]:
    models, tools = yield from _entries_tallied(store, run_id)
    tally = Tally()
    for part in (models, tools):
        for name in ("called", "resent", "divergences"):
            setattr(tally, name, getattr(tally, name) + getattr(part, name))
        _add_costs(tally, part)
    return tally


def counters_flow(store: Store | AsyncStore, run_id: str) -> Flow[dict[str, int | float]]:
    """The thread's counters from its journal (``safepoint.journal.counters``' names): what a
    turn starts from, before adding the calls it records anew."""
    models, tools = yield from _entries_tallied(store, run_id)
    return journal_counters.counters(models, tools, {}, {})


def _entries_tallied(store: Store | AsyncStore, run_id: str) -> Flow[tuple[Tally, Tally]]:
    """The thread's entries counted: model calls (their usage, once each; re-sent ones apart)
    and tool calls."""
    models, tools = Tally(), Tally()
    try:
        entries: list[Recorded] = yield Invoke(store.recorded_calls, (run_id,))
    except NotFound:
        return models, tools
    # The re-sends marked (model_call's RESENT entries), each with its call's cost as the estimate.
    models = resends.counted(entries, lambda key: _MODEL.search(key) is not None).tally
    for entry in entries:
        if entry.done:
            tally = models if _MODEL.search(entry.key) else tools
            tally.called += 1
            tally.count(entry.usage)
            tally.divergences += bool(_DIVERGED.search(entry.key))
    return models, tools


def _add_costs(into: Tally, tally: Tally) -> None:
    for name in ("tokens_in", "tokens_out", "spend", "lost_tokens_in", "lost_tokens_out", "lost_spend"):
        setattr(into, name, getattr(into, name) + getattr(tally, name))


def _root_run(thread_id: str) -> str:
    return ThreadKey(str(thread_id), "").thread_run


def decided(answer: Any) -> Reconcile:
    """A human's answer to a ``wait`` (``Command(resume=...)``): a ``Reconcile`` or its JSON."""
    return answer if isinstance(answer, Reconcile) else Reconcile.from_json(answer)


patches.HOOKS["turn"] = turn_hook
