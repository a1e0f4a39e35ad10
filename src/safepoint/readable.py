"""Stored checkpoints in words people read — shared by the CLI and the inspector.

:func:`describe` makes one stored message one table row (who spoke, and
what: tool calls and tool results included), :func:`pending` a pending
action one line, :func:`question` what a waiting run asks, and
:func:`checkpoint_diff` what changed between two checkpoints, :func:`number` a counter
as a number people read.

Agents store their conversation in whatever shape their framework uses, and
much of it is not ``{"role": …, "content": "text"}``: an assistant turn that
only calls tools has no text, a tool's answer is a separate item, and some
frameworks wrap each message in an envelope. :func:`describe` knows the
shapes users store:

* OpenAI Chat Completions: ``tool_calls`` (and the legacy ``function_call``)
  on assistant messages, ``role: "tool"`` results with ``tool_call_id``,
  content as a string or a list of parts;
* OpenAI Responses API and the Agents SDK: items without a role —
  ``function_call``, ``function_call_output``, ``message`` with
  ``output_text`` parts, ``reasoning``, and the hosted tools' ``*_call`` items;
* Anthropic Messages: content blocks ``text``, ``tool_use``, ``tool_result``
  (``is_error`` too), ``thinking``;
* LangChain message dicts: ``{"type": "ai", "data": {…}}`` (``messages_to_dict``)
  and flat dumps (``{"type": "ai", "content": …, "tool_calls": [...]}``).

Anything else is shown as its JSON, never as ``null`` or ``?``. The result
is plain text made of stored values: the CLI passes it through
``output.cell``/``shown``, which make control characters visible, and the
inspector's templates escape it.
Nothing here is interpreted beyond picking fields: a value shaped like a
tool call is only ever shown.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from safepoint.messagelist import thaw
from safepoint.model import VALUE_FIELDS, Checkpoint
from safepoint.visible import visible

__all__ = ["checkpoint_diff", "describe", "pending", "question"]

# LangChain's message types, and the role each one is.
_LANGCHAIN_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
    "chat": "chat",
    "AIMessageChunk": "assistant",
    "HumanMessageChunk": "user",
}
# How many characters of one part are looked at: a megabyte tool output is cut
# by the caller anyway, and nothing should cost more than what is shown.
_PART = 2_000


def describe(message: Any) -> tuple[str, str]:
    """``(role, text)`` for one stored message: its words, then its tool calls or its tool result."""
    if not isinstance(message, Mapping):
        return "-", _json(message)
    message = _unwrapped(message)
    kind = message.get("type")
    if kind == "function_call":  # Responses API / Agents SDK
        return "tool call", _call(message.get("name"), message.get("arguments"), message.get("call_id"))
    if kind == "function_call_output":
        return "tool result", _result(message.get("call_id"), message.get("output"))
    if kind == "reasoning":
        return "reasoning", _parts(message.get("summary")) or _json(message)
    if isinstance(kind, str) and kind.endswith("_call") and "role" not in message:
        return kind.replace("_", " "), _json(_without(message, "type"))
    role = _role(message)
    pieces = []
    text = _parts(message.get("content"))
    if text:
        pieces.append(text)
    for call in _list(message.get("tool_calls")):
        pieces.append(_tool_call(call))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        pieces.append(_call(legacy.get("name"), legacy.get("arguments"), None))
    if role == "tool":
        return role, _result(message.get("tool_call_id"), message.get("content"))
    if not pieces:
        rest = {k: v for k, v in message.items() if k not in ("role", "type") and v is not None}
        return role, _json(rest) if rest else "(no content)"
    return role, " · ".join(pieces)


def _unwrapped(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """LangChain's ``messages_to_dict`` envelope ``{"type": "ai", "data": {...}}``, opened."""
    data = message.get("data")
    if isinstance(data, Mapping) and message.get("type") in _LANGCHAIN_ROLES and len(message) == 2:
        return {**data, "type": message["type"]}
    return message


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    if isinstance(role, str) and role:
        return role
    kind = message.get("type")
    if isinstance(kind, str) and kind:
        return _LANGCHAIN_ROLES.get(kind, kind)
    return "-"


def _parts(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts/blocks (tool blocks included)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return _json(content)
    shown = []
    for part in content[:50]:
        if isinstance(part, str):
            shown.append(part)
            continue
        if not isinstance(part, Mapping):
            shown.append(_json(part))
            continue
        kind = part.get("type")
        if kind == "tool_use":  # Anthropic
            shown.append(_call(part.get("name"), part.get("input"), part.get("id")))
        elif kind == "tool_result":
            result = _result(part.get("tool_use_id"), part.get("content"))
            shown.append(("error " if part.get("is_error") else "") + result)
        elif kind in ("function_call", "function_call_output"):
            shown.append(describe(part)[1])
        elif isinstance(part.get("text"), str):  # text, input_text, output_text, summary_text
            shown.append(part["text"][:_PART])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            shown.append("(thinking) " + part["thinking"][:_PART])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            shown.append("(refusal) " + part["refusal"][:_PART])
        else:
            shown.append(_json(part))
    if len(content) > 50:
        shown.append(f"… {len(content) - 50} more parts")
    return " · ".join(piece for piece in shown if piece)


def _tool_call(call: Any) -> str:
    """A ``tool_calls`` entry: OpenAI's ``{"function": {name, arguments}}``, LangChain's ``{name, args}``."""
    if not isinstance(call, Mapping):
        return "call " + _json(call)
    function = call.get("function")
    if isinstance(function, Mapping):
        return _call(function.get("name"), function.get("arguments"), call.get("id"))
    return _call(call.get("name"), call.get("args", call.get("arguments")), call.get("id"))


def _call(name: Any, arguments: Any, call_id: Any) -> str:
    # OpenAI sends arguments as a JSON string: shown as the text it is, not quoted again.
    args = arguments[:_PART] if isinstance(arguments, str) else _json(arguments)
    tag = f" [{_text(call_id)}]" if call_id not in (None, "") else ""
    return f"call {_text(name)}({args}){tag}"


def _result(call_id: Any, output: Any) -> str:
    tag = f"[{_text(call_id)}] " if call_id not in (None, "") else ""
    return f"result {tag}{_parts(output) or ('(empty)' if output in (None, '') else _json(output))}"


def _list(value: Any) -> list[Any]:
    return value[:50] if isinstance(value, list) else []


def _without(message: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in keys}


def _text(value: Any) -> str:
    return value[:_PART] if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    # The separators every other JSON shown uses (state, cursors, a pending action).
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text[: _PART * 2]


def pending(action: Any) -> str:
    """A checkpoint's pending action in one line: a harness action or human input, else its JSON.

    The harness's stored shapes (``safepoint.harness.actions``): ``{"kind":
    "action", "tool", "args", "key", …}`` and ``{"kind": "input", "question",
    "answer"?}``; anything else an application stored there shows as JSON.
    """
    if action is None:
        return "-"
    if not isinstance(action, Mapping):
        return _json(action)
    kind = action.get("kind")
    if kind == "action":
        text = _call(action.get("tool"), action.get("args"), None).replace("call ", "action ", 1)
        resolution = action.get("resolution")
        if isinstance(resolution, Mapping):
            return f"{text} · decided: {_text(resolution.get('decision'))}"
        if "question" in action:
            return f"{text} · waits: {_text(action.get('question'))}"
        return f"{text} · in flight"
    if kind == "input":
        asked = f"input · asks: {_text(action.get('question'))}"
        return f"{asked} · answer: {_json(action['answer'])}" if "answer" in action else asked
    return _json(action)


def question(action: Any) -> str | None:
    """What a waiting run asks: its pending action's question, while it has no answer (else None)."""
    if not isinstance(action, Mapping) or "answer" in action or "resolution" in action:
        return None
    asked = action.get("question")
    if asked is None:
        return None
    return asked if isinstance(asked, str) else _json(asked)


def checkpoint_diff(a: Checkpoint, b: Checkpoint) -> dict[str, Any]:
    """The differences between two checkpoints: messages shared/removed/added, changed fields by path."""
    old, new = list(a.messages), list(b.messages)
    shared = 0
    while shared < min(len(old), len(new)) and old[shared] == new[shared]:
        shared += 1
    changes: list[dict[str, Any]] = []
    left, right = a.to_dict(), b.to_dict()
    for name in ("status", "schema_version", "counters", *VALUE_FIELDS, "labels"):
        _field_changes(name, left[name], right[name], changes)
    return {
        "run_id": b.run_id,
        "from_step": a.step,
        "to_step": b.step,
        "messages": {"shared": shared, "removed": len(old) - shared, "added": thaw(new[shared:])},
        "fields": changes,
    }


def _field_changes(path: str, before: Any, after: Any, out: list[dict[str, Any]]) -> None:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            _field_changes(f"{path}.{key}", before.get(key), after.get(key), out)
        return
    out.append({"path": path, "before": before, "after": after})


def number(value: Any) -> str:
    """A counter as people read it: ``12,345``; ``960`` for ``960.0``; ``0.42``, ``1,234.57``, ``0.0031``.

    Anything but an int or a float (a counter an application stored as text)
    shows as its stored value, control characters made visible.
    """
    if type(value) is int:
        return f"{value:,}"
    if type(value) is not float:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return visible(text)
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:.2g}"
