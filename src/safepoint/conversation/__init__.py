"""Each framework's stored messages as a conversation: who spoke, and what — with no framework installed.

``safepoint show`` and ``diff`` show an adapter-written run's messages as
:class:`Turn` values: a role and its parts — text, tool calls (name and
arguments), tool results (the call they answer), thinking, files and blobs.
One decoder per adapter reads the JSON that adapter stores
(``safepoint.adapters.*``): Pydantic AI entries (``{"kind", "message":
{"kind": "request" | "response", "parts": [{"part_kind": …}]}}``), Google ADK
events (``content.parts`` of ``text`` / ``function_call`` /
``function_response`` / ``inline_data`` …), OpenAI Agents SDK items
(Responses API items), LangGraph's LangChain message dumps, and the Agent
Framework's journal (``{"op": "item", "v": {"$af": …, "v": Message}}``).
Nothing is revived or imported: fields are picked, and a part this module
does not know shows as its type name, never as its JSON. The text is made of
stored values; the CLI makes control characters visible and never reads it
as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .chat import langchain_message, openai_item
from .parts import adk_event, agent_framework_item, pydantic_ai_entry
from .words import Part, Turn

__all__ = ["Part", "Turn", "chat_message", "decoder"]

_DECODERS: dict[str, Callable[[Any], Turn]] = {
    "pydantic-ai": pydantic_ai_entry,
    "google-adk": adk_event,
    "openai-agents": openai_item,
    "langgraph": langchain_message,
    "agent-framework": agent_framework_item,
}


def chat_message(message: Any) -> Turn:
    """A chat-shaped message any harness stores (OpenAI Chat Completions and Responses items,
    Anthropic content blocks, LangChain dicts) as a turn: the LangGraph decoder reads them all."""
    return langchain_message(message)


def decoder(adapter: str | None) -> Callable[[Any], Turn] | None:
    """The decoder for the messages of runs the adapter named ``adapter`` writes (None: not one of ours)."""
    return _DECODERS.get(adapter or "")
