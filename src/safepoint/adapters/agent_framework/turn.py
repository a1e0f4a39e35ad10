"""One journaled workflow run (a *turn*): its hold on the workflow's run, its keys, its counters.

A turn is one ``CallJournal.run(workflow, …)`` — a fresh message, a resume
from a checkpoint, or responses to pending requests. It holds the workflow's
safepoint run (``agent-framework/<name>``, the run ``SafepointCheckpointStorage``
writes) with the run's lease from before the workflow starts until it
returns, so a second process resuming the same workflow waits; the storage's
saves and every journal entry of the turn go under that lease, and each save
carries the turn's counters.

Keys name a call's place, never anything a re-run changes: the turn's
*root*, the superstep's number (the framework's, carried in each checkpoint,
so it goes on counting after a resume), the executor's id, then the call's
order among that executor's model calls in the superstep, or a tool's
function-call id::

    ["<root>",<superstep>,"<executor>"]|model#<n>
    ["<root>",<superstep>,"<executor>"]|tool:<name>|<call id>

The root is the first checkpoint a fresh run saved (its entry); every
checkpoint saved during a journaled run carries its root (``layout.Live``),
and a resume from a checkpoint takes that checkpoint's root. So a superstep
that a crash cut short, run again from the checkpoint before it (the
framework's ``run(checkpoint_id=…)``), has the keys it had; and so does a
second resume of the same checkpoint (a process that waited for the first
one's lease, or a retry), which replays what the first resume recorded —
each resume of the latest checkpoint leaves a ``resumed:<id>`` entry saying
so.

A resume from a checkpoint other than the workflow's latest that no turn
resumed before is a new branch, not a crash: its root is a key of its own
(``<checkpoint>~branch:<owner>``), so nothing recorded on the old branch
replays into the new one.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_framework import Workflow

from safepoint import AsyncStore, Store
from safepoint.flow import Flow, RecordCall, RecordedCall, head_or_none, load_or_none
from safepoint.journal import Place, Tally, ToolPolicy, holding
from safepoint.journal import counters as journal_counters
from safepoint.records import CallUsage, Lease

from . import framework, layout

_IN_KEY = 128  # longer ids go into a key as their digest (keys hold 1024 characters)

ACTIVE: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("safepoint_af_turn", default=None)
EXECUTOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_af_executor", default=None)
CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_af_key", default=None)


def _short(text: str) -> str:
    if len(text) <= _IN_KEY:
        return text
    return "#" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class Turn:
    """What one journaled workflow run's middleware share (``ACTIVE``)."""

    store: Store | AsyncStore
    workflow: Workflow
    run_id: str
    owner: str
    lease: Lease | None
    start: dict[str, int | float]  # the run's counters when the turn began
    lost_before: dict[str, int | float]
    root: str | None  # the root of the turn's keys (the module's docstring); None: its first save
    policies: dict[str, ToolPolicy]
    spend: Callable[[Any], float] | None = None
    resolve_secrets: Any = False
    models: Tally = field(default_factory=Tally)
    tools: Tally = field(default_factory=Tally)
    order: dict[str, int] = field(default_factory=dict)

    def place(self) -> Place:
        return Place(self.run_id, self.lease)

    def executor_of(self, agent: Any, session: Any) -> str:
        """The id of the workflow's executor running ``agent`` with ``session``."""
        found = [e for e in framework.agent_executors(self.workflow) if e.agent is agent]
        if len(found) > 1:
            found = [e for e in found if framework.session_of(e) is session] or found
        if found:
            return found[0].id
        return f"agent:{getattr(agent, 'name', None) or getattr(agent, 'id', '')}"

    def rooted(self, checkpoint_id: str) -> str:
        """The root of the turn's keys, which ``checkpoint_id`` is saved with: the turn's first
        save is a fresh run's root."""
        if self.root is None:
            self.root = checkpoint_id
        return self.root

    def stem(self, executor: str) -> str:
        root = self.root or self.workflow.get_last_checkpoint_id() or ""
        where = [_short(root), framework.superstep(self.workflow), _short(executor)]
        return json.dumps(where, separators=(",", ":"), ensure_ascii=False)

    def next_model_key(self, executor: str) -> tuple[str, str, int]:
        stem = self.stem(executor)
        n = self.order.get(stem, 0)
        self.order[stem] = n + 1
        return f"{stem}|model#{n}", stem, n

    def tool_key(self, executor: str, tool: str, call_id: str | None) -> str:
        stem = self.stem(executor)
        if call_id is None:  # a model that gave no call id: the tool's order in the superstep
            slot = f"{stem}|tool:{tool}"
            n = self.order.get(slot, 0)
            self.order[slot] = n + 1
            call_id = f"#{n}"
        return f"{stem}|tool:{_short(tool)}|{_short(call_id)}"

    def usage_of(self, response: Any) -> CallUsage | None:
        details = getattr(response, "usage_details", None) or {}
        tokens_in = details.get("input_token_count") or 0
        tokens_out = details.get("output_token_count") or 0
        spend = float(self.spend(response)) if self.spend is not None else 0.0
        return CallUsage(tokens_in=int(tokens_in), tokens_out=int(tokens_out), spend=spend)

    def counters(self) -> dict[str, int | float]:
        """The run's counters now: the turn's start plus one count per call recorded in this turn
        (made or replayed), what crashes cost apart."""
        return journal_counters.counters(self.models, self.tools, self.start, self.lost_before)


@dataclass(frozen=True, slots=True)
class Opened:
    lease: Lease
    start: dict[str, int | float]
    lost_before: dict[str, int | float]
    root: str | None


def open_turn(
    storage: Any, run_id: str, name: str, checkpoint_id: str | None, *, owner: str, terms: holding.Terms
) -> Flow[Opened]:
    """Hold the workflow's run (made first if the workflow never saved), read its counters, and
    find the root of the turn's keys: a resume's from its checkpoint, a new branch's its own."""
    yield from storage._opened(run_id, name)
    lease = yield from holding.acquire(storage.store, run_id, owner, terms)
    try:
        # The run's summary carries the head's counters; loading the head costs as much as the
        # run's history (its message log), so only a resume, which needs its checkpoints, pays it.
        info = yield from head_or_none(run_id)
        stored = {} if info is None else dict(info.counters)
        lost_before = {n: stored[n] for n in journal_counters.LOST if isinstance(stored.get(n), int | float)}
        root = None
        if checkpoint_id is not None:
            root, again = yield from _resumed_root(run_id, checkpoint_id, owner, lease)
            if again is not None:  # the turn replays what was counted after its checkpoint
                stored = again
        return Opened(lease, journal_counters.counted(stored), lost_before, root)
    except BaseException:
        yield from holding.release(storage.store, lease)
        raise


def _resumed_root(
    run_id: str, checkpoint_id: str, owner: str, lease: Lease
) -> Flow[tuple[str, dict[str, Any] | None]]:
    """The root of a resume's keys; and for a second resume of one checkpoint, the counters saved
    with it: its turn replays what the first resume recorded, which the head already counts."""
    head = yield from load_or_none(run_id)
    live = {} if head is None else layout.live_in(head)
    found = live.get(checkpoint_id)
    if found is None:  # not one of this workflow's checkpoints: the framework's load says so
        return checkpoint_id, None
    root = found.root or checkpoint_id
    marker = f"resumed:{_short(checkpoint_id)}"
    latest = _latest(live)
    if latest is None or latest == checkpoint_id:  # a crash's resume: noted for a second one
        yield RecordCall(run_id, marker, {"root": root}, lease=lease)
        return root, None
    resumed = yield RecordedCall(run_id, marker)
    if resumed is None:  # a new branch: nothing of the old one replays, its cost adds up
        return f"{checkpoint_id}~branch:{owner}", None
    # Resumed before (a process that waited for the first one, a retry): the same keys, replayed.
    saved = yield from load_or_none(run_id, found.step)
    return root, None if saved is None else dict(saved.counters)


def _latest(live: dict[str, layout.Live]) -> str | None:
    try:
        return max(live, key=lambda cid: datetime.fromisoformat(live[cid].timestamp)) if live else None
    except TypeError:  # aware and naive timestamps: no latest to tell a branch by
        return None
