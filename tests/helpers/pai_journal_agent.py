"""An offline Pydantic AI shop for the journal's tests: a scripted model, a ledger outside the DB.

``build(journal)`` gives a real ``Agent`` (named ``shop``) on a
``FunctionModel`` with a ``FunctionToolset`` (id ``shop``): ``lookup``
(idempotent: the ledger's ``once``) and ``charge`` (non-idempotent, marked with
``non_idempotent``: the ledger's ``record``, a repeat is a duplicate; its
reconcile hook asks the ledger whether the payment went through). Turn ``t``
(the prompt ``order <t>``) makes 3 model requests and 3 tool calls:
``lookup`` and ``charge(10t+1)`` in parallel, then ``charge(10t+2)``, then the
answer ``turn t: charged 10t+1 and 10t+2`` — streamed as well (``stream_script``).

``script`` is stateless, like a provider: its step is how many requests
follow the conversation's last user prompt, so a fresh process asked the same
request gives the same answer, with the same tool-call ids. It notes every
request it answers in the ledger (it and the tools are ``async``: a sync one
would run in a worker thread, and the ledger's SQLite connection belongs to
the thread that opened it) (``Ledger.model``, keyed by turn and step,
with the usage it reports), so a request paid twice shows up, and what it
cost. ``LEDGER`` is set by whoever runs the shop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

from safepoint import Reconcile
from safepoint.adapters.pydantic_ai import SafepointJournal, non_idempotent
from safepoint.testing.crash import Ledger

LEDGER: dict[str, Ledger | None] = {"ledger": None}
ANSWER_TIME = 0.005  # seconds between a request being paid and its answer
ON_REQUEST: list[Callable[[int, int], None]] = []  # called with (turn, step) as each request is paid


def answer(turn: int) -> str:
    return f"turn {turn}: charged {10 * turn + 1} and {10 * turn + 2}"


def _ledger() -> Ledger:
    ledger = LEDGER["ledger"]
    assert ledger is not None, "set helpers.pai_journal_agent.LEDGER first"
    return ledger


def _where(messages: list[ModelMessage]) -> tuple[int, int]:
    """The turn the last user prompt asks for, and how many requests followed it (the step)."""
    prompts = [
        (n, part.content)
        for n, message in enumerate(messages)
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
    at, prompt = prompts[-1]
    step = sum(isinstance(m, ModelRequest) for m in messages[at + 1 :])
    return int(str(prompt).split()[-1]), step


async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    del info
    turn, step = _where(messages)
    usage = RequestUsage(input_tokens=10 + 3 * turn + step, output_tokens=4 + step)
    _ledger().model(f"t{turn}:s{step}", {"tokens_in": usage.input_tokens, "tokens_out": usage.output_tokens})
    for seen in ON_REQUEST:  # a test looking at the store while a request is being answered
        seen(turn, step)
    # A provider takes a moment to answer a paid request: a kill at a random instant can land here.
    await asyncio.sleep(ANSWER_TIME)
    if step == 0:
        parts: list[Any] = [
            ToolCallPart("lookup", {"item": f"item-{turn}"}, tool_call_id=f"t{turn}-lookup"),
            ToolCallPart("charge", {"amount": 10 * turn + 1}, tool_call_id=f"t{turn}-charge-1"),
        ]
    elif step == 1:
        parts = [ToolCallPart("charge", {"amount": 10 * turn + 2}, tool_call_id=f"t{turn}-charge-2")]
    else:
        parts = [TextPart(answer(turn))]
    return ModelResponse(parts=parts, usage=usage, model_name="scripted")


CUT_STREAM: dict[str, bool] = {"next": False}  # the next streamed text answer fails midway


async def stream_script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """``script``'s answers, streamed: each tool call as one delta, a text in two chunks. With
    ``CUT_STREAM["next"]`` the next text answer breaks after its first chunk (a dropped
    connection), once."""
    response = await script(messages, info)
    for n, part in enumerate(response.parts):
        if isinstance(part, ToolCallPart):
            yield {n: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}
        elif isinstance(part, TextPart):
            half = len(part.content) // 2
            yield part.content[:half]
            if CUT_STREAM["next"]:
                CUT_STREAM["next"] = False
                raise ConnectionError("the stream broke")
            yield part.content[half:]


def charge_outcome(key: str, tool: str, args: Any) -> Reconcile:
    """Asked only for a charge a crash cut mid-call: did the payment go through?"""
    del key, tool
    amount = args["amount"]
    return (
        Reconcile.skip(f"charged {amount}") if _ledger().happened(f"charge:{amount}") else Reconcile.rerun()
    )


def toolset() -> FunctionToolset[Any]:
    tools: FunctionToolset[Any] = FunctionToolset(id="shop")

    @tools.tool_plain
    async def lookup(item: str) -> str:
        return str(_ledger().once(f"lookup:{item}", lambda: f"{item} in stock"))

    @tools.tool_plain(metadata=non_idempotent(reconcile=charge_outcome))
    async def charge(amount: int) -> str:
        _ledger().record(f"charge:{amount}", amount)
        return f"charged {amount}"

    return tools


def build(
    journal: SafepointJournal[Any] | None, *, toolsets: Any = None, capabilities: Any = ()
) -> Agent[None, str]:
    """The shop's agent (``toolsets``: in place of the shop's own; ``capabilities``: more, before
    the journal). It streams too (``run_stream``, ``iter``): ``stream_script``."""
    model = FunctionModel(script, stream_function=stream_script)
    journaled = [*capabilities, journal] if journal is not None else list(capabilities)
    return Agent(model, name="shop", toolsets=toolsets or [toolset()], capabilities=journaled)
