"""What the journal records of the Agents SDK's calls, as JSON, and how it is read back.

Never pickle: a value is recorded only in a JSON form the SDK's own types
give and take back.

* A model response: its output items as ``model_dump(mode="json",
  exclude_unset=True)`` — without ``exclude_unset`` a replayed item carries
  explicit ``None`` fields, the SDK turns it back into input with
  ``exclude_unset`` too, and the next request's digest would change — its
  usage through ``agents.usage.serialize_usage``, and its ids. The same form
  for a response that arrived whole (``get_response``) or streamed (the
  terminal ``response.completed`` event), so either path replays the other's.
* A tool result: a plain JSON value as it is, the SDK's structured outputs
  (text, image, file) as their dump; anything else is not recorded
  (``NOT_RECORDABLE``: used, counted in the tally, never pickled).
* A request, for its digest only: the instructions, the input items dumped
  the same way, and the names of the tools, handoffs and output type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from agents.items import ModelResponse
from agents.usage import Usage, deserialize_usage, serialize_usage
from openai.types.responses import Response, ResponseOutputItem, ResponseUsage
from pydantic import BaseModel, TypeAdapter

from safepoint.journal import NOT_RECORDABLE, CallUsage

from .sdk import TOOL_OUTPUT

OUTPUT_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
_SCALARS = (str, int, float, bool, type(None))


def plain(value: Any) -> bool:
    """Whether ``value`` is JSON as it stands (so it comes back as the same Python value)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, _SCALARS):
        return True
    if type(value) is list:
        return all(plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and plain(v) for k, v in value.items())
    return False


def dumped(value: Any) -> Any:
    """``value`` as JSON for a request digest: models dumped as the SDK dumps input items."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {str(k): dumped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [dumped(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, _SCALARS):
        return value
    return repr(value)  # an odd value changes the digest at worst: called again, never replayed wrongly


# -- model responses ---------------------------------------------------------------------------


def response_json(output: list[Any], usage: Usage, response_id: str | None, request_id: str | None) -> Any:
    """The recorded form of one model response (``NOT_RECORDABLE`` if an item is not a model)."""
    if not all(isinstance(item, BaseModel) for item in output):
        return NOT_RECORDABLE
    form = {
        "output": [item.model_dump(mode="json", exclude_unset=True) for item in output],
        "usage": serialize_usage(usage),
        "response_id": response_id,
        "request_id": request_id,
    }
    return form if plain(form) else NOT_RECORDABLE


def encode_response(response: ModelResponse) -> Any:
    return response_json(list(response.output), response.usage, response.response_id, response.request_id)


def decode_response(form: Any) -> ModelResponse:
    return ModelResponse(
        output=[OUTPUT_ITEM.validate_python(item) for item in form["output"]],
        usage=deserialize_usage(form["usage"]),
        response_id=form.get("response_id"),
        request_id=form.get("request_id"),
    )


def streamed_usage(response: Response) -> Usage:
    """A streamed response's usage as the SDK counts it (one request)."""
    u = response.usage
    if u is None:
        return Usage(requests=1)
    return Usage(
        requests=1,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        input_tokens_details=u.input_tokens_details,
        output_tokens_details=u.output_tokens_details,
    )


def replayed_stream_response(form: Any) -> Response:
    """A recorded response as the terminal event of a stream: the SDK builds the turn's
    ``ModelResponse`` from this event alone."""
    usage = deserialize_usage(form["usage"])
    return Response(
        id=form.get("response_id") or "",
        created_at=0,
        model="",
        object="response",
        output=[OUTPUT_ITEM.validate_python(item) for item in form["output"]],
        tool_choice="auto",
        tools=[],
        parallel_tool_calls=True,
        usage=ResponseUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            input_tokens_details=usage.input_tokens_details,
            output_tokens_details=usage.output_tokens_details,
        ),
    )


def call_usage(usage: Usage, spend: Callable[[Usage], float] | None) -> CallUsage:
    """What one model call cost, as the journal stores it with the call's entry."""
    return CallUsage(
        tokens_in=int(usage.input_tokens or 0),
        tokens_out=int(usage.output_tokens or 0),
        spend=float(spend(usage)) if spend is not None else 0.0,
    )


# -- tool results ---------------------------------------------------------------------------


def encode_tool_result(value: Any) -> Any:
    if plain(value):
        return {"form": "value", "value": value}
    if isinstance(value, BaseModel) and _tool_output(value):
        return {"form": "tool_output", "tool_output": value.model_dump(mode="json")}
    if type(value) is list and value and all(isinstance(v, BaseModel) and _tool_output(v) for v in value):
        return {"form": "tool_outputs", "tool_outputs": [v.model_dump(mode="json") for v in value]}
    return NOT_RECORDABLE


def decode_tool_result(form: Any) -> Any:
    """A recorded tool result back; a value recorded as it was — a reconcile hook's ``skip``
    result, which the journal's flow records as the hook gave it — comes back as it is."""
    kind = form.get("form") if isinstance(form, dict) and len(form) == 2 else None
    if kind == "value" and "value" in form:
        return form["value"]
    if kind == "tool_output" and "tool_output" in form:
        return TOOL_OUTPUT.validate_python(form["tool_output"])
    if kind == "tool_outputs" and "tool_outputs" in form:
        return [TOOL_OUTPUT.validate_python(v) for v in form["tool_outputs"]]
    return form


def _tool_output(value: BaseModel) -> bool:
    try:
        return type(TOOL_OUTPUT.validate_python(value.model_dump(mode="json"))) is type(value)
    except ValueError:
        return False


# -- requests ---------------------------------------------------------------------------------


def model_request(  # noqa: PLR0917 - the SDK's own parameters, in its order
    instructions: str | None,
    input: Any,
    tools: list[Any],
    handoffs: list[Any],
    output_schema: Any,
    previous_response_id: str | None,
    conversation_id: str | None,
) -> Any:
    """What a model call asks, for its digest: a changed request is never replayed."""
    return {
        "instructions": instructions,
        "input": dumped(input),
        "tools": sorted(str(getattr(t, "name", type(t).__name__)) for t in tools),
        "handoffs": sorted(str(getattr(h, "tool_name", h)) for h in handoffs),
        "output": None if output_schema is None else str(output_schema.name()),
        "previous_response_id": previous_response_id,
        "conversation_id": conversation_id,
    }
