"""Shared offline fixtures: a stateless scripted Model, a scripted provider, the agent graph."""
from __future__ import annotations

import json, os
from typing import Any, AsyncIterator

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.usage import Usage
from openai.types.responses import (
    Response, ResponseCompletedEvent, ResponseFunctionToolCall, ResponseOutputMessage,
    ResponseOutputText, ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

set_tracing_disabled(True)
LEDGER = os.environ.get("OAJ_LEDGER", "/tmp/oajournal/ledger.txt")


def ledger(kind: str, what: str) -> None:
    with open(LEDGER, "a") as f:
        f.write(f"{os.getpid()} {kind} {what}\n")
        f.flush(); os.fsync(f.fileno())


def _calls_in(input: Any, prefix: str) -> int:
    if not isinstance(input, list):
        return 0
    n = set()
    for item in input:
        d = item if isinstance(item, dict) else getattr(item, "model_dump", lambda: {})()
        if d.get("type") == "function_call" and str(d.get("call_id", "")).startswith(prefix + "-"):
            n.add(str(d["call_id"]).split("-")[1])
    return len(n)


class ScriptedModel(Model):
    """Stateless: the step it answers = how many of its own steps (call_id prefix) are in the input.
    script: list of steps; a step is a str (final text) or a list of (tool_name, args_dict)."""

    def __init__(self, name: str, script: list[Any]):
        self.name, self.script = name, script

    def _output(self, input: Any) -> list[Any]:
        k = _calls_in(input, self.name)
        step = self.script[k]
        ledger("MODEL", f"{self.name}#{k}")
        if isinstance(step, str):
            return [ResponseOutputMessage(id=f"msg-{self.name}-{k}", type="message", role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=step, annotations=[])])]
        return [ResponseFunctionToolCall(type="function_call", id=f"fc-{self.name}-{k}-{j}",
                call_id=f"{self.name}-{k}-{j}", name=tool, arguments=json.dumps(args))
                for j, (tool, args) in enumerate(step)]

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None) -> ModelResponse:
        out = self._output(input)
        return ModelResponse(output=out, usage=Usage(requests=1, input_tokens=10, output_tokens=5,
                             total_tokens=15), response_id=f"resp-{self.name}-{_calls_in(input, self.name)}")

    async def stream_response(self, system_instructions, input, model_settings, tools, output_schema,
                              handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                              prompt=None) -> AsyncIterator[Any]:
        out = self._output(input)
        resp = Response(id=f"resp-{self.name}-{_calls_in(input, self.name)}", created_at=0, model=self.name,
                        object="response", output=out, tool_choice="auto", tools=[], parallel_tool_calls=True,
                        usage=ResponseUsage(input_tokens=10, output_tokens=5, total_tokens=15,
                            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                            output_tokens_details=OutputTokensDetails(reasoning_tokens=0)))
        yield ResponseCompletedEvent(type="response.completed", response=resp, sequence_number=0)


class ScriptedProvider(ModelProvider):
    def __init__(self, models: dict[str, Model]):
        self.models = models
    def get_model(self, model_name: str | None) -> Model:
        return self.models[model_name or "default"]


@function_tool
def lookup(q: str) -> str:
    """Idempotent lookup."""
    ledger("TOOL", f"lookup({q})")
    return f"found:{q}"


CHARGE_HOOK = {"after_effect": None}  # a callable to crash right after the side effect


@function_tool
def charge(amount: int) -> str:
    """Non-idempotent: charges money (side effect in the ledger file)."""
    ledger("EFFECT", f"charge({amount})")
    if CHARGE_HOOK["after_effect"]:
        CHARGE_HOOK["after_effect"](amount)
    return f"charged:{amount}"


def build_graph():
    """triage (Model instance) -> tools lookup, charge, ask_helper (helper.as_tool, Model instance),
    handoff -> specialist (model NAME 'spec-model', resolved through RunConfig.model_provider)."""
    helper = Agent(name="helper", instructions="help", tools=[lookup],
                   model=ScriptedModel("helper", [[("lookup", {"q": "h"})], "helper done"]))
    specialist = Agent(name="specialist", instructions="spec", tools=[charge], model="spec-model")
    triage = Agent(name="triage", instructions="triage",
                   tools=[lookup, charge, helper.as_tool("ask_helper", "ask the helper")],
                   handoffs=[specialist],
                   model=ScriptedModel("triage", [
                       [("lookup", {"q": "a"}), ("charge", {"amount": 5})],
                       [("ask_helper", {"input": "x"})],
                       [("transfer_to_specialist", {})],
                   ]))
    provider = ScriptedProvider({"spec-model": ScriptedModel("specialist", [[("charge", {"amount": 7})], "final answer"])})
    return triage, provider


def read_ledger(path: str = LEDGER) -> list[str]:
    try:
        return [l.split(" ", 1)[1].strip() for l in open(path)]
    except FileNotFoundError:
        return []
