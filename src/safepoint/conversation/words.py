"""The words a conversation is shown in: a message as a :class:`Turn`, and its parts as text.

Shared by every framework's decoder: a JSON value as ``key=value`` words
(never as JSON), a tool call, a tool result and the call it answers, a file
or blob reference, an unknown part by its type name, and the content blocks
chat formats share (OpenAI, Anthropic, LangChain).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PART = 2_000  # characters of one part looked at
_MANY = 50  # parts or items of one message looked at
_DEEP = 8  # levels of a nested value shown


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored message as a conversation shows it: its role and its parts, each already words."""

    role: str
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return " · ".join(part for part in self.parts if part) or "(no content)"


class Part(str):
    """A part's words that also say what the part is, for a view that draws it: a tool call or a
    tool result keeps its tool's name, its arguments or output in words, and the call id that pairs
    the two (the inspector draws them as linked cards). As text it is the same words as any part."""

    kind: str  # "call" or "result"
    name: str
    detail: str
    call_id: str | None
    error: bool

    @classmethod
    def of(cls, words: str, kind: str, name: str, detail: str, call_id: Any, *, error: bool = False) -> Part:
        part = cls(words)
        part.kind, part.name, part.detail, part.error = kind, name, detail, error
        part.call_id = name_of(call_id) if call_id not in (None, "") else None
        return part


# -- shared pieces ---------------------------------------------------------------------------


def value(data: Any) -> str:
    """A JSON value in words: strings as they are at the top, mappings as ``key=value``, never JSON.

    At most about ``2 * _PART`` characters are made, however big or deep the value (the CLI cuts it
    shorter anyway).
    """
    return _words(data, 0, [_PART * 2])


def _words(data: Any, depth: int, budget: list[int]) -> str:
    if budget[0] <= 0 or depth > _DEEP:
        return "…"
    if isinstance(data, str):
        shown = data[: min(_PART, budget[0])]
        budget[0] -= len(shown)
        return shown if depth == 0 else json.dumps(shown, ensure_ascii=False)
    if isinstance(data, Mapping):
        inner = ", ".join(
            f"{str(k)[:100]}={_words(v, depth + 1, budget)}" for k, v in list(data.items())[:_MANY]
        )
        return inner if depth == 0 else f"({inner})"
    if isinstance(data, list):
        return "[" + ", ".join(_words(v, depth + 1, budget) for v in data[:_MANY]) + "]"
    budget[0] -= 8
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "true" if data else "false"
    return str(data)[:100]


def call(name: Any, arguments: Any, call_id: Any = None) -> Part:
    """A tool call: its name, its arguments (a JSON string is read as the JSON it holds), its id."""
    if isinstance(arguments, str) and len(arguments) <= _PART * 10:
        with contextlib.suppress(ValueError):  # not JSON: shown as the text it is
            arguments = json.loads(arguments)
    args = value(arguments)
    return Part.of(f"call {name_of(name)}({args}){tag(call_id)}", "call", name_of(name), args, call_id)


def result(call_id: Any, output: Any, name: Any = None, *, error: bool = False) -> Part:
    """A tool result and the call it answers."""
    if isinstance(output, str) and output[:1] in ("{", "[") and len(output) <= _PART * 10:
        with contextlib.suppress(
            ValueError
        ):  # a tool's JSON text (a handoff's answer) read as the JSON it is
            output = json.loads(output)
    head = ("error " if error else "") + "result" + (f" of {name_of(name)}" if name else "") + tag(call_id)
    shown = value(output) if output not in (None, "") else "(empty)"
    named = name_of(name) if name else ""
    return Part.of(f"{head}: {shown}", "result", named, shown, call_id, error=error)


def unknown(kind: Any) -> str:
    return f"<{name_of(kind) if kind else 'part'}>"


def blob(what: str, media_type: Any, where: Any = None, data: Any = None) -> str:
    """A file or binary part: what it is, its media type, where it lives or how big it is stored."""
    shown = f"({what} {name_of(media_type) if media_type else 'of unknown type'}"
    if isinstance(where, str) and where:
        shown += " at " + where[:_PART]
    elif isinstance(data, str):
        shown += f", {len(data) * 3 // 4 - data[-2:].count('='):,} bytes"
    return shown + ")"


def name_of(name: Any) -> str:
    return name[:200] if isinstance(name, str) else value(name)[:200]


def tag(call_id: Any) -> str:
    return f" [{name_of(call_id)}]" if call_id not in (None, "") else ""


def items(data: Any) -> list[Any]:
    return data[:_MANY] if isinstance(data, list) else []


def text_of(data: Any) -> str:
    return data[:_PART] if isinstance(data, str) else value(data)


def content_parts(content: Any) -> list[str]:
    """A message's content as parts: a string, or a list of content blocks (OpenAI, Anthropic, LangChain)."""
    if content is None or content == "":
        return []
    if not isinstance(content, list):
        return [text_of(content)]
    parts = [_block(block) for block in content[:_MANY]]
    if len(content) > _MANY:
        parts.append(f"… {len(content) - _MANY} more parts")
    return parts


def _block(block: Any) -> str:
    if not isinstance(block, Mapping):
        return text_of(block)
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text", "summary_text") and isinstance(block.get("text"), str):
        return text_of(block["text"])
    if kind in ("reasoning", "thinking", "reasoning_text"):
        said = block.get(kind) or block.get("text") or block.get("summary")
        return "(thinking) " + (" ".join(content_parts(said)) if said else "…")
    if kind == "refusal":
        return "(refusal) " + text_of(block.get("refusal"))
    if kind == "tool_use":
        return call(block.get("name"), block.get("input"), block.get("id"))
    if kind == "tool_result":
        return result(
            block.get("tool_use_id"),
            " ".join(content_parts(block.get("content"))),
            error=bool(block.get("is_error")),
        )
    if kind == "function_call":
        return call(block.get("name"), block.get("arguments"), block.get("call_id"))
    if kind == "function_call_output":
        return result(block.get("call_id"), block.get("output"))
    if kind in ("image", "image_url", "input_image", "file", "input_file", "audio", "input_audio", "video"):
        where = block.get("url") or block.get("image_url") or block.get("file_url") or block.get("file_id")
        if isinstance(where, Mapping):
            where = where.get("url")
        data = block.get("data") or block.get("base64")
        return blob(
            str(kind).replace("input_", ""), block.get("mime_type") or block.get("media_type"), where, data
        )
    return unknown(kind)
