"""An offline ADK app for the call journal's tests: a scripted model, a ledger outside the DB.

``build()`` gives ADK's real ``LlmAgent`` **triage** with the tools ``lookup``
(idempotent: the ledger's ``once``) and ``charge`` (non-idempotent: the
ledger's ``record``, a repeat is a duplicate) and a sub-agent **specialist**
(tool ``charge``) it transfers to. A turn (the user's ``ask:<n>``) makes 4
model calls: triage asks for ``lookup`` and ``charge`` at once, then transfers;
the specialist looks up and charges at once, then answers — 5 tool calls (the
transfer is one). ADK sends a session's next message to the agent that
answered last: later turns are the specialist's 2 model calls and 2 tools.

``ScriptedModel`` is stateless, like a provider: the step it answers is how
many of its own function-call turns follow the conversation's last ``ask:``
message, so a fresh process asked the same request gives the same answer.
It notes every request it answers in the ledger (``Ledger.model``), keyed by
what it was asked, with the tokens it reports, so a request paid twice shows up. In SSE streaming it
sends a partial chunk before each complete response. ``LEDGER`` is set by
whoever runs the app.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from safepoint import Reconcile
from safepoint.adapters.google_adk import current_call_key, non_idempotent
from safepoint.testing.crash import Ledger

LEDGER: dict[str, Ledger | None] = {"ledger": None}
APP = "shop"


def answer(turn: int) -> str:
    return f"final answer {turn}"


def _asked(request: LlmRequest) -> tuple[int, str, int]:
    """(the turn asked for, its message, how many model function-call turns follow it)."""
    turn, text, after = 0, "", 0
    for content in request.contents:
        parts = content.parts or []
        said = "".join(p.text or "" for p in parts)
        if content.role == "user" and said.startswith("ask:"):
            turn, text, after = int(said.split(":")[1]), said, 0
        elif content.role == "model" and any(p.function_call for p in parts):
            after += 1
    return turn, text, after


class ScriptedModel(BaseLlm):
    """Answers step ``k`` of its script for turn ``n``: a str is the final text, a list of
    (tool, args) the function calls (``{n}`` in an argument is the turn's number)."""

    model: str = "scripted"
    script: list[Any]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn, text, k = _asked(llm_request)
        ledger = LEDGER["ledger"]
        tokens_in, tokens_out = 10 + k, 5
        if ledger is not None:
            ledger.model(f"{self.model}#{k}|{text}", {"tokens_in": tokens_in, "tokens_out": tokens_out})
        step = self.script[k]
        if isinstance(step, str):
            parts = [types.Part(text=step.format(n=turn))]
        else:
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        name=tool, args={key: _for_turn(v, turn) for key, v in args.items()}
                    )
                )
                for tool, args in step
            ]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=tokens_in,
            candidates_token_count=tokens_out,
            total_token_count=tokens_in + tokens_out,
        )
        if stream:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="…")]), partial=True)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=usage,
            finish_reason=types.FinishReason.STOP,
        )


def _for_turn(value: Any, turn: int) -> Any:
    return value * turn if isinstance(value, int) else value.format(n=turn)


async def lookup(q: str) -> str:
    """Look something up (idempotent)."""
    ledger = LEDGER["ledger"]
    if ledger is None:
        return f"found:{q}"
    return ledger.once(f"lookup:{q}", lambda: f"found:{q}")


def reconcile_charge(key: str, name: str, args: Any) -> Reconcile:
    """A charge found in flight after a crash: ask the outside world whether it happened."""
    ledger = LEDGER["ledger"]
    if ledger is not None and ledger.happened(f"charge:{args['amount']}"):
        return Reconcile.skip(f"charged:{args['amount']}")
    return Reconcile.rerun()


async def charge(amount: int) -> str:
    """Charge money (non-idempotent: every call is a payment)."""
    ledger = LEDGER["ledger"]
    if ledger is not None:
        ledger.record(f"charge:{amount}", {"journal_key": current_call_key()})
    return f"charged:{amount}"


CHARGE = non_idempotent(FunctionTool(charge), reconcile=reconcile_charge)


def build() -> LlmAgent:
    """The app's agents (see the module's docstring); fresh objects each call."""
    specialist = LlmAgent(
        name="specialist",
        instruction="spec",
        tools=[lookup, CHARGE],
        model=ScriptedModel(
            model="specialist",
            script=[[("lookup", {"q": "b{n}"}), ("charge", {"amount": 7})], "final answer {n}"],
        ),
    )
    return LlmAgent(
        name="triage",
        instruction="triage",
        tools=[lookup, CHARGE],
        sub_agents=[specialist],
        model=ScriptedModel(
            model="triage",
            script=[
                [("lookup", {"q": "a{n}"}), ("charge", {"amount": 5})],
                [("transfer_to_agent", {"agent_name": "specialist"})],
            ],
        ),
    )
