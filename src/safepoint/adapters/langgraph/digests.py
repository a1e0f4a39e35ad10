"""Model-request digests that cost what a call adds, not what the conversation holds.

A replay is guarded by a digest of the request (``calls.request_digest``):
the model's parameters and bound tools (its llm string) and each message as
the provider reads it — its role, content, name, tool calls (name, arguments,
id) and tool-call id. Never a message's id, which LangGraph renews when it
runs a step again; and a stream's chunk digests as the message it merges to.

Serializing and hashing the whole conversation on every call makes a turn's
cost grow with the conversation. So a request's digest is a hash over the
llm string's digest and each message's, and ``MessageDigests`` (one per
journal) remembers each message's digest while the message is the same
object holding the same parts:

* An entry is keyed by the message's ``id()`` and holds a weak reference to
  it (the entry goes when the message goes, so an ``id()`` is never taken
  for another message's), the digest, and the parts it was made from: the
  very objects, and a ``marshal`` image of those that are containers (block
  content, tool calls) — marshal writes exact types (``True`` is not ``1``,
  ``-0.0`` not ``0.0``) and refuses any other type, subclasses included.
* A message asked for again has its parts read afresh. Its digest is reused
  only when each part is the same object as before and the containers'
  image is the same bytes: a part reassigned (``message.content = ...``) or
  changed in place, however deep (a tool call's arguments edited), is
  digested again. The check reads a few pointers a message, and copies the
  containers' bytes in C — never a text content, which is immutable.
* A message holding a value JSON takes as ``str(value)`` (an object, bytes,
  a set) is not remembered: ``str`` may change in place; it is digested
  afresh on every call, as it would be without this memory.

Digests are made from values only, never from an ``id()``: the same request
gives the same digest in every process. Entries live as long as their
messages: a conversation the process holds costs one small entry a message.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import weakref
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["MessageDigests"]

Parts = tuple[Any, Any, Any, Any, Any]  # type, content, name, tool_calls, tool_call_id

_MARSHAL = 2  # the newest marshal version without back-references: bytes that depend on values only
_ATOMS = frozenset({str, int, float, bool, type(None)})  # immutable: the same object, the same JSON
_MISSING, _ATTR = object(), object()
_OPTIONAL = (("name", None), ("tool_calls", ()), ("tool_call_id", None))  # not on every message class


class _Entry:
    """A message's digest and what it was made from: its parts (the very objects) and the
    marshal image of those that are containers (None: there were none but an empty tool-call
    list, which must still be empty)."""

    __slots__ = ("digest", "image", "parts", "ref")

    def __init__(self, ref: weakref.ref[Any], parts: Parts, image: bytes | None, digest: bytes) -> None:
        self.ref, self.parts, self.image, self.digest = ref, parts, image, digest


class MessageDigests:
    """Each message's digest, remembered while the message holds the same parts. Thread-safe:
    one dict, each entry read or written whole; two threads digesting one message store the same."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._plans: dict[type, tuple[Any, Any, Any]] = {}  # a pydantic message class -> its _plan

    def __len__(self) -> int:
        return len(self._entries)

    def request(self, llm_string: str, messages: Iterable[Any]) -> str:
        """A request's digest: its llm string's and its messages', in order."""
        digest = hashlib.sha256(hashlib.sha256(llm_string.encode("utf-8", "surrogatepass")).digest())
        digest.update(b"".join(map(self.message, messages)))
        return digest.hexdigest()

    def message(self, message: Any) -> bytes:
        """One message's digest: remembered from the last time, or its parts' JSON hashed."""
        parts = self._parts(message)
        entry = self._entries.get(id(message))
        if entry is not None and entry.ref() is message:
            old = entry.parts
            if (
                parts[1] is old[1]
                and parts[3] is old[3]
                and parts[0] is old[0]
                and parts[2] is old[2]
                and parts[4] is old[4]
                and (not parts[3] if entry.image is None else _image(parts) == entry.image)
            ):
                return entry.digest
        odd: list[Any] = []
        digest = _digest(parts, odd)
        if not odd:
            self._remember(message, parts, digest)
        return digest

    def _parts(self, message: Any) -> Parts:
        """``(type, content, name, tool_calls, tool_call_id)`` as ``getattr`` reads them, with a
        default for an optional part the message lacks. A pydantic model's (every LangChain
        message's) optional parts are read by its class's ``_plan``, without pydantic's
        missing-attribute path, which raises and costs more than a remembered digest."""
        extra = getattr(message, "__pydantic_extra__", _MISSING)
        if extra is _MISSING or extra:  # not pydantic, or holding extra attributes
            found = [getattr(message, name, default) for name, default in _OPTIONAL]
            return message.type, message.content, found[0], found[1], found[2]
        plan = self._plans.get(type(message))
        if plan is None:
            plan = self._plans[type(message)] = _plan(type(message))
        fields = message.__dict__
        name, tool_calls, tool_call_id = plan
        if name is _ATTR:
            name = fields.get("name", _MISSING)
            if name is _MISSING:
                name = getattr(message, "name", None)
        if tool_calls is _ATTR:
            tool_calls = fields.get("tool_calls", _MISSING)
            if tool_calls is _MISSING:
                tool_calls = getattr(message, "tool_calls", ())
        if tool_call_id is _ATTR:
            tool_call_id = fields.get("tool_call_id", _MISSING)
            if tool_call_id is _MISSING:
                tool_call_id = getattr(message, "tool_call_id", None)
        return message.type, message.content, name, tool_calls, tool_call_id

    def _remember(self, message: Any, parts: Parts, digest: bytes) -> None:
        plain = all(type(part) in _ATOMS for part in parts[:3] + parts[4:])
        image = None if plain and not parts[3] else _image(parts)
        if image == b"":
            return  # a container marshal refuses: digested afresh on every call
        key = id(message)
        try:
            ref = weakref.ref(message, _dropper(self._entries, key))
        except TypeError:  # not weakly referenceable: digested afresh on every call
            return
        self._entries[key] = _Entry(ref, parts, image, digest)


def _plan(cls: type) -> tuple[Any, Any, Any]:
    """How a pydantic message class's instances (without extra attributes) give their optional
    parts: ``_ATTR`` where the class declares the part (a field, a property, a class attribute)
    — a field's value from the instance's ``__dict__``, else ``getattr``; the default where it
    declares it in no way, as ``getattr(message, name, default)`` would find."""
    declared = cls.model_fields  # type: ignore[attr-defined]
    return tuple(  # type: ignore[return-value]
        _ATTR if name in declared or hasattr(cls, name) else default for name, default in _OPTIONAL
    )


def _image(parts: Parts) -> bytes:
    """The exact image of the parts that are not atoms (b"": one holds a type marshal refuses)."""
    try:
        return marshal.dumps(tuple(part for part in parts if type(part) not in _ATOMS), _MARSHAL)
    except ValueError:
        return b""


def _dropper(entries: dict[int, _Entry], key: int) -> Callable[[weakref.ref[Any]], None]:
    """The weak reference's callback: its message is gone, so is its entry (not a newer one)."""

    def drop(ref: weakref.ref[Any]) -> None:
        entry = entries.get(key)
        if entry is not None and entry.ref is ref:
            entries.pop(key, None)

    return drop


def _digest(parts: Parts, odd: list[Any]) -> bytes:
    """The message's digest; a value JSON takes as ``str(value)`` noted in ``odd``."""
    kind, content, name, tool_calls, tool_call_id = parts
    seen = {
        "type": _kind(kind),
        "content": content,
        "name": name,
        "tool_calls": [[c["name"], c["args"], c["id"]] for c in tool_calls],
        "tool_call_id": tool_call_id,
    }

    def as_text(value: Any) -> str:
        odd.append(value)
        return str(value)

    text = json.dumps(seen, sort_keys=True, default=as_text)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _kind(message_type: str) -> str:
    """A message's role: a chunk's ("AIMessageChunk") the same as its message's ("ai")."""
    if message_type.endswith("MessageChunk"):
        return message_type.removesuffix("MessageChunk").lower()
    return message_type
