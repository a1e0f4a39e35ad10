"""What the journal records for ADK, in ADK's own JSON: responses, tool results, requests, usage.

- A model response is an ``LlmResponse`` as ``model_dump(mode="json",
  exclude_none=True)`` and comes back through ``LlmResponse.model_validate``:
  pydantic's JSON form of ADK's own object, never a pickle.
- A tool call is its result, kept as it is when it is JSON data that reads
  back equal, with the ``EventActions`` it set (``transfer_to_agent``, a
  ``state_delta``, ``escalate`` …: a replay sets them again, or a replayed
  transfer would not transfer); anything else is handed to ADK but not
  recorded (``NOT_RECORDABLE``).
- A request's digest (SHA-256 of its JSON) covers what the model is asked — the model name, the
  contents, the config (instructions, tools, generation settings) — and none
  of the bookkeeping ADK adds or changes between two runs of the same call
  (cache metadata, token estimates, live settings).
- Usage is ADK's ``usage_metadata``: prompt tokens in; candidate and thought
  tokens out; spend only from the user's ``spend(usage_metadata)``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from pydantic_core import PydanticSerializationError

from safepoint.journal import NOT_RECORDABLE
from safepoint.records import CallUsage

from .framework import CLIENT_ID_PREFIX

_NOT_ASKED = {"cache_metadata", "cacheable_contents_token_count", "live_connect_config", "cache_config"}
_IDS = uuid.UUID("5f0e6c1e-8a52-4c55-9a57-0d4c1f6a4b11")  # the namespace of the journal's call ids


def request_form(request: LlmRequest) -> Any:
    """What a model call's digest is taken over: the SHA-256 of its JSON (its type's name when
    not JSON).

    A request carries the whole conversation so far; the store digests what it is given at each
    of the call's three journal requests (read, intent, record), so it is given this one digest
    instead — the same test of "the same request", taken once.
    """
    try:  # pydantic's own JSON, in field order: the same request gives the same text
        text = request.model_dump_json(exclude_none=True, exclude=_NOT_ASKED)
    except PydanticSerializationError:  # e.g. a lone surrogate: through Python's JSON
        try:
            dumped = request.model_dump(mode="json", exclude_none=True, exclude=_NOT_ASKED)
        except PydanticSerializationError:
            return {"unserializable": type(request).__name__}
        text = json.dumps(dumped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()}


def encode_response(response: LlmResponse) -> Any:
    try:
        return response.model_dump(mode="json", exclude_none=True)
    except PydanticSerializationError:
        return NOT_RECORDABLE


def decode_response(data: Any) -> LlmResponse:
    return LlmResponse.model_validate(data)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call as ADK saw it: its result, and what it did to the event's actions (a transfer,
    a state change, an escalation…), which a replay must do again."""

    result: Any
    actions: dict[str, Any]


def exact_json(value: Any) -> Any:
    """``value`` when JSON holds it exactly, else ``NOT_RECORDABLE``."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return NOT_RECORDABLE
    back = json.loads(text)
    return back if back == value and type(back) is type(value) else NOT_RECORDABLE


def actions_json(actions: Any) -> dict[str, Any]:
    """The actions a tool call set (ADK's ``EventActions``, only what differs from its defaults)."""
    if actions is None:
        return {}
    try:
        dumped: dict[str, Any] = actions.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    except PydanticSerializationError:
        return {"unserializable": True}
    return dumped


def encode_tool_outcome(outcome: ToolOutcome) -> Any:
    """``{"result", "actions"}`` when JSON holds both (else ``NOT_RECORDABLE``: run again on resume)."""
    result = exact_json(outcome.result)
    if result is NOT_RECORDABLE or "unserializable" in outcome.actions:
        return NOT_RECORDABLE
    return {"result": result, "actions": outcome.actions}


def decode_tool_outcome(data: Any) -> ToolOutcome:
    return ToolOutcome(data["result"], dict(data["actions"]))


def replay_actions(recorded: dict[str, Any], actions: Any) -> None:
    """Do again to ``actions`` (the call's ``EventActions``) what the recorded call did."""
    if not recorded:
        return
    parsed = type(actions).model_validate(recorded)
    for name in recorded:
        value = getattr(parsed, name)
        mine = getattr(actions, name)
        if isinstance(mine, dict) and isinstance(value, dict):
            mine.update(value)  # state and artifact deltas: merged, as ADK merges them
        else:
            setattr(actions, name, value)


def call_usage(response: Any, spend: Callable[[Any], float] | None) -> CallUsage | None:
    """A response's reported usage (None when it reports none)."""
    usage = getattr(response, "usage_metadata", None)
    if usage is None:
        return None
    tokens_in = usage.prompt_token_count or 0
    tokens_out = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return CallUsage(tokens_in=tokens_in, tokens_out=tokens_out, spend=float(spend(usage)) if spend else 0.0)


def name_calls(response: LlmResponse, key: str) -> None:
    """Give each function call the model left without an id one made from the model call's key
    and its place in the response: ADK would make up a random one, new on every resume, and the
    tool's journal key is its call id."""
    content = response.content
    for i, part in enumerate(content.parts or [] if content is not None else []):
        call = part.function_call
        if call is not None and not call.id:
            call.id = f"{CLIENT_ID_PREFIX}{uuid.uuid5(_IDS, f'{key}#{i}')}"
