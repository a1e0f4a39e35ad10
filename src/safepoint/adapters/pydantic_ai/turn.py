"""One journaled turn of a Pydantic AI conversation: where it records, its keys, its lease.

A *turn* is one agent run on a conversation (``agent.run(prompt,
conversation=…)``). Its entries go to the conversation's safepoint run (the
run ``SafepointConversationStore`` saves it in), so the conversation save
that follows the turn is the checkpoint that covers them. A turn is named by
where the conversation stood when it began — the run's head step when the
conversation store loaded the history the run was given (the last save) and
the number of messages in it — never by anything a re-run changes: a
process that runs the same turn again after a crash (the conversation
loaded again, unchanged, since the cut turn was never saved) lands on the same
keys and replays every recorded call.

Keys: ``pai|s<step>|m<messages>|model#<n>`` for the turn's ``n``-th model
request (``compact#<n>`` for a compaction), ``…|tool:<toolset>:<tool>|<call
id>`` for a tool call (its id, given by the model, not the order in which
parallel calls finish), ``…|cap:<capability>.<operation>#<n>`` for a
capability's durable operation. ``%`` and ``|`` in a part are escaped; a
long or empty part is replaced by its SHA-256. ``<key>!resent:<writer>``, an
intent ``safepoint.journal``'s ``model_call`` writes, notes a model request
found in flight and sent again by that writer, written before it is sent: a
save counts it, with the usage of the response the request got (the lost
estimate). Saves count the notes earlier releases wrote, ``<key>|resent|<writer>``, too.
"""

from __future__ import annotations

import contextvars
import hashlib
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from safepoint import AsyncStore, Checkpoint, Conflict, InvalidArgument, Store
from safepoint.flow import Flow, Save, head_or_none
from safepoint.journal import Place, Tally, ToolPolicy, holding, resends
from safepoint.journal import counters as journal_counters
from safepoint.records import CallUsage, Lease, Recorded

from .framework import usage_in
from .layout import ADAPTER, ADAPTER_LABEL, CONVERSATION_LABEL, readable

ACTIVE: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("safepoint_pai_turn", default=None)
CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("safepoint_pai_key", default=None)

PREFIX = "pai"
OLD_RESENT = "resent"  # <key>|resent|<writer>: the note of a re-send as earlier releases wrote it
_PART_IN_KEY = 128


def key_part(text: str) -> str:
    """``text`` as a piece of a key: itself with ``%`` and ``|`` escaped (a tool-call id comes
    from the model: it must not pass for a key's own separators, as in ``x|tool:y``), or
    ``#<sha256>`` when long or empty (keys are bounded)."""
    escaped = text.replace("%", "%25").replace("|", "%7C")
    if escaped and len(escaped) <= _PART_IN_KEY:
        return escaped
    return "#" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class Turn:
    """What one turn's calls share (``ACTIVE``): where entries go, the lease, what was counted."""

    store: Store | AsyncStore
    run_id: str
    lease: Lease | None
    step: int  # the conversation run's head when the turn began
    messages: int  # how many messages the run was given (its history)
    history_digest: str  # the history's stable projection, hashed once: part of each request's digest
    policies: dict[str, ToolPolicy]
    price: Any = None  # the user's: a response's spend from its usage
    resolve_secrets: Any = False
    models: Tally = field(default_factory=Tally)
    tools: Tally = field(default_factory=Tally)
    operations: Tally = field(default_factory=Tally)  # capabilities' durable operations
    order: dict[str, int] = field(default_factory=dict)

    def usage_of(self, payload: Any) -> CallUsage | None:
        """A recorded response's usage, as the framework reported it. Its spend: the user's price
        of it, else the cost the framework reported in it (a provider's or gateway's), else 0."""
        usage = usage_in(payload)
        if usage is None:
            return None
        if self.price is not None:
            spend = self.price(usage)
            if (
                isinstance(spend, bool)
                or not isinstance(spend, int | float | Decimal)
                or not math.isfinite(float(spend))
            ):
                raise InvalidArgument("SafepointJournal's price returned something other than a number")
        else:
            spend = usage.cost or 0
        return CallUsage(usage.input_tokens, usage.output_tokens, float(spend))

    def place(self) -> Place:
        return Place(self.run_id, self.lease)

    def prefix(self) -> str:
        return f"{PREFIX}|s{self.step}|m{self.messages}"

    def next_key(self, kind: str) -> str:
        """The key of the turn's next call of ``kind`` (``model``, ``compact``, ``cap:…``): its order."""
        n = self.order.get(kind, 0)
        self.order[kind] = n + 1
        return f"{self.prefix()}|{kind}#{n}"

    def tool_key(self, toolset: str, tool: str, call_id: str | None) -> str:
        if not call_id:  # a model that gave no call id: the tool's order in the turn instead
            n = self.order.get(f"tool:{toolset}:{tool}", 0)
            self.order[f"tool:{toolset}:{tool}"] = n + 1
            call_id = f"#{n}"
        return f"{self.prefix()}|tool:{key_part(toolset)}:{key_part(tool)}|{key_part(call_id)}"


@dataclass(frozen=True, slots=True)
class Opened:
    lease: Lease
    step: int


def open_turn(
    store: Store | AsyncStore, run_id: str, conversation_id: str, terms: holding.Terms, loaded_at: int | None
) -> Flow[Opened]:
    """Hold the conversation's run (made first when the conversation has none yet); the turn
    begins at ``loaded_at``, the step its history was loaded at, else at the run's head as read
    *before* waiting for the lease: a turn another process finished meanwhile moved the head, and
    this run, given the history from before it, is that same turn."""
    yield from _run_exists(run_id, conversation_id)
    step = loaded_at
    if step is None:
        info = yield from head_or_none(run_id)
        step = 0 if info is None else info.head_step
    lease = yield from holding.acquire(store, run_id, holding.new_owner(), terms)
    return Opened(lease, step)


def _run_exists(run_id: str, conversation_id: str) -> Flow[None]:
    """An empty first step for a conversation not saved yet: a lease and entries need a run.

    It holds no record, so the conversation store reads it as a conversation
    it does not have, and its first save goes on from it.
    """
    while (yield from head_or_none(run_id)) is None:
        cp = Checkpoint(run_id=run_id, step=0)
        cp.state = {"record": None, "refs": []}
        cp.labels = {ADAPTER_LABEL: ADAPTER, CONVERSATION_LABEL: readable(conversation_id)}
        try:
            yield Save(cp)
        except Conflict:
            continue  # another writer made it first
    return None


def close_turn(turn: Turn) -> Flow[None]:
    """Give the conversation back: the save that follows covers the turn's entries."""
    yield from holding.release(turn.store, turn.lease)


def counters_at(head: Checkpoint | None, entries: list[Recorded]) -> dict[str, int | float]:
    """A conversation save's counters: the head's, plus one count per call the journal recorded
    since (the entries the save covers, however many runs made or replayed them), and what
    re-sent requests cost, apart: one per resend note, estimated by the usage of the response
    the request finally got."""
    models = resends.counted(entries, _model_key).tally
    tools = Tally()
    responses = {entry.key: entry for entry in entries if entry.done}
    for entry in entries:
        if resends.sent_key(entry.key) is not None and not entry.done:
            continue  # a note of a re-send, counted above
        # pai|s<step>|m<messages>|<kind>[|<call id>, or |resent|<writer>]: no part holds a "|"
        parts = entry.key.split("|")
        if parts[0] != PREFIX or len(parts) < 4:
            continue
        kind, rest = parts[3], parts[4:]
        if kind.startswith(("model#", "compact#")):
            if rest[:1] == [OLD_RESENT]:
                models.resent += 1
                answered = responses.get("|".join(parts[:4]))
                models.lost(None if answered is None else answered.usage)
            elif not rest and entry.done:
                models.called += 1
                models.count(entry.usage)
        elif kind.startswith("tool:") and entry.done:
            tools.called += 1
    stored = {} if head is None else head.counters
    lost_before = {name: stored.get(name, 0) for name in journal_counters.LOST}
    return journal_counters.counters(models, tools, journal_counters.counted(stored), lost_before)


def _model_key(key: str) -> bool:
    """Whether ``key`` is a model request's (``pai|s<step>|m<messages>|model#<n>``, or compact)."""
    parts = key.split("|")
    return len(parts) == 4 and parts[0] == PREFIX and parts[3].startswith(("model#", "compact#"))
