"""Where a Pydantic AI conversation lives in safepoint, and how its parts become JSON.

A conversation is one run, ``pydantic-ai/<conversation_id>`` (percent-encoded;
``pydantic-ai/#<sha256>`` when too long). Each of its steps holds:

* ``messages``: the entries this conversation stored, in the order it stored
  them — ``{"id", "parent_id", "kind", "message"}``, the message as Pydantic
  AI's own JSON (``ModelMessagesTypeAdapter``). A branch adds entries whose
  parent is an earlier one; nothing is ever rewritten;
* ``state.record``: the ``ConversationRecord`` (``None`` once deleted: a
  tombstone kept while a fork still reads from this run);
* ``state.refs``: ``[entry_id, run_id, step]`` for every entry the history
  reaches in *another* run — a fork's starting point above all — read from
  that run's checkpoint at that step, which safepoint keeps unchanged.

Index runs ``pydantic-ai-index/<bucket>`` (``safepoint.role=index``) map an
entry id to the run and step that stored it, for ``read_entry`` of an id
nobody has named in this process yet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_core import PydanticSerializationError

from safepoint import NotJSONCompatible

ADAPTER_LABEL = "safepoint.adapter"
ADAPTER = "pydantic-ai"
ROLE_LABEL = "safepoint.role"
CONVERSATION_LABEL = "pydantic_ai.conversation_id"
SCOPE_LABEL = "pydantic_ai.scope"
FORKED_FROM_LABEL = "pydantic_ai.forked_from"
DELETED_LABEL = "pydantic_ai.deleted"
REF_LABEL_PREFIX = "pydantic_ai.ref."  # + a digest of a run this one reads entries from
_MAX_RUN_ID = 255
_MAX_LABEL = 255
# Percent-encode only what a label or run id cannot hold as is (controls, '%', non-ASCII):
# ordinary scopes such as "user:42" or "team/alice@example.com" stay readable in the CLI.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%")
_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")
_RECORD = TypeAdapter(ConversationRecord)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def readable(text: str, limit: int = _MAX_LABEL) -> str:
    """``text`` percent-encoded where needed; ``#<sha256>`` when that would be longer than ``limit``."""
    encoded = quote(text, safe=_SAFE, errors="surrogatepass")
    return encoded if len(encoded) <= limit else "#" + _digest(text)


def conversation_run_id(conversation_id: str) -> str:
    """The run that holds ``conversation_id``."""
    return "pydantic-ai/" + readable(conversation_id, _MAX_RUN_ID - len("pydantic-ai/"))


def index_run_id(entry_id: str) -> str:
    """The index run that knows where ``entry_id`` is stored.

    Pydantic AI mints entry ids as UUIDv7, whose first 8 hex digits are a
    65-second window of time: a bucket per window keeps every index run small
    (what one minute of saves stored), so a lookup reads a bounded slice, not
    the whole history. Ids of another shape fall into 256 hashed buckets.
    """
    if _UUID7.match(entry_id):
        return "pydantic-ai-index/" + entry_id[:8]
    return "pydantic-ai-index/h" + _digest(entry_id)[:2]


def ref_label(run_id: str) -> str:
    """The label key saying "this run reads entries from ``run_id``" (its value is ``run_id``)."""
    return REF_LABEL_PREFIX + _digest(run_id)[:16]


def conversation_labels(record: ConversationRecord | None, conversation_id: str) -> dict[str, str]:
    """The labels of a conversation's step (without the ref labels, which the store adds)."""
    labels = {ADAPTER_LABEL: ADAPTER, CONVERSATION_LABEL: readable(conversation_id)}
    if record is None:
        labels[DELETED_LABEL] = "true"
        return labels
    if record.scope is not None:
        labels[SCOPE_LABEL] = readable(record.scope)
    if record.forked_from is not None:
        labels[FORKED_FROM_LABEL] = readable(record.forked_from)
    return labels


INDEX_LABELS = {ADAPTER_LABEL: ADAPTER, ROLE_LABEL: "index"}


# --- payloads, through Pydantic AI's own JSON (never pickle)


def encode_entries(entries: Sequence[ConversationEntry]) -> list[dict[str, Any]]:
    """The entries as stored messages; a message Pydantic AI cannot dump is refused, naming it."""
    encoded = []
    for position, entry in enumerate(entries):
        try:
            (message,) = ModelMessagesTypeAdapter.dump_python([entry.message], mode="json")
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise NotJSONCompatible(
                f"new_entries[{position}].message", f"Pydantic AI cannot serialize it ({type(exc).__name__})"
            ) from None
        for name in ("id", "parent_id"):
            value = getattr(entry, name)
            if value is not None and type(value) is not str:
                raise NotJSONCompatible(
                    f"new_entries[{position}].{name}", f"{type(value).__name__} is not a str"
                )
        encoded.append({"id": entry.id, "parent_id": entry.parent_id, "kind": entry.kind, "message": message})
    return encoded


def decode_entries(stored: Sequence[Any]) -> list[ConversationEntry]:
    """Stored messages back as entries (all messages validated in one pass)."""
    messages = ModelMessagesTypeAdapter.validate_python([item["message"] for item in stored])
    return [
        ConversationEntry(id=item["id"], parent_id=item["parent_id"], message=message, kind=item["kind"])
        for item, message in zip(stored, messages, strict=True)
    ]


def encode_record(record: ConversationRecord) -> dict[str, Any]:
    try:
        dumped: dict[str, Any] = _RECORD.dump_python(record, mode="json")
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise NotJSONCompatible("record", f"Pydantic AI cannot serialize it ({type(exc).__name__})") from None
    return dumped


def decode_record(stored: Any) -> ConversationRecord:
    return _RECORD.validate_python(stored)
