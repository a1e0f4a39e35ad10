"""What the journal reads of Pydantic AI that its public API does not promise: one module.

The journal is built on ``pydantic_ai.durable_exec``'s public surface
(``BaseDurabilityCapability``, ``JournalCallableOperationBackend``, the
operation ids, ``record_durable_unit``, ``replay_scope``). What it needs beyond that
is not promised there, and lives here so a release that moves it changes
this file (and that one override) alone:

- the layout of the ``cache_key`` tuple a backend's ``execute`` receives:
  the projection each operation's ``CacheIdentity`` makes of its parameters
  (``_ModelRequestCacheIdentity``, ``_FunctionCallToolCacheIdentity``,
  ``_DynamicCallToolCacheIdentity``, ``CapabilityCacheIdentity``, ``_CompactMessagesCacheIdentity``);
- ``in_durable_unit`` (an agent run inside a unit: a sub-agent a tool runs);
- the capability's ``_toolset_in_durable_context`` hook, which ``SafepointJournal``
  overrides (as the DBOS engine does) so dynamic and MCP toolsets, resolved
  before the turn opens, still route their calls through the backend;
- which fields of a message change when the same request is made again
  (timestamps, the run's ids, provider-assigned ids): left out of a request's
  digest, so the request a resumed run makes matches the one it recorded.

Checked at pydantic-ai-slim 2.68.0 (the lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    CapabilityOperationId,
    DurabilityEngineSpec,
    JournalCallableOperationBackend,
    ModelCompactMessagesId,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    record_durable_unit,
    replay_scope,
)
from pydantic_ai.durable_exec._operation_backend import in_durable_unit
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage
from pydantic_core import to_jsonable_python

__all__ = [
    "JSON_CODEC",
    "BaseDurabilityCapability",
    "CapabilityOperationId",
    "DurabilityEngineSpec",
    "JournalCallableOperationBackend",
    "ModelCompactMessagesId",
    "ModelRequestId",
    "RoleBasedOperationConfig",
    "ToolCall",
    "ToolsetCallToolId",
    "in_durable_unit",
    "jsonable",
    "messages_projection",
    "model_request",
    "record_durable_unit",
    "replay_scope",
    "run_context_in",
    "tool_call",
    "tool_return",
    "usage_in",
]

# Fields that differ between two makings of the same request: clock, run identity, what a
# provider assigns (ids, details, finish reasons, timing), and the attempts that failed before a response
# (a resumed run that replays the response saw none). A part's own content never is one of them.
_VOLATILE = frozenset(
    {
        "failed_attempts",
        "duration",  # how long the provider took (a response field from pydantic-ai-slim 2.7x)
        "timestamp",
        "run_id",
        "conversation_id",
        "provider_response_id",
        "provider_details",
        "provider_name",
        "provider_url",
        "id",
        "usage",
        "metadata",
        "finish_reason",
        "state",
        "model_name",
    }
)
_USAGE = TypeAdapter(RequestUsage)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the backend sees it: the tool's name, its arguments, its call id."""

    name: str
    args: Any
    call_id: str | None
    metadata: dict[str, Any] | None


def run_context_in(cache_key: Sequence[object]) -> RunContext[Any] | None:
    """The run context an operation's cache key carries (the last one: a tool's own context)."""
    for item in reversed(cache_key):
        if isinstance(item, RunContext):
            return item
    return None


def model_request(cache_key: Sequence[object]) -> tuple[list[Any], Any, Any]:
    """A model request's messages, settings and request parameters:
    ``(model_id, messages, model_settings, model_request_parameters, run_context)``."""
    _, messages, settings, parameters, _ = cache_key
    return list(messages), settings, parameters  # type: ignore[call-overload]


def tool_call(cache_key: Sequence[object]) -> ToolCall:
    """A function, MCP or dynamic tool call: ``(name, tool_args, ctx, tool or tool_def)``."""
    name, args, ctx, tool = cache_key
    tool_def = getattr(tool, "tool_def", tool)
    metadata = getattr(tool_def, "metadata", None)
    call_id = ctx.tool_call_id if isinstance(ctx, RunContext) else None
    return ToolCall(str(name), args, call_id, metadata if isinstance(metadata, dict) else None)


def messages_projection(messages: Sequence[Any]) -> list[Any]:
    """Messages as JSON without what changes when the same request is made again."""
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return [_stable(message) for message in dumped]


def _stable(message: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in message.items() if k not in _VOLATILE and k != "parts"}
    kept["parts"] = [
        {k: v for k, v in part.items() if k not in _VOLATILE} if isinstance(part, dict) else part
        for part in message.get("parts", ())
    ]
    return kept


def jsonable(value: Any) -> Any:
    """``value`` as JSON for a digest; what JSON cannot hold by its type name."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__name__}>")


def tool_return(value: Any) -> dict[str, Any]:
    """A tool's answer in the recorded form of a tool call's result (what a reconcile hook's
    ``skip(result)`` records: the run goes on as if the tool had returned ``value``)."""
    return {"kind": "tool_return", "result": jsonable(value)}


def usage_in(payload: Any) -> RequestUsage | None:
    """The usage a recorded model response reports: a ``ModelResponse``'s JSON, or a streamed
    request's recorded result (``{"response": …}``)."""
    if isinstance(payload, dict):
        if isinstance(payload.get("usage"), dict):
            return _USAGE.validate_python(payload["usage"])
        if isinstance(payload.get("response"), dict):
            return usage_in(payload["response"])
    return None
