"""An offline Agents SDK app for the call journal's tests: scripted models, a ledger outside the DB.

The graph (``build()``): **triage** (a ``Model`` instance) has the tools
``lookup`` (idempotent: the ledger's ``once``), ``charge`` (non-idempotent: the
ledger's ``record``, a repeat is a duplicate) and ``ask_helper``
(``helper.as_tool``); it hands off to **specialist**, whose model is the *name*
``"spec-model"`` (resolved by the run's ``model_provider``) and whose tool is
``charge``. **helper** (a ``Model`` instance) has ``lookup``. One turn makes 7
model calls (triage 3, helper 2, specialist 2), 5 function-tool calls (two of
them in parallel) and a handoff.

``ScriptedModel`` is stateless, like a provider: the step it answers is how
many of its own tool-call ids follow the conversation's last user message,
so a fresh process asked the same request gives the same answer. (The tools
are ``async``: the SDK runs a sync tool in a worker thread, and the ledger's
SQLite connection belongs to the thread that opened it.) It notes
every request it answers in the ledger (``Ledger.model``), keyed by what it
was asked, so a request paid twice shows up. ``LEDGER`` is set by whoever
runs the app (a test, or ``child`` in a process the test SIGKILLs).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunConfig, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from safepoint import Reconcile
from safepoint.adapters.openai_agents import current_call_key, non_idempotent
from safepoint.testing.crash import Ledger

set_tracing_disabled(True)
LEDGER: dict[str, Ledger | None] = {"ledger": None}
ANSWER = "final answer: charged 5 and 7"


def _ledger() -> Ledger | None:
    return LEDGER["ledger"]


def _dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    return dump() if dump is not None else {}


def _turn_items(input: Any) -> tuple[str, list[dict[str, Any]]]:
    """What the conversation's last user message asked (its text, after how many user messages)
    and the items after it."""
    if isinstance(input, str):
        return f"1:{input}", []
    items = [_dict(i) for i in input]
    users = [n for n, i in enumerate(items) if i.get("role") == "user"]
    last = users[-1] if users else -1
    text = items[last].get("content") if last >= 0 else ""
    return f"{len(users)}:{text if isinstance(text, str) else json.dumps(text)}", items[last + 1 :]


class ScriptedModel(Model):
    """Answers step ``k`` of ``script``: a str is the final text, a list of (tool, args) tool calls."""

    def __init__(self, name: str, script: list[Any]) -> None:
        self.name, self.script = name, script

    def _step(self, input: Any) -> tuple[int, str]:
        asked, after = _turn_items(input)
        steps = {
            str(i.get("call_id", "")).split("-")[1]
            for i in after
            if i.get("type") == "function_call" and str(i.get("call_id", "")).startswith(self.name + "-")
        }
        return len(steps), asked

    def _output(self, input: Any) -> tuple[int, list[Any]]:
        k, asked = self._step(input)
        ledger = _ledger()
        if ledger is not None:
            paid = {"tokens_in": 10 + k, "tokens_out": 5}  # the usage get_response reports
            ledger.model(f"{self.name}#{k}|{asked}", paid)
        step = self.script[k]
        if isinstance(step, str):
            text = ResponseOutputText(type="output_text", text=step, annotations=[])
            message = ResponseOutputMessage(
                id=f"msg-{self.name}-{k}",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
            return k, [message]
        turn = hashlib.sha256(asked.encode()).hexdigest()[:6]  # ids differ from turn to turn, as a provider's
        calls = [
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc-{self.name}-{k}-{j}-{turn}",
                call_id=f"{self.name}-{k}-{j}-{turn}",
                name=tool,
                # "{users}" in an argument: how many user messages were asked (the helper's
                # question differs from turn to turn, as the provider's ledger keys must).
                arguments=json.dumps(args).replace("{users}", asked.split(":", 1)[0]),
            )
            for j, (tool, args) in enumerate(step)
        ]
        return k, calls

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        k, output = self._output(kwargs.get("input", args[1] if len(args) > 1 else None))
        usage = Usage(requests=1, input_tokens=10 + k, output_tokens=5, total_tokens=15 + k)
        return ModelResponse(output=output, usage=usage, response_id=f"resp-{self.name}-{k}")

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        k, output = self._output(kwargs.get("input", args[1] if len(args) > 1 else None))
        usage = ResponseUsage(
            input_tokens=10 + k,
            output_tokens=5,
            total_tokens=15 + k,
            input_tokens_details=InputTokensDetails.model_validate(
                {"cached_tokens": 0, "cache_write_tokens": 0}
            ),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )
        response = Response(
            id=f"resp-{self.name}-{k}",
            created_at=0,
            model=self.name,
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
            usage=usage,
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


class ScriptedProvider(ModelProvider):
    def __init__(self, models: dict[str, Model]) -> None:
        self.models = models

    def get_model(self, model_name: str | None) -> Model:
        return self.models[model_name or "default"]


@function_tool
async def lookup(q: str) -> str:
    """Look something up (idempotent)."""
    ledger = _ledger()
    if ledger is None:
        return f"found:{q}"
    return ledger.once(f"lookup:{q}", lambda: f"found:{q}")


def payment(amount: int, call_key: str | None) -> str:
    """A charge's ledger key: ``charge:<amount>`` in the session's first turn (and without the
    journal), ``charge:<amount>@t<n>`` in turn n — a conversation pays again every turn, never
    twice in one. The turn is read from the journal's call key (``<session>|t<n>|…``)."""
    found = re.search(r"\|t(\d+)\|", call_key or "")
    turn = int(found[1]) if found else 1
    return f"charge:{amount}" if turn == 1 else f"charge:{amount}@t{turn}"


def reconcile_charge(key: str, name: str, args: Any) -> Reconcile:
    """A charge found in flight after a crash: ask the outside world whether it happened."""
    ledger = _ledger()
    if ledger is not None and ledger.happened(payment(args["amount"], key)):
        return Reconcile.skip(f"charged:{args['amount']}")
    return Reconcile.rerun()


@non_idempotent(reconcile=reconcile_charge)
@function_tool
async def charge(amount: int) -> str:
    """Charge money (non-idempotent: every call is a payment)."""
    ledger = _ledger()
    if ledger is not None:
        key = current_call_key()
        ledger.record(payment(amount, key), {"journal_key": key})
    return f"charged:{amount}"


def build() -> tuple[Agent[Any], RunConfig]:
    """The app's agents and the run config naming its provider (see the module's docstring)."""
    helper = Agent(
        name="helper",
        instructions="help",
        tools=[lookup],
        model=ScriptedModel("helper", [[("lookup", {"q": "h"})], "helper done"]),
    )
    specialist = Agent(name="specialist", instructions="spec", tools=[charge], model="spec-model")
    triage = Agent(
        name="triage",
        instructions="triage",
        tools=[lookup, charge, helper.as_tool("ask_helper", "ask the helper")],
        handoffs=[specialist],
        model=ScriptedModel(
            "triage",
            [
                [("lookup", {"q": "a"}), ("charge", {"amount": 5})],
                [("ask_helper", {"input": "x{users}"})],
                [("transfer_to_specialist", {})],
            ],
        ),
    )
    provider = ScriptedProvider(
        {"spec-model": ScriptedModel("specialist", [[("charge", {"amount": 7})], ANSWER])}
    )
    return triage, RunConfig(model_provider=provider)
