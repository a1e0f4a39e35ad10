"""LangGraph values as checkpoint JSON, and back — without reviving arbitrary types.

A safepoint checkpoint holds only JSON data. Values that already are plain
JSON (exact ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``) are
stored as they are, so they stay readable in ``safepoint show``. Anything else
goes through LangGraph's own serializer and is stored as ``{"$typed":
["msgpack", tree]}`` — the msgpack payload as a JSON tree, its strings in the
clear for the scrubber (``msgpack.py``) — or, for raw bytes,
``{"$typed": ["bytes", bytes]}`` (the store scrubs bytes whole and keeps them
in its blob store).

Loading is where a checkpoint store can be attacked: a payload that names a
module and a class makes a permissive deserializer import and call it. The
serializer here never unpickles (``pickle_fallback=False``), revives no
LangChain JSON constructors (``allowed_json_modules=None``) and rebuilds only
msgpack types on LangGraph's built-in safe list plus the ``allowed_types``
the user names. A payload naming any other type is *refused* — an error, not a
silently half-decoded value — and so is a value of such a type at save time,
before anything is written, so a thread never becomes unloadable later.

LangChain chat messages are stored as plain dicts, one per message, so the
message log stays readable and incremental: the message's own fields
(``model_dump``: ``type``, ``content``, ``tool_calls`` …) plus an OpenAI-style
``role`` (``user``, ``assistant`` …) for ``safepoint show`` and other tools.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from langchain_core import messages as lc_messages
from langchain_core.messages import messages_from_dict
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from safepoint import NotJSONCompatible
from safepoint.adapters.cache import thaw
from safepoint.codec import is_valid_unicode

from .memo import Log, same_prefix
from .msgpack import from_tree, to_tree

TYPED = "$typed"
LANGCHAIN = "langchain"
JSON = "json"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
# Exactly the classes ``messages_from_dict`` rebuilds (each kind and its chunk); a subclass would
# come back as its base.
_CORE_MESSAGES = frozenset(
    getattr(lc_messages, kind + suffix)
    for kind in ("AI", "Chat", "Function", "Human", "System", "Tool")
    for suffix in ("Message", "MessageChunk")
)
# The role a reader expects, by LangChain message type (ChatMessage carries its own).
_ROLES = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "function",
    "FunctionMessageChunk": "function",
}
_REVIVABLE_KINDS = frozenset({"msgpack", "bytes", "bytearray"})
_REFUSAL_EVENTS = frozenset({"msgpack_blocked", "msgpack_method_blocked", "msgpack_unregistered_allowed"})


class RefusedValue(Exception):
    """A stored value names a type outside the allow-list, or is not a typed payload we wrote.

    ``reason`` says which, naming at most a type — never the value.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


# LangGraph reports each type it declines to rebuild as an event rather than
# raising; collect the events of the current decode (a ContextVar keeps
# threads and tasks apart) and turn them into a refusal.
_refusals: ContextVar[list[str] | None] = ContextVar("safepoint_langgraph_refusals", default=None)


def _on_serde_event(event: SerdeEvent) -> None:
    found = _refusals.get()
    if found is not None and event["kind"] in _REFUSAL_EVENTS:
        found.append(".".join(p for p in (event["module"], event["name"], event.get("method", "")) if p))


register_serde_event_listener(_on_serde_event)


def make_serde(allowed_types: Iterable[type | tuple[str, ...]] = ()) -> JsonPlusSerializer:
    """LangGraph's serializer locked down: no pickle, no JSON constructors, an explicit allow-list."""
    allowed = list(allowed_types)
    return JsonPlusSerializer(
        pickle_fallback=False,
        allowed_json_modules=None,
        # None (empty) means LangGraph's built-in safe types only, whatever
        # LANGGRAPH_STRICT_MSGPACK says; never True (allow all).
        allowed_msgpack_modules=allowed or None,
    )


def is_plain(value: Any) -> bool:
    """True for JSON built only of exact built-in types, which round-trip through JSON unchanged."""
    kind = type(value)
    if kind is str:
        return is_valid_unicode(value)
    if kind is dict:
        return all(type(k) is str and is_valid_unicode(k) and is_plain(v) for k, v in value.items())
    if kind is list:
        return all(is_plain(v) for v in value)
    if kind is int:
        return _INT_MIN <= value <= _INT_MAX  # type: ignore[no-any-return]
    if kind is float:
        return math.isfinite(value)
    return value is None or kind is bool


class ValueCodec:
    """Encodes values for a checkpoint and decodes them, with the serializer's allow-list enforced."""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def encode(self, value: Any, path: str) -> Any:
        """Plain JSON as is; anything else as a typed payload. ``NotJSONCompatible`` names ``path``."""
        if is_plain(value) and not (type(value) is dict and TYPED in value):
            return value
        try:
            kind, data = self.serde.dumps_typed(value)
        except Exception as exc:  # ormsgpack and TypeError alike; the message would quote the value
            raise NotJSONCompatible(path, f"{type(value).__name__} cannot be serialized") from exc
        body: Any
        if kind == "msgpack":
            body = to_tree(data)
            data = from_tree(body)  # exactly what a load will unpack
        else:
            # Raw bytes as bytes: the store scans them and, if a secret is
            # inside, replaces them whole (never an undecodable edit of base64).
            body = data
        try:
            self._loads(kind, data)  # a value we could not load back must not be stored
        except RefusedValue as refused:
            raise NotJSONCompatible(
                path, f"{refused.reason}; pass allowed_types=[...] to SafepointSaver to store it"
            ) from None
        return {TYPED: [kind, body]}

    def decode(self, stored: Any) -> Any:
        """The value ``encode`` was given; ``RefusedValue`` for a type outside the allow-list."""
        if type(stored) is dict and TYPED in stored:
            try:
                kind, body = stored[TYPED]
                if kind == "msgpack":
                    data = from_tree(body)
                elif isinstance(body, bytes):
                    data = body
                else:  # written before raw bytes were stored as bytes
                    data = base64.b64decode(body, validate=True)
            except (TypeError, ValueError):
                raise RefusedValue("a typed value is malformed (edited, or redacted inside?)") from None
            return self._loads(str(kind), data)
        return thaw(stored)

    def _loads(self, kind: str, data: bytes) -> Any:
        if kind not in _REVIVABLE_KINDS:
            raise RefusedValue(f"a {kind!r} payload is never revived")
        found: list[str] = []
        token = _refusals.set(found)
        try:
            value = self.serde.loads_typed((kind, data))
        except Exception:
            raise RefusedValue("a typed value does not decode") from None
        finally:
            _refusals.reset(token)
        if found:
            raise RefusedValue(f"{found[0]} is not in the saver's allowed types")
        return value

    def encode_messages(
        self, value: Any, path: str, known: Log | None = None
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """A message channel's value as log entries, with its format; None if it isn't a message list.

        ``known``: a log this saver encoded (or loaded) before. The leading
        messages of ``value`` that are those it was made from (the very
        objects, as a rule) keep their entries unconverted, so a turn converts
        only the messages it added.
        """
        if type(value) is not list:
            return None
        keep, fmt, out = 0, None, []
        if known is not None and known.sources is not None and known.fmt is not None:
            keep = same_prefix(known.sources, value)
            if keep:
                fmt, out = known.fmt, known.raw[:keep]
        tail = value[keep:]
        if fmt != JSON and all(type(m) in _CORE_MESSAGES for m in tail):
            out.extend(self._message_entry(m, f"{path}[{keep + i}]") for i, m in enumerate(tail))
            return LANGCHAIN, out
        if fmt != LANGCHAIN and all(type(m) is dict and TYPED not in m for m in tail) and is_plain(tail):
            out.extend(dict(m) for m in tail)
            return JSON, out
        return None

    def _message_entry(self, message: Any, path: str) -> Any:
        as_dict = message.model_dump()
        if "role" not in as_dict:  # ChatMessage has a role of its own
            as_dict = {"role": _ROLES[as_dict["type"]], **as_dict}
        return as_dict if is_plain(as_dict) else self.encode(message, path)

    def decode_messages(self, fmt: str, stored: Iterable[Any]) -> list[Any]:
        """The message list ``encode_messages`` was given."""
        if fmt == JSON:
            return [thaw(m) for m in stored]
        if fmt != LANGCHAIN:
            raise RefusedValue(f"a message log in the unknown format {fmt!r}")
        out: list[Any] = []
        for entry in stored:
            if TYPED in entry:
                out.append(self.decode(entry))
                continue
            data = thaw(entry)
            if data.get("type") in _ROLES:
                data.pop("role", None)
            try:
                out.extend(messages_from_dict([{"type": data.get("type"), "data": data}]))
            except (KeyError, TypeError, ValueError):
                raise RefusedValue("a message of an unknown type") from None
        return out
