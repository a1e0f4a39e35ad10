"""A realistic offline LangGraph agent for the call journal's tests.

A real ``StateGraph``: ``agent`` (a scripted ``BaseChatModel`` bound to the
tools, called by ``invoke``, ``ainvoke``, ``stream`` or ``astream``) →
``ToolNode`` → ``agent`` …, with several tool calls per turn: ``charge``, a
non-idempotent tool whose effect goes to a ``Ledger`` outside the database
(``record``: a second run shows as a duplicate), and ``lookup``, an
idempotent one (``once``). Per turn ``h`` the model asks for
``charge(order-h) + lookup(item-h)``, then ``lookup(price-h)``, then answers.

Like a real provider, the model mints random tool-call ids and reports usage;
each request it answers is noted in the ledger (``Ledger.model``) under the
request's place in the conversation (``h<turn>:a<answers so far>``), so a
request paid twice shows up there.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, TypedDict

from langchain_core.caches import BaseCache, InMemoryCache
from langchain_core.globals import set_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from safepoint.adapters.langgraph import JournalOptions, SafepointSaver, current_call_key, journal_tools
from safepoint.adapters.langgraph import non_idempotent as mark_non_idempotent
from safepoint.crashrig.ledger import Ledger
from safepoint.harness.actions import Reconcile

# "path": the ledger's file; "kill_after_charge": n (SIGKILL after the n-th charge in this process);
# "crash_after_charge": n (raise Crash instead: an in-process test's crash).
LEDGER: dict[str, Any] = {}
PROVIDER: list[str] = []  # every request that reached the scripted provider in this process
PRICE_PER_TOKEN = 0.001
_local = threading.local()
_charges = threading.Lock()  # a Ledger per thread (ToolNode runs tools in a thread pool)


def _ledger() -> Ledger | None:
    path = LEDGER.get("path")
    if path is None:
        return None
    if getattr(_local, "ledger", None) is None or _local.path != path:
        _local.ledger, _local.path = Ledger(path), path
    return _local.ledger  # type: ignore[no-any-return]


class Crash(BaseException):
    """A crash in one process: no handler of LangGraph's or the ToolNode's catches it."""


def reconcile_charge(key: str, name: str, args: Any) -> Reconcile:
    """The non-idempotent recipe: ask the service whether the effect happened."""
    order = args["args"]["order"]
    ledger = _ledger()
    if ledger is not None and ledger.happened(f"charge:{order}"):
        return Reconcile.skip(f"charged {args['args']['amount']} for {order}")
    return Reconcile.rerun()


@tool
def charge(order: str, amount: int) -> str:
    """Charge the customer for an order (an effect: never twice)."""
    ledger = _ledger()
    if ledger is not None:
        ledger.record(f"charge:{order}", {"amount": amount, "idempotency_key": current_call_key()})
        with _charges:
            LEDGER["charges"] = LEDGER.get("charges", 0) + 1
            kill = LEDGER["charges"] == LEDGER.get("kill_after_charge")
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)  # right after the effect, before anything records it
        if LEDGER["charges"] == LEDGER.get("crash_after_charge"):
            raise Crash
    return f"charged {amount} for {order}"


@tool
def lookup(q: str) -> str:
    """Look something up (idempotent)."""
    ledger = _ledger()
    if ledger is None:
        return f"found {q}"
    return str(ledger.once(f"lookup:{q}", lambda: f"found {q}"))


mark_non_idempotent(charge, reconcile=reconcile_charge)
TOOLS = [charge, lookup]


def script(messages: list[Any]) -> AIMessage:
    """The reply to ``messages``: deterministic but for the tool-call ids."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    turn, since = len(humans), messages[humans[-1] + 1 :] if humans else []
    answered = sum(isinstance(m, AIMessage) for m in since)
    PROVIDER.append(f"h{turn}:a{answered}")
    usage = {"input_tokens": 7 * len(messages), "output_tokens": 3 + answered, "total_tokens": 0}
    ledger = _ledger()
    if ledger is not None:  # what the provider was paid, to check the run's counters against
        paid = {
            "messages": len(messages),
            "tokens_in": usage["input_tokens"],
            "tokens_out": usage["output_tokens"],
        }
        ledger.model(f"h{turn}:a{answered}", paid)
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    calls: list[tuple[str, dict[str, Any]]] = []
    if answered == 0:
        calls = [
            ("charge", {"order": f"order-{turn}", "amount": 10 * turn}),
            ("lookup", {"q": f"item-{turn}"}),
        ]
    elif answered == 1:
        calls = [("lookup", {"q": f"price-{turn}"})]
    if calls:
        tool_calls = [{"name": n, "args": a, "id": "call_" + uuid.uuid4().hex[:10]} for n, a in calls]
        return AIMessage(content="", tool_calls=tool_calls, usage_metadata=usage)  # type: ignore[arg-type]
    results = sorted(str(m.content) for m in since if isinstance(m, ToolMessage))
    return AIMessage(content=f"turn {turn}: " + "; ".join(results), usage_metadata=usage)  # type: ignore[arg-type]


class ScriptedChat(BaseChatModel):
    """A chat model with real ``_generate``/``_agenerate``/``_stream``/``_astream``, offline."""

    delay: float = 0.0  # seconds each request takes

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)

    def _reply(self, messages: list[Any]) -> AIMessage:
        if self.delay:
            time.sleep(self.delay)
        return script(messages)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Iterator[Any]:
        message = self._reply(messages)
        words = str(message.content).split(" ") if message.content else []
        for i, word in enumerate(words):  # the content, a word at a time
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if i == 0 else " " + word))
        for i, call in enumerate(message.tool_calls):
            chunk = tool_call_chunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=i)
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[chunk]))
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=message.usage_metadata))

    async def _astream(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[Any]:
        for chunk in self._stream(messages, stop, run_manager, **kw):
            yield chunk


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build(
    saver: Any, *, mode: str = "invoke", cache: str = "none", journal: bool = True, delay: float = 0.0
) -> Any:
    """The graph on ``saver``: its model called by ``mode``, with the ``cache`` setting given."""
    model = ScriptedChat(delay=delay)
    if cache in ("global", "true"):  # a process-wide cache, the model's setting None or True
        set_llm_cache(InMemoryCache())
        model.cache = True if cache == "true" else None
    elif cache == "false":
        model.cache = False
    elif cache == "instance":
        model.cache = InMemoryCache()
    bound = model.bind_tools(TOOLS)

    def agent(state: State, config: RunnableConfig) -> dict[str, Any]:
        if mode == "stream":
            whole = None
            for chunk in bound.stream(state["messages"], config):
                whole = chunk if whole is None else whole + chunk
            return {"messages": [whole]}
        return {"messages": [bound.invoke(state["messages"], config)]}

    async def aagent(state: State, config: RunnableConfig) -> dict[str, Any]:
        if mode == "astream":
            whole = None
            async for chunk in bound.astream(state["messages"], config):
                whole = chunk if whole is None else whole + chunk
            return {"messages": [whole]}
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    graph = StateGraph(State)
    graph.add_node("agent", aagent if mode in ("ainvoke", "astream") else agent)
    graph.add_node("tools", ToolNode(TOOLS, **journal_tools()) if journal else ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def saver_for(store: Any, journal: bool) -> SafepointSaver:
    """The one line that turns the journal on."""
    if not journal:
        return SafepointSaver(store)
    return SafepointSaver(
        store, journal=JournalOptions(price=lambda usage: PRICE_PER_TOKEN * usage["total_tokens"])
    )


def next_input(state: Any, turn: int) -> tuple[bool, Any]:
    """Whether turn ``turn`` still needs running, and with what input (None: resume it) — as a
    careful application tells it after a crash.

    A step still to run (``next``) is resumed, never given the input again: new input makes
    LangGraph discard an accepted input not yet applied, so the turn's steps would move and the
    calls recorded for them would be made again. With nothing next, the messages tell: a step
    whose tasks all wrote before a kill, its checkpoint lost, shows no ``next`` though the graph
    has not ended (the last message is then a tool result or a tool call)."""
    if state.next:
        return True, None
    messages = state.values.get("messages", [])
    if sum(isinstance(m, HumanMessage) for m in messages) < turn:
        return True, {"messages": [HumanMessage(f"turn {turn}")]}
    last = messages[-1]
    return not (isinstance(last, AIMessage) and not last.tool_calls), None


def converse(app: Any, config: Any, turns: int, durability: str | None) -> str:
    """Run (or go on with) ``turns`` user turns; the last answer."""
    for turn in range(1, turns + 1):
        while True:
            state = app.get_state(config)
            needed, given = next_input(state, turn)
            if not needed:
                break
            app.invoke(given, config, durability=durability)
    return str(app.get_state(config).values["messages"][-1].content)


async def aconverse(app: Any, config: Any, turns: int, durability: str | None) -> str:
    for turn in range(1, turns + 1):
        while True:
            state = await app.aget_state(config)
            needed, given = next_input(state, turn)
            if not needed:
                break
            await app.ainvoke(given, config, durability=durability)
    return str((await app.aget_state(config)).values["messages"][-1].content)


class NeverHits(BaseCache):
    """A model cache that is consulted and never answers: the journal, not a cache, must replay."""

    def __init__(self) -> None:
        self.lookups = 0

    def lookup(self, prompt: str, llm_string: str) -> Any:
        self.lookups += 1

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        pass

    def clear(self, **kwargs: Any) -> None:
        pass
