"""Chat-shaped messages: OpenAI Agents SDK items (the Responses API) and LangGraph's LangChain dumps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .words import Turn, call, content_parts, items, result, text_of, unknown, value

# -- OpenAI Agents SDK: Responses API items ------------------------------------------------------


def openai_item(item: Any) -> Turn:
    if not isinstance(item, Mapping):
        return Turn("-", (text_of(item),))
    kind = item.get("type")
    if kind == "function_call":
        return Turn("assistant", (call(item.get("name"), item.get("arguments"), item.get("call_id")),))
    if kind in ("function_call_output", "computer_call_output", "custom_tool_call_output"):
        return Turn("tool", (result(item.get("call_id"), _output(item.get("output"))),))
    if kind == "reasoning":
        summary = content_parts(item.get("summary")) + content_parts(item.get("content"))
        return Turn("assistant", ("(thinking) " + (" ".join(summary) or "(hidden)"),))
    if isinstance(kind, str) and kind.endswith("_call") and "role" not in item:  # hosted tools
        return Turn(
            "assistant",
            (call(kind.removesuffix("_call"), item.get("arguments") or item.get("action"), item.get("id")),),
        )
    role = item.get("role")
    if isinstance(role, str) and role:
        return Turn(role, tuple(content_parts(item.get("content"))))
    return Turn("-", (unknown(kind),))


def _output(output: Any) -> Any:
    return " ".join(content_parts(output)) if isinstance(output, list) else output


# -- LangGraph: LangChain message dumps --------------------------------------------------------------

_LANGCHAIN_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}


def langchain_message(message: Any) -> Turn:
    if not isinstance(message, Mapping):
        return Turn("-", (value(message),))
    typed = message.get("$typed")  # a message LangGraph's serializer stored: shown by its kind, never revived
    if isinstance(typed, list) and typed:
        return Turn("-", (unknown(typed[0]),))
    data = message.get("data")
    if isinstance(data, Mapping) and len(message) == 2:  # messages_to_dict's envelope
        message = {**data, "type": message.get("type")}
    kind = message.get("type")
    role = message.get("role") or _LANGCHAIN_ROLES.get(str(kind).removesuffix("MessageChunk").lower())
    if not isinstance(role, str) or not role:  # a message channel of plain JSON: Responses API items too
        return openai_item(message)
    if role == "tool":
        content = " ".join(content_parts(message.get("content")))
        error = message.get("status") == "error"
        return Turn(role, (result(message.get("tool_call_id"), content, message.get("name"), error=error),))
    parts = content_parts(message.get("content"))
    for tool_call in items(message.get("tool_calls")):
        if isinstance(tool_call, Mapping):
            function = tool_call.get("function")
            if isinstance(function, Mapping):  # OpenAI's shape
                parts.append(call(function.get("name"), function.get("arguments"), tool_call.get("id")))
            else:
                parts.append(call(tool_call.get("name"), tool_call.get("args"), tool_call.get("id")))
    for bad in items(message.get("invalid_tool_calls")):
        if isinstance(bad, Mapping):
            parts.append("invalid " + call(bad.get("name"), bad.get("args"), bad.get("id")))
    return Turn(role, tuple(parts))
