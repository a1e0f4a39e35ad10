"""``SafepointJournal``: a durability capability, so a crash repeats no recorded call of a turn.

The one line, on the agent::

    conversations = SafepointConversationStore(safepoint.open_store("sqlite:///state.db"))
    agent = Agent(model, name="support", toolsets=[tools],
                  capabilities=[SafepointJournal(conversations)])

Each run on a conversation (``agent.run(prompt, conversation=…)``) is a
*turn*: its model responses (plain, streamed, compactions), tool results
(function, MCP and dynamic toolsets) and capabilities' durable operations are
recorded in the conversation's safepoint run as they complete. After a crash
the app does what it always does — load the conversation, run the prompt,
save — and the turn, which was never saved, runs again with every recorded
call replayed: only the call in flight at the crash is made again (a model
request is re-sent and counted; a non-idempotent tool goes to its reconcile
hook). The save then stores each of the turn's messages once.

It is built as Pydantic AI's durable engines are (``pydantic_ai.durable_exec``):
a ``BaseDurabilityCapability`` whose ``JournalCallableOperationBackend``
(``calls.JournalBackend``) runs each durable unit; the turn — the engine's
"durable container" — is the agent run, held by the conversation run's lease
(``turn``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext

from safepoint import AsyncStore, InvalidArgument, Reconcile, Store
from safepoint.journal import ActionWaiting, Tally, ToolPolicy, holding

from . import framework
from .calls import TOOL_CONFIG_KEY, JournalBackend, digest
from .framework import JSON_CODEC, BaseDurabilityCapability, DurabilityEngineSpec, RoleBasedOperationConfig
from .layout import conversation_run_id
from .store import SafepointConversationStore
from .turn import ACTIVE, CALL_KEY, Turn, close_turn, open_turn

Hook = Reconcile | Callable[[str, str, Any], Any] | None

__all__ = ["LastTurn", "SafepointJournal", "current_call_key", "non_idempotent"]


def current_call_key() -> str | None:
    """The journal key of the tool call running now — an idempotency key for the service the tool
    calls, the same in every process that runs or resumes the call; None outside one."""
    return CALL_KEY.get()


def non_idempotent(reconcile: Hook = None) -> dict[str, Any]:
    """Tool metadata marking a tool whose effect must not happen twice::

        @toolset.tool_plain(metadata=non_idempotent(reconcile=charge_outcome))
        def charge(amount: int) -> str: ...

    Its intent is recorded before it runs; found in flight after a crash it
    goes to ``reconcile`` — a ``Reconcile`` (``rerun``, ``skip(result)``: the
    tool's answer, ``wait``) or a hook ``(key, tool name, arguments) ->
    Reconcile``; without one the run stops with ``ActionWaiting``. (Merge it
    into other metadata with ``{**other, **non_idempotent(...)}``; for tools you
    do not define, such as an MCP server's, use ``SafepointJournal(non_idempotent=…)``.)
    """
    return {TOOL_CONFIG_KEY: {"idempotent": False, "reconcile": _hook(reconcile)}}


def _hook(hook: Any) -> Hook:
    """A reconcile hook as given, checked: a ``Reconcile``, a callable, or None (wait)."""
    if hook is None or isinstance(hook, Reconcile) or callable(hook):
        return hook  # type: ignore[no-any-return]
    raise InvalidArgument("a non-idempotent tool's reconcile must be a Reconcile, a callable or None")


def _named(tools: Any) -> Mapping[str, Any]:
    if tools is None:
        return {}
    if not isinstance(tools, Mapping):
        raise InvalidArgument("SafepointJournal's non_idempotent maps tool names to reconcile hooks")
    return tools


def _tool_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgument("SafepointJournal's non_idempotent is keyed by tool names (non-empty strings)")
    return name


def _seconds(what: str, value: Any) -> float:
    """A lease period or a wait: a positive, finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise InvalidArgument(f"SafepointJournal's {what} must be a positive number of seconds")
    return float(value)


@dataclass
class LastTurn:
    """The latest turn a journal ran: where it recorded, and what its calls did."""

    run_id: str
    step: int
    messages: int
    models: Tally
    tools: Tally
    operations: Tally  # capabilities' durable operations (not counted as tool calls)


class _Shared:
    """What every bound copy of one journal shares (``for_agent`` copies the capability)."""

    def __init__(self) -> None:
        self.last_turn: LastTurn | None = None


@dataclass(init=False)
class SafepointJournal(BaseDurabilityCapability[AgentDepsT]):
    """Record every call of an agent's turns in safepoint; replay them when a cut turn runs again.

    ``conversations``: the ``SafepointConversationStore`` the app saves its
    conversations with (the journal records in the same runs), or a
    ``Store``/``AsyncStore`` (runs named as that store names them).
    ``non_idempotent``: tools by name, each with its reconcile (as the
    ``non_idempotent()`` metadata; this option wins). ``price``: the spend of
    one model response from its ``pydantic_ai.usage.RequestUsage`` (without
    it: the ``cost`` Pydantic AI reports in that usage, else 0 — never a
    price table of safepoint's). ``hold``: the lease a turn holds its conversation's
    run with, renewed every third of it; ``wait``: how long a second process
    waits for a turn another one is running (default ``hold``), then
    ``RunHeld``. ``name``, ``models``, ``event_stream_handler``: as every
    Pydantic AI durability capability takes them (the agent needs a name).
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="safepoint",
        durable_unit_noun="call",
        durable_unit_plural="calls",
        durable_container_noun="turn",
        codec=JSON_CODEC,  # recorded as Pydantic AI's own JSON: never pickled
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=False,  # listing tools is read fresh on resume, never replayed
        tool_config_key=TOOL_CONFIG_KEY,
    )

    def __init__(
        self,
        conversations: SafepointConversationStore | Store | AsyncStore,
        *,
        non_idempotent: Mapping[str, Hook] | None = None,
        price: Callable[[Any], float] | None = None,
        hold: float = 30.0,
        wait: float | None = None,
        resolve_secrets: Any = False,
        name: str | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: Any = None,
    ) -> None:
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        if isinstance(conversations, SafepointConversationStore):
            self.store, self._run_id_for = conversations.store, conversations.run_id
            self._loaded_at: Callable[[Any], int | None] | None = conversations.loaded_at
        elif isinstance(conversations, Store | AsyncStore):
            self.store, self._run_id_for = conversations, conversation_run_id
            self._loaded_at = None
        else:
            raise InvalidArgument(
                "SafepointJournal takes a SafepointConversationStore, a Store or an AsyncStore"
            )
        self.policies = {
            _tool_name(tool): ToolPolicy(idempotent=False, reconcile=_hook(hook))
            for tool, hook in _named(non_idempotent).items()
        }
        if price is not None and not callable(price):
            raise InvalidArgument("SafepointJournal's price must be a callable of a response's usage")
        self.price, self.resolve_secrets = price, resolve_secrets
        self.terms = holding.Terms(_seconds("hold", hold), _seconds("wait", hold if wait is None else wait))
        self._shared = _Shared()
        self._backend: JournalBackend | None = None

    @property
    def last_turn(self) -> LastTurn | None:
        """The latest turn this journal (or any agent it is attached to) ran."""
        return self._shared.last_turn

    # -- the engine ----------------------------------------------------------------------------

    @property
    def in_durable_context(self) -> bool:
        return ACTIVE.get() is not None

    def _toolset_in_durable_context(self) -> bool:
        # A dynamic or MCP toolset is resolved when the run is set up, before ``wrap_run`` opens
        # the turn: asked then, "no" would leave its calls outside the journal for the whole run.
        # Always routed instead; the backend runs a unit outside a turn as a plain call.
        return True

    def _bind_to_agent(self, agent: AbstractAgent[AgentDepsT, Any]) -> None:
        super()._bind_to_agent(agent)
        self._backend = None  # this copy's own, named after its agent

    def get_durable_operation_backend(self) -> JournalBackend:
        if self._backend is None:
            config = RoleBasedOperationConfig[Any](
                model=None, event=None, capability=None, tool=None, resolve_tool=_tool_config
            )
            self._backend = JournalBackend(
                agent_name=self.name, default_model_id=self.default_model_id, config=config
            )
        return self._backend

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Hold the conversation for the turn; run it with every call journaled."""
        conversation = ctx.conversation_id
        if ACTIVE.get() is not None or framework.in_durable_unit() or conversation is None:
            return await handler()  # an agent run inside a journaled call is part of that call
        run_id = self._run_id_for(conversation)
        loaded_at = self._loaded_at(ctx.messages[-1]) if ctx.messages and self._loaded_at else None
        opening = open_turn(self.store, run_id, conversation, self.terms, loaded_at)
        opened = await holding.serve(self.store, opening)
        turn = Turn(
            store=self.store,
            run_id=run_id,
            lease=opened.lease,
            step=opened.step,
            messages=len(ctx.messages),
            history_digest=digest(_history(ctx.messages, loaded_at)),
            policies=self.policies,
            price=self.price,
            resolve_secrets=self.resolve_secrets,
        )
        beat = holding.Beat(self.store, turn, self.terms, thread=False)
        token = ACTIVE.set(turn)
        try:
            with framework.replay_scope():
                return await super().wrap_run(ctx, handler=handler)
        except Exception as error:
            waiting = _waiting(error)
            if waiting is not None and waiting is not error:
                raise waiting from error
            raise
        finally:
            ACTIVE.reset(token)
            beat.stop()
            self._shared.last_turn = LastTurn(
                run_id, turn.step, turn.messages, turn.models, turn.tools, turn.operations
            )
            with anyio.CancelScope(shield=True):  # a cancelled run still lets go of its conversation
                await holding.serve(self.store, close_turn(turn))


def _history(messages: list[Any], loaded_at: int | None) -> Any:
    """What names the history a turn was given, in each request's digest. A history the
    conversation store loaded is the conversation as its run stood at ``loaded_at``: named by
    that step, its length and its last message (projecting every message each turn would cost
    a turn time in proportion to the conversation). Any other history: all of it."""
    if loaded_at is None:
        return framework.messages_projection(messages)
    return {
        "loaded_at": loaded_at,
        "length": len(messages),
        "last": framework.messages_projection(messages[-1:]),
    }


def _tool_config(operation_id: Any, tool: Any, tool_name: str) -> dict[str, Any] | Literal[False]:
    """A tool's ``safepoint`` metadata: its policy, or ``False`` to run it unjournaled."""
    metadata = getattr(getattr(tool, "tool_def", None), "metadata", None) or {}
    found = metadata.get(TOOL_CONFIG_KEY) if isinstance(metadata, dict) else None
    if found is False:
        return False
    return found if isinstance(found, dict) else {}


def _waiting(error: BaseException) -> ActionWaiting | None:
    """A reconcile hook's ``wait`` however the framework wrapped it (a cause, a task group)."""
    pending: list[BaseException] = [error]
    looked: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in looked:
            continue
        looked.add(id(current))
        if isinstance(current, ActionWaiting):
            return current
        pending.extend(getattr(current, "exceptions", ()))
        pending.extend(linked for linked in (current.__cause__, current.__context__) if linked is not None)
    return None
