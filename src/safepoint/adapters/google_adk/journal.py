"""``CallJournal``: an ADK plugin so a crash repeats no recorded model call and no tool effect.

The one line::

    runner = Runner(agent=agent, app_name="app", session_service=SafepointSessionService(store),
                    plugins=[CallJournal()])

Each ``runner.run_async(user_id=…, session_id=…, new_message=…)`` (or
``runner.run``) is one journaled *turn*: every complete model response and
every tool result of the turn is recorded in the session's run as it
completes. After a crash, the same call — same session, same ``new_message``
— resumes the turn: the session is rolled back to the turn's start, recorded
calls are answered from the journal by the before-callbacks (ADK makes no
call), and only the call in flight at the crash is made again (a model
request is re-sent and counted; a non-idempotent tool goes to its reconcile
hook). See ``turn`` for turns and keys, ``calls`` for the callbacks.

Non-idempotent tools write an intent before they run: mark them
(``non_idempotent(tool, reconcile=…)``) or name them
(``CallJournal(non_idempotent={"charge": hook})``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.tools.base_tool import BaseTool

from safepoint import InvalidArgument, Reconcile
from safepoint.journal import ActionWaiting, ToolPolicy, holding, raised_within

from . import calls
from .framework import BasePlugin, invocation_of
from .service import SafepointSessionService
from .turn import Turn, close_turn, open_turn

Hook = Reconcile | Callable[[str, str, Any], Any] | None
POLICY_ATTRIBUTE = "__safepoint_journal_policy__"
log = logging.getLogger("safepoint.adapters.google_adk")


def current_call_key() -> str | None:
    """The journal key of the tool call running now (an idempotency key for the service the tool
    calls: the same in every process that runs or resumes the call); None outside one."""
    return calls.CALL_KEY.get()


def non_idempotent(tool: Any = None, *, reconcile: Hook = None) -> Any:
    """Mark a tool whose effect must not happen twice: a ``BaseTool`` (``FunctionTool(fn)``) or the
    plain function an agent's ``tools=[…]`` lists (marked in place, returned as it was).

    Its intent is recorded before it runs; found in flight after a crash it goes
    to ``reconcile`` — a ``Reconcile`` (``rerun``, ``skip(result)``, ``wait``) or a
    hook ``(key, tool name, arguments) -> Reconcile``; without one the turn
    stops with ``ActionWaiting``.
    """

    def mark(marked: Any) -> Any:
        if not (isinstance(marked, BaseTool) or callable(marked)):
            raise InvalidArgument("non_idempotent marks a tool or the function an agent lists as one")
        try:
            setattr(marked, POLICY_ATTRIBUTE, ToolPolicy(idempotent=False, reconcile=reconcile))
        except (AttributeError, TypeError, ValueError):
            raise InvalidArgument(
                "non_idempotent cannot mark this tool: name it in CallJournal(non_idempotent=…)"
            ) from None
        return marked

    return mark if tool is None else mark(tool)


def waiting_in(error: BaseException) -> ActionWaiting | None:
    """The ``ActionWaiting`` behind an error a run ended with (ADK wraps what a plugin raises in a
    ``RuntimeError``), or None."""
    return raised_within(error, ActionWaiting)


def _seconds(name: str, value: Any, *, positive: bool) -> float:
    """``value`` as a finite number of seconds (above 0 when ``positive``), else InvalidArgument."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"{name} is a finite number of seconds")
    if value < 0 or (positive and value == 0):
        raise InvalidArgument(f"{name} is a number of seconds above {'0' if positive else 'or at 0'}")
    return float(value)


class CallJournal(BasePlugin):
    """An ADK plugin recording each call of a turn and replaying it when the turn resumes.

    The runner's session service must be a ``SafepointSessionService``: the
    session's run holds the journal. ``non_idempotent``: tools by name, each
    with its reconcile (as ``non_idempotent``). ``spend``: the price of a model
    call from its ``usage_metadata`` (counters count 0 without it). ``hold``:
    the lease a turn holds its session with, renewed every third of it;
    ``wait``: how long a second caller waits for a turn another process is
    running (default: ``hold``). ``resolve_secrets``: as ``store.load``'s, for
    replayed values.

    ``last_turn`` is the latest turn this journal opened: its ``number``,
    ``resumed``, ``rolled_back`` (events the resume took back), the ``models``
    and ``tools`` tallies (``safepoint.journal.Tally``) and ``counters()``,
    which the session's steps also carry.
    """

    def __init__(
        self,
        *,
        non_idempotent: Mapping[str, Hook] | None = None,
        spend: Callable[[Any], float] | None = None,
        hold: float = 30.0,
        wait: float | None = None,
        resolve_secrets: Any = False,
        name: str = "safepoint_call_journal",
    ) -> None:
        super().__init__(name)
        if spend is not None and not callable(spend):
            raise InvalidArgument("spend is a callable: the price of a call from its usage_metadata")
        if non_idempotent is not None and not all(isinstance(tool, str) for tool in non_idempotent):
            raise InvalidArgument("non_idempotent maps tool names (str) to their reconcile hooks")
        hold = _seconds("hold", hold, positive=True)
        wait = None if wait is None else _seconds("wait", wait, positive=False)
        self.policies = {
            tool: ToolPolicy(idempotent=False, reconcile=hook)
            for tool, hook in (non_idempotent or {}).items()
        }
        self.spend, self.resolve_secrets = spend, resolve_secrets
        self.terms = holding.Terms(hold, hold if wait is None else wait)
        self.last_turn: Turn | None = None
        self._turns: dict[str, Turn] = {}  # by invocation id: an agent's sub-contexts share it
        self._failed: set[str] = set()  # model calls seen failing: retried, they are no crash

    # -- the turn: opened before the user's message is saved, ended with the run ---------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: Any
    ) -> Any:
        service = invocation_context.session_service
        if not isinstance(service, SafepointSessionService):
            if calls.CALL_KEY.get() is not None:
                return None  # an agent used as a tool runs on its own in-memory session: a tool call
            raise InvalidArgument(
                "a CallJournal runs on a SafepointSessionService (its sessions hold the journal)"
            )
        session = invocation_context.session
        ids = (session.app_name, session.user_id, session.id)
        run_id = service.run_id_of(*ids)
        request = {"new_message": user_message.model_dump(mode="json", exclude_none=True)}
        opening = open_turn(
            run_id,
            session.id,
            request,
            owner=holding.new_owner(),
            terms=self.terms,
            store=service.store,
            cached=service.cached_head(run_id),
        )
        opened = await holding.serve(service.store, opening)
        turn = Turn(
            store=service.store,
            run_id=run_id,
            ids=ids,
            number=opened.number,
            lease=opened.lease,
            base=opened.base,
            lost_before=opened.lost_before,
            policies=self.policies,
            spend=self.spend,
            resolve_secrets=self.resolve_secrets,
            resumed=opened.resumed,
            rolled_back=opened.rolled_back,
            failed=self._failed,
            lost_pending=opened.lost_pending,
        )
        try:
            await service.hold_for(turn, session, opened.head)
        except BaseException:
            await holding.serve(service.store, holding.release(service.store, turn.lease))
            raise
        turn.beat = holding.Beat(service.store, turn, self.terms, thread=False)
        self._turns[invocation_context.invocation_id] = self.last_turn = turn
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        turn = self._turns.pop(invocation_context.invocation_id, None)
        if turn is not None:
            ended = turn.prefix() + "|"  # an ended turn's calls are never made again: forget them
            self._failed.difference_update([key for key in self._failed if key.startswith(ended)])
            await self._end(invocation_context, turn, close_turn(turn))

    async def on_run_error_callback(self, *, invocation_context: InvocationContext, error: Exception) -> None:
        turn = self._turns.pop(invocation_context.invocation_id, None)
        if turn is not None:  # the turn stays open: the same call resumes it
            await self._end(invocation_context, turn, holding.release(turn.store, turn.lease))

    async def _end(self, invocation_context: InvocationContext, turn: Turn, flow: Any) -> None:
        turn.beat.stop()
        for pending in [*(opened[0] for opened in turn.models_open.values()), *turn.tools_open.values()]:
            pending.abandon()  # a call stopped mid-way (the caller broke off): in flight, unrecorded
        service = invocation_context.session_service
        if isinstance(service, SafepointSessionService):
            service.let_go(turn)  # before the lease goes: another turn may take the session then
        await holding.serve(turn.store, flow)

    # -- the calls ------------------------------------------------------------------------------

    def _turn(self, context: Any) -> tuple[Turn | None, tuple[str, str]]:
        invocation = invocation_of(context)
        turn = self._turns.get(invocation.invocation_id)
        return turn, (invocation.branch or "", context.agent_name)

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
        turn, slot = self._turn(callback_context)
        return None if turn is None else await calls.before_model(turn, slot, llm_request)

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> Any:
        turn, slot = self._turn(callback_context)
        return None if turn is None else await calls.after_model(turn, slot, llm_response)

    async def on_model_error_callback(
        self, *, callback_context: Any, llm_request: Any, error: Exception
    ) -> Any:
        turn, slot = self._turn(callback_context)
        if turn is not None:
            await calls.model_failed(turn, slot, error)
        return None

    async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any) -> Any:
        turn, slot = self._turn(tool_context)
        call_id = tool_context.function_call_id
        if turn is None or not call_id:
            return None
        policy = getattr(tool, POLICY_ATTRIBUTE, None) or getattr(
            getattr(tool, "func", None), POLICY_ATTRIBUTE, None
        )
        return await calls.before_tool(
            turn, slot, tool.name, tool_args, call_id=call_id, policy=policy, actions=tool_context.actions
        )

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: Any
    ) -> Any:
        turn, _ = self._turn(tool_context)
        call_id = tool_context.function_call_id
        return (
            None
            if turn is None or not call_id
            else await calls.after_tool(turn, call_id, result, tool_context.actions)
        )

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, error: Exception
    ) -> Any:
        turn, _ = self._turn(tool_context)
        call_id = tool_context.function_call_id
        if turn is not None and call_id:
            await calls.tool_failed(turn, call_id, error)
        return None
