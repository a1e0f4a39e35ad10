"""What the adapters store, decoded for display — with no framework installed.

``safepoint show`` and the inspector (``safepoint ui``) show a run that an
adapter wrote in its framework's terms: a LangGraph thread run
(``safepoint.adapters.langgraph``) by its thread id, namespace, checkpoint
id and channel values; an OpenAI Agents SDK session
(``safepoint.adapters.openai_agents``) by its session id; a Pydantic AI
conversation, a Google ADK session or an Agent Framework workflow by the ids
its labels carry. The messages of each are read by its framework's decoder
in ``safepoint.conversation`` (role, text, tool calls and results). Nothing here
imports LangGraph, LangChain or the SDK, and nothing is revived: a value
stored through LangGraph's serializer (``{"$typed": [kind, body]}``) is
shown as a typed placeholder, with what it holds as data where that is
plain (a msgpack tree's strings and numbers), never as an object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from safepoint.records import Page, RunInfo

if TYPE_CHECKING:
    from safepoint.store import Store

ADAPTER_LABEL = "safepoint.adapter"  # the label every adapter sets (the adapters' own constant)
ROLE_LABEL = "safepoint.role"  # "index" on an adapter's bookkeeping runs (any adapter's)
TYPED = "$typed"
_SHOWN = 2_000  # characters of one channel value shown


@dataclass(frozen=True, slots=True)
class FrameworkView:
    """A run as its framework names it: the framework, a few (name, value) facts, its channels."""

    framework: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    channels: list[tuple[str, str]] = field(default_factory=list)


def is_bookkeeping(labels: Mapping[str, str]) -> bool:
    """Whether a run is an adapter's own bookkeeping (the LangGraph adapter's index runs), not a run
    a user started: listings leave these out unless asked (``safepoint runs --all``). An adapter marks
    them ``safepoint.role=index``; the LangGraph adapter's own label says the same."""
    return any(all(labels.get(name) == value for name, value in rule.items()) for rule in BOOKKEEPING)


# ``is_bookkeeping`` as label sets, for a store query to leave these runs out (``store.counter_sums``).
BOOKKEEPING: tuple[dict[str, str], ...] = (
    {ROLE_LABEL: "index"},
    {ADAPTER_LABEL: "langgraph", "langgraph.role": "index"},
)


def user_runs(store: Store, *, limit: int, cursor: str | None, **filters: Any) -> Page[RunInfo]:
    """``store.runs(...)`` without bookkeeping runs: pages are read whole until ``limit`` runs are
    found or the store has no more, so the cursor returned continues exactly after them."""
    found: list[RunInfo] = []
    while True:
        # The first call takes ``limit`` as given (the store refuses a bad one); later ones what is left.
        page = store.runs(limit=limit - len(found), cursor=cursor, **filters)
        found += [run for run in page.items if not is_bookkeeping(run.labels)]
        cursor = page.next_cursor
        if cursor is None or len(found) >= limit:
            return Page(found, cursor)


def framework_view(labels: Mapping[str, str], state: Any) -> FrameworkView | None:
    """The framework's view of a checkpoint (its labels and state), or None for a plain run."""
    adapter = labels.get(ADAPTER_LABEL)
    if adapter == "langgraph":
        return _langgraph(labels, state if isinstance(state, Mapping) else {})
    if adapter == "openai-agents":
        facts = [("session", labels.get("openai_agents.session_id", "?"))]
        return FrameworkView(
            "OpenAI Agents SDK session", facts=facts + _other_labels(labels, "openai_agents.")
        )
    if adapter in _BY_LABELS:
        name, prefix, shown = _BY_LABELS[adapter]
        facts = [(k[len(prefix) :], v) for k, v in sorted(labels.items()) if k.startswith(prefix)]
        value = state.get(shown[1]) if shown is not None and isinstance(state, Mapping) else None
        channels = [(shown[0], shown_value(value))] if shown is not None and value is not None else []
        return FrameworkView(name, facts=facts, channels=channels)
    return None


# The newer adapters' runs: named by their framework, with that framework's labels as facts
# (their ids: conversation, app/user/session, workflow) and, where the step's state holds one,
# a value shown as a channel: (its name, its key in the state).
_BY_LABELS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "pydantic-ai": ("Pydantic AI conversation", "pydantic_ai.", None),
    "google-adk": ("Google ADK session", "google_adk.", ("session state", "state")),
    "agent-framework": ("Microsoft Agent Framework workflow", "agent_framework.", None),
}


def _langgraph(labels: Mapping[str, str], state: Mapping[str, Any]) -> FrameworkView:
    facts = [
        ("thread", labels.get("langgraph.thread_id", "?")),
        ("namespace", labels.get("langgraph.checkpoint_ns", "") or "(root)"),
        ("role", labels.get("langgraph.role", "?")),
    ]
    if state.get("id") is not None:
        facts.append(("checkpoint id", str(state.get("id"))))
    if state.get("parent") is not None:
        facts.append(("parent checkpoint", str(state.get("parent"))))
    log = state.get("messages")
    if isinstance(log, Mapping) and log.get("channel") is not None:
        facts.append(("message channel", f"{log.get('channel')} (the conversation below)"))
    values = state.get("values")
    channels = (
        [(str(name), shown_value(value)) for name, value in sorted(values.items(), key=lambda kv: str(kv[0]))]
        if isinstance(values, Mapping)
        else []
    )
    writes = state.get("writes")
    if isinstance(writes, list) and writes:
        facts.append(("pending writes", str(len(writes))))
    return FrameworkView("LangGraph thread", facts=facts, channels=channels)


def shown_value(value: Any) -> str:
    """One stored channel value as text: plain JSON as JSON, a typed value as its placeholder."""
    text = json.dumps(_placeholders(value), ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + f"… ({len(text):,} characters)"


def _placeholders(value: Any) -> Any:
    if isinstance(value, Mapping):
        typed = value.get(TYPED)
        if len(value) == 1 and isinstance(typed, list) and len(typed) == 2 and isinstance(typed[0], str):
            kind, body = typed
            if kind == "bytes":
                size = len(body) if isinstance(body, bytes | str) else "?"
                return f"<bytes, {size} stored>"
            return {f"<{kind} value>": _placeholders(body)}
        return {str(k): _placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders(v) for v in value]
    if isinstance(value, bytes):
        return f"<bytes, {len(value)}>"
    return value


def _other_labels(labels: Mapping[str, str], prefix: str) -> list[tuple[str, str]]:
    return [
        (k[len(prefix) :], v)
        for k, v in sorted(labels.items())
        if k.startswith(prefix) and k != prefix + "session_id"
    ]
