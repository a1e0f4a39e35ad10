"""Part-shaped messages: Pydantic AI entries, Google ADK events, the Agent Framework's journal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .words import Part, Turn, blob, call, items, result, tag, text_of, unknown, value

# -- Pydantic AI: conversation entries ---------------------------------------------------------------


def pydantic_ai_entry(entry: Any) -> Turn:
    message = entry.get("message") if isinstance(entry, Mapping) else None
    if not isinstance(message, Mapping):
        return Turn("-", (unknown(entry.get("kind") if isinstance(entry, Mapping) else None),))
    kind = message.get("kind")
    parts = [_pydantic_part(part) for part in items(message.get("parts"))]
    if kind == "response":
        return Turn("assistant", tuple(parts))
    if kind != "request":
        return Turn("-", (unknown(kind),))
    kinds = {part.get("part_kind") for part in items(message.get("parts")) if isinstance(part, Mapping)}
    role = "tool" if kinds and kinds <= {"tool-return", "retry-prompt", "builtin-tool-return"} else "user"
    if isinstance(message.get("instructions"), str) and message["instructions"]:
        parts.insert(0, "(instructions) " + text_of(message["instructions"]))
    return Turn(role, tuple(parts))


def _pydantic_part(part: Any) -> str:
    if not isinstance(part, Mapping):
        return unknown(None)
    kind = part.get("part_kind")
    if kind in ("text", "user-prompt"):
        return " · ".join(_pydantic_content(part.get("content")))
    if kind == "system-prompt":
        return "(system) " + text_of(part.get("content"))
    if kind == "thinking":
        return "(thinking) " + text_of(part.get("content") or "…")
    if kind in ("tool-call", "builtin-tool-call"):
        return call(part.get("tool_name"), part.get("args"), part.get("tool_call_id"))
    if kind in ("tool-return", "builtin-tool-return"):
        failed = part.get("outcome") not in (None, "success")
        content = " · ".join(_pydantic_content(part.get("content")))
        shown = result(part.get("tool_call_id"), content, part.get("tool_name"), error=failed)
        if not failed:
            return shown
        outcome = f" ({text_of(part['outcome'])})"
        return Part.of(
            shown + outcome, "result", shown.name, shown.detail + outcome, shown.call_id, error=True
        )
    if kind in ("instruction", "instruction-delta", "instruction-baseline"):
        return "(instructions) " + text_of(part.get("content", part.get("instructions")))
    if kind == "retry-feedback":
        return "retry: " + " · ".join(_pydantic_content(part.get("content")))
    if kind == "retry-prompt":
        return (
            "retry"
            + tag(part.get("tool_call_id"))
            + ": "
            + " · ".join(_pydantic_content(part.get("content")))
        )
    if kind == "file":
        return " · ".join(_pydantic_content([part.get("content")]))
    return unknown(kind)


def _pydantic_content(content: Any) -> list[str]:
    """A prompt's or a tool return's content: text, or items (``binary``, ``image-url`` …, by ``kind``)."""
    shown = []
    for item in items(content) if isinstance(content, list) else [content]:
        if isinstance(item, Mapping) and isinstance(item.get("kind"), str):
            kind = item["kind"]
            if kind == "binary":
                shown.append(blob("file", item.get("media_type"), None, item.get("data")))
            elif kind.endswith("-url"):
                shown.append(blob(kind.removesuffix("-url"), item.get("media_type"), item.get("url")))
            elif kind == "text-content":
                shown.append(text_of(item.get("content")))
            else:
                shown.append(unknown(kind))
        else:
            shown.append(value(item) if item not in (None, "") else "(empty)")
    return shown


# -- Google ADK: session events --------------------------------------------------------------------


def adk_event(event: Any) -> Turn:
    """An event: its content's parts, by the author who wrote it (a tool's answers as ``tool``)."""
    if not isinstance(event, Mapping):
        return Turn("-", (unknown(None),))
    content = event.get("content")
    author = event.get("author")
    found = items(content.get("parts")) if isinstance(content, Mapping) else []
    parts = [_adk_part(part) for part in found]
    if isinstance(event.get("error_code"), str) or isinstance(event.get("error_message"), str):
        parts.append(
            f"error {text_of(event.get('error_code') or '')}: {text_of(event.get('error_message') or '')}"
        )
    role = content.get("role") if isinstance(content, Mapping) else None
    if found and all(isinstance(p, Mapping) and "function_response" in p for p in found):
        role = "tool"
    elif role == "model":
        role = "assistant"
    role = role if isinstance(role, str) and role else "-"
    if isinstance(author, str) and author and author != "user" and role != "-":
        role = f"{role} ({author[:100]})"
    return Turn(role, tuple(parts))


def _adk_part(part: Any) -> str:
    """One ``google.genai`` Part: the one field it carries (``thought`` marks text as thinking)."""
    if not isinstance(part, Mapping):
        return unknown(None)
    if isinstance(part.get("text"), str):
        return ("(thinking) " if part.get("thought") else "") + text_of(part["text"])
    fields = {key: data for key, data in part.items() if isinstance(data, Mapping)}
    if "function_call" in fields:
        found = fields["function_call"]
        return call(found.get("name"), found.get("args"), found.get("id"))
    if "function_response" in fields:
        found = fields["function_response"]
        return result(found.get("id"), found.get("response"), found.get("name"))
    if "inline_data" in fields:
        found = fields["inline_data"]
        return blob(
            text_of(found.get("display_name") or "blob"), found.get("mime_type"), None, found.get("data")
        )
    if "file_data" in fields:
        found = fields["file_data"]
        return blob("file", found.get("mime_type"), found.get("file_uri"))
    if "executable_code" in fields:
        return "(code) " + text_of(fields["executable_code"].get("code"))
    if "code_execution_result" in fields:
        found = fields["code_execution_result"]
        return (
            f"code result {text_of(found.get('outcome') or '')}: {text_of(found.get('output') or '(empty)')}"
        )
    return unknown(next(iter(fields), None) or "part")


# -- Microsoft Agent Framework: the workflow run's journal -------------------------------------


def agent_framework_item(entry: Any) -> Turn:
    """A journal entry: a list item stored incrementally (a chat ``Message`` above all), a save, a delete."""
    if not isinstance(entry, Mapping):
        return Turn("-", (unknown(None),))
    op = entry.get("op")
    if op == "save":
        return Turn(
            "checkpoint", (f"saved {text_of(entry.get('id') or '')} at step {text_of(entry.get('step'))}",)
        )
    if op == "delete":
        return Turn("checkpoint", (f"deleted {text_of(entry.get('id'))}",))
    if op != "item":
        return Turn("-", (unknown(op),))
    item = entry.get("v")
    while isinstance(item, Mapping) and "$af" in item and isinstance(item.get("v"), Mapping):
        item = item["v"]  # a framework object (or a user dict shaped like a marker), opened
    if not isinstance(item, Mapping):
        return Turn("item", (value(item),))
    role = item.get("role")
    if isinstance(item.get("contents"), list):
        return Turn(text_of(role or "-"), tuple(_af_content(c) for c in items(item["contents"])))
    said = item.get("text", item.get("content"))
    if isinstance(role, str) and said is not None:
        return Turn(role, (text_of(said),))
    return Turn("item", (value(item),))


def _af_content(content: Any) -> str:
    """One ``Content`` by its ``type``: text, reasoning, function call and result, data, uri, error …"""
    if not isinstance(content, Mapping):
        return unknown(None)
    kind = content.get("type")
    if kind == "text":
        return text_of(content.get("text"))
    if kind == "text_reasoning":
        return "(thinking) " + text_of(content.get("text") or "…")
    if kind == "function_call":
        return call(content.get("name"), content.get("arguments"), content.get("call_id"))
    if kind == "function_result":
        failed = content.get("exception") is not None
        return result(
            content.get("call_id"),
            content.get("exception") if failed else content.get("result"),
            error=failed,
        )
    if kind in ("uri", "hosted_file"):
        return blob("file", content.get("media_type"), content.get("uri") or content.get("file_id"))
    if kind == "data":
        uri = content.get("uri")
        return blob(
            "blob", content.get("media_type"), None, uri.partition(",")[2] if isinstance(uri, str) else None
        )
    if kind == "error":
        return f"error {text_of(content.get('error_code') or '')}: {text_of(content.get('message') or '')}"
    return unknown(kind)
