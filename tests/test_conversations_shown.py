"""Adapter-written runs read like conversations in ``safepoint show`` and ``diff``.

(Not named ``test_cli_*``: install-checks runs those at the core's lower bounds, in a venv
without the five frameworks this file drives.)

Each of the five adapters writes a run with its real storage: Pydantic AI's
``Agent`` on a ``FunctionModel`` whose tool retries once, an ADK ``Runner``
on an offline model that calls a tool and runs code, a LangGraph graph, an
Agent Framework workflow, and the items an Agents SDK session is handed —
every part type they produce: text, tool calls, tool results, retries,
thinking, files and blobs.
The real executable shows them with roles, tool names and arguments, and the
results' call ids, never as JSON; an unknown part shows its type name; hostile
text shows escaped; ``--json`` stays the stored data.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Annotated, Any

import agents
import pytest
from agent_framework import Content, Executor, Message, WorkflowBuilder, WorkflowContext, handler
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic_ai import Agent, BinaryContent, ImageUrl, ModelRetry
from pydantic_ai import messages as pm
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typing_extensions import TypedDict

import safepoint
import safepoint_exe
from helpers import oa_journal_agent
from safepoint.adapters.agent_framework import SafepointCheckpointStorage
from safepoint.adapters.google_adk import SafepointSessionService
from safepoint.adapters.langgraph import SafepointSaver
from safepoint.adapters.openai_agents import SafepointSession
from safepoint.adapters.pydantic_ai import SafepointConversationStore
from safepoint.conversation import decoder

ESC = "\x1b"
# Stored text that must show as text: a terminal title escape, rich markup, a NUL, a colour, a long tail.
HOSTILE = f"[bold red]markup[/bold red] evil{ESC}]0;pwned\x07 \x00 {ESC}[31mred " + "z" * 5_000


def _pydantic_ai(store: safepoint.Store) -> str:
    calls, tries = [0], [0]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls[0] += 1
        if calls[0] <= 2:  # the tool retries once, so it is called twice
            call = ToolCallPart("get_weather", {"city": "Paris", "note": HOSTILE}, tool_call_id="call_1")
            return ModelResponse(parts=[ThinkingPart("look it up"), call])
        return ModelResponse(parts=[TextPart("It is sunny in Paris.")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def get_weather(city: str, note: str) -> dict[str, Any]:
        tries[0] += 1
        if tries[0] == 1:
            raise ModelRetry("say that again")
        return {"sky": "sunny", "city": city}

    async def chat() -> None:
        prompt = [
            "weather in Paris?",
            BinaryContent(b"\x89PNG", media_type="image/png"),
            ImageUrl("https://e.x/a.png"),
        ]
        result = await agent.run(prompt, conversation=Conversation(conversation_id="chat"))
        await SafepointConversationStore(store).save(result)

    asyncio.run(chat())
    return "pydantic-ai/chat"


class _ScriptedModel(BaseLlm):
    """An offline ADK model: thinks and calls the tool, then runs code and answers."""

    model: str = "scripted"
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls += 1
        if self.calls == 1:
            call = types.FunctionCall(id="fc_1", name="get_weather", args={"city": "Paris", "note": HOSTILE})
            parts = [types.Part(text="look it up", thought=True), types.Part(function_call=call)]
        else:
            parts = [
                types.Part(executable_code=types.ExecutableCode(code="print(21)", language="PYTHON")),
                types.Part(
                    code_execution_result=types.CodeExecutionResult(outcome="OUTCOME_OK", output="21")
                ),
                types.Part(text="It is sunny in Paris."),
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def get_weather(city: str, note: str) -> dict[str, Any]:
    """The weather in a city (the ADK agent's tool)."""
    return {"sky": "sunny"}


def _google_adk(store: safepoint.Store) -> str:
    service = SafepointSessionService(store)
    agent = LlmAgent(name="weather_agent", model=_ScriptedModel(), tools=[get_weather])
    runner = Runner(agent=agent, app_name="app", session_service=service)
    question = types.Content(
        role="user",
        parts=[
            types.Part(text="weather in Paris?"),
            types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
            types.Part(file_data=types.FileData(file_uri="gs://b/f.pdf", mime_type="application/pdf")),
        ],
    )

    async def chat() -> None:
        await service.create_session(app_name="app", user_id="u", session_id="s")
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=question):
            pass

    asyncio.run(chat())
    return "google-adk/app/u/s"


OPENAI_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": json.dumps({"city": "Paris", "note": HOSTILE})},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {"type": "mystery_widget", "payload": {"secret": "not shown"}},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "It is sunny in Paris.", "annotations": []}]},
]  # fmt: skip


def _openai_agents(store: safepoint.Store) -> str:
    session = SafepointSession("chat", store)
    for items in (OPENAI_ITEMS[:1], OPENAI_ITEMS[1:]):  # two steps, for diff
        asyncio.run(session.add_items(items))  # type: ignore[arg-type]  # one item of a type the SDK lacks
    return session.run_id


class _Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _langgraph(store: safepoint.Store) -> str:
    def agent(state: _Chat) -> dict[str, Any]:
        if len(state["messages"]) == 1:
            thinking = [{"type": "reasoning", "reasoning": "look it up"}]
            tool_call = {"name": "get_weather", "args": {"city": "Paris", "note": HOSTILE}, "id": "call_1"}
            return {"messages": [AIMessage(content=thinking, tool_calls=[tool_call])]}  # type: ignore[arg-type]
        return {"messages": [AIMessage(content="It is sunny in Paris.")]}

    def tools(state: _Chat) -> dict[str, Any]:
        return {"messages": [ToolMessage(content="sunny", tool_call_id="call_1", name="get_weather")]}

    builder = StateGraph(_Chat)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=SafepointSaver(store))
    question = [
        {"type": "text", "text": "weather in Paris?"},
        {"type": "image", "url": "https://e.x/a.png", "mime_type": "image/png"},
        {"type": "mystery_block", "payload": {"secret": "not shown"}},
    ]
    graph.invoke({"messages": [HumanMessage(content=question)]}, {"configurable": {"thread_id": "t"}})  # type: ignore[arg-type]
    return "langgraph/t"


AF_CONVERSATION = [
    Message(role="user", contents=[
        Content.from_text("weather in Paris?"), Content.from_uri("https://e.x/a.png", media_type="image/png"),
    ]),
    Message(role="assistant", contents=[
        Content.from_text_reasoning(text="look it up"),
        Content.from_function_call(
            call_id="call_1", name="get_weather", arguments={"city": "Paris", "note": HOSTILE}),
    ]),
    Message(role="tool", contents=[Content.from_function_result(call_id="call_1", result="sunny")]),
    Message(role="assistant", contents=[Content.from_text("It is sunny in Paris.")]),
]  # fmt: skip


class _Turns(Executor):
    """Two supersteps: the conversation's first half, then all of it (a list the journal stores)."""

    def __init__(self) -> None:
        super().__init__(id="chat")

    @handler
    async def take_turn(self, n: int, ctx: WorkflowContext[int, int]) -> None:
        ctx.set_state("conversation", AF_CONVERSATION[: 2 * (n + 1)])
        if n < 1:
            await ctx.send_message(n + 1)
        else:
            await ctx.yield_output(n)


def _agent_framework(store: safepoint.Store) -> str:
    chat = _Turns()
    storage = SafepointCheckpointStorage(store)
    builder = WorkflowBuilder(
        name="support", start_executor=chat, checkpoint_storage=storage, max_iterations=4
    )
    asyncio.run(builder.add_edge(chat, chat).build().run(0))
    return "agent-framework/support"


WRITERS = {
    "pydantic-ai": _pydantic_ai,
    "google-adk": _google_adk,
    "openai-agents": _openai_agents,
    "langgraph": _langgraph,
    "agent-framework": _agent_framework,
}
# A tool call's hostile argument: its control characters escaped as JSON escapes them, its markup as text.
CALL = 'call get_weather(city="Paris", note="[bold red]markup[/bold red] evil\\u001b'
THOUGHT_CALL = "(thinking) look it up · " + CALL
# What each framework's conversation shows: a role, then the words of its message, in order.
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "pydantic-ai": [
        ("user", "weather in Paris? · (file image/png, 4 bytes) · (image image/png at https://e.x/a.png)"),
        ("assistant", THOUGHT_CALL),
        ("tool", "error result of get_weather [call_1]: say that again (retried)"),
        ("assistant", "(thinking) look it up · call get_weather("),
        ("tool", 'result of get_weather [call_1]: city="Paris", sky="sunny"'),
        ("assistant", "It is sunny in Paris."),
    ],
    "google-adk": [
        ("user", "weather in Paris? · (blob image/png, 4 bytes) · (file application/pdf at gs://b/f.pdf)"),
        ("assistant (weather_agent)", THOUGHT_CALL),
        ("tool (weather_agent)", 'result of get_weather [fc_1]: sky="sunny"'),
        (
            "assistant (weather_agent)",
            "(code) print(21) · code result OUTCOME_OK: 21 · It is sunny in Paris.",
        ),
    ],
    "openai-agents": [
        ("user", "weather in Paris?"),
        ("assistant", "(thinking) look it up"),
        ("assistant", CALL),
        ("tool", "result [call_1]: sunny"),
        ("-", "<mystery_widget>"),
        ("assistant", "It is sunny in Paris."),
    ],
    "langgraph": [
        ("user", "weather in Paris? · (image image/png at https://e.x/a.png) · <mystery_block>"),
        ("assistant", THOUGHT_CALL),
        ("tool", "result of get_weather [call_1]: sunny"),
        ("assistant", "It is sunny in Paris."),
    ],
    "agent-framework": [
        ("user", "weather in Paris? · (file image/png at https://e.x/a.png)"),
        ("assistant", THOUGHT_CALL),
        ("tool", "result [call_1]: sunny"),
        ("assistant", "It is sunny in Paris."),
    ],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """One store holding a run written by each adapter: its URL and each framework's run id."""
    url = f"sqlite:///{tmp_path_factory.mktemp('runs') / 'state.db'}"
    with safepoint.open_store(url) as store:
        return url, {name: write(store) for name, write in WRITERS.items()}


def sp(tmp_path: Path, *args: str) -> str:
    result = safepoint_exe.sp(tmp_path, *args, columns=12_000)  # one table row per line
    assert result.returncode == 0, result.stderr
    return result.stdout


def _rows(output: str) -> list[tuple[str, str]]:
    """The messages table of ``show``: (role, content) per row, after the summary table."""
    table = re.split(r"last \d+ of \d+ messages *\n", output)[-1]
    rows = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) == 3 and cells[0].isdigit():
            rows.append((cells[1], cells[2]))
    return rows


@pytest.mark.parametrize("framework", list(WRITERS))
def test_show_reads_each_framework_as_a_conversation(
    framework: str, written: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, runs = written
    output = sp(tmp_path, "show", runs[framework], "--store", url, "--messages", "50")
    rows = [row for row in _rows(output) if row[0] != "checkpoint"]  # the workflow's own saves
    expected = EXPECTED[framework]
    assert [role for role, _ in rows] == [role for role, _ in expected], rows
    for (_, text), (_, start) in zip(rows, expected, strict=True):
        assert text.startswith(start), (text, start)
        assert '{"' not in text, text  # never a part's JSON
    for hidden in (ESC, "\x07", "\x00"):
        assert hidden not in output
    assert "[bold red]markup[/bold red]" in output  # markup shown as the text it is, not applied
    assert "z" * 5_000 not in output  # long text cut
    assert "not shown" not in output  # an unknown part by its type name only


@pytest.mark.parametrize("framework", list(WRITERS))
def test_json_output_stays_the_stored_data(
    framework: str, written: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, runs = written
    shown = json.loads(sp(tmp_path, "show", runs[framework], "--store", url, "--json"))
    with safepoint.open_store(url) as store:
        stored = store.load(runs[framework], migrate=False).to_dict()
    assert shown["messages"] == json.loads(json.dumps(stored["messages"]))


def test_diff_shows_the_added_messages_in_the_framework_terms(
    written: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, runs = written
    output = sp(tmp_path, "diff", runs["openai-agents"], "0", "--store", url)
    assert "+ assistant: call get_weather(" in output
    assert "+ tool: result [call_1]: sunny" in output
    assert "+ -: <mystery_widget>" in output
    assert ESC not in output


# Parts no fake agent produces, as each framework stores them: each shows its type name, not its JSON.
UNKNOWN_PARTS = {
    "pydantic-ai": ("new-part", {"kind": "message", "message": {"kind": "response", "parts": [
        {"part_kind": "new-part", "x": 1}]}}),
    "google-adk": ("video_metadata", {"author": "a", "content": {"role": "model", "parts": [
        {"video_metadata": {"fps": 2}}]}}),
    "openai-agents": ("new_item", {"type": "new_item", "x": {"y": 1}}),
    "langgraph": ("new_block", {"type": "ai", "content": [{"type": "new_block", "x": 1}]}),
    "agent-framework": ("usage", {"op": "item", "v": {"$af": "object", "v": {"role": "assistant",
        "contents": [{"type": "usage", "x": 1}]}}}),
}  # fmt: skip


@pytest.mark.parametrize("framework", list(UNKNOWN_PARTS))
def test_an_unknown_part_shows_its_type_name(framework: str) -> None:
    read = decoder(framework)
    assert read is not None
    name, message = UNKNOWN_PARTS[framework]
    assert f"<{name}>" in read(message).text
    assert "{" not in read(message).text


def test_history_of_an_adapter_run(written: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, runs = written
    output = sp(tmp_path, "history", runs["google-adk"], "--store", url)
    assert "history of google-adk/app/u/s (5 checkpoints)" in output


def _pydantic_ai_json(message: Any) -> dict[str, Any]:
    """A message as the Pydantic AI adapter stores it: Pydantic AI's own JSON, in an entry."""
    return {"kind": "message", "message": ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]}


def test_pydantic_ai_parts_no_fake_agent_produces() -> None:
    """System prompts, instructions, retry prompts, files, native tools: words, no JSON."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetryPromptPart is deprecated, and still stored by older runs
        request = pm.ModelRequest(
            parts=[
                pm.SystemPromptPart("be brief"),
                pm.InstructionPart("use tools"),
                pm.RetryPromptPart(content="bad args", tool_name="get_weather", tool_call_id="c2"),
                pm.UserPromptPart(["hi", pm.DocumentUrl("https://e.x/d.pdf")]),
            ]
        )
    response = pm.ModelResponse(
        parts=[
            pm.FilePart(content=pm.BinaryContent(b"abc", media_type="image/png")),
            pm.NativeToolCallPart("web_search", {"query": "x"}, tool_call_id="b1"),
            pm.NativeToolReturnPart("web_search", {"hits": 1}, tool_call_id="b1"),
        ]
    )
    read = decoder("pydantic-ai")
    assert read is not None
    asked, answered = read(_pydantic_ai_json(request)), read(_pydantic_ai_json(response))
    assert asked.parts == (
        "(system) be brief",
        "(instructions) use tools",
        "retry [c2]: bad args",
        "hi · (document application/pdf at https://e.x/d.pdf)",
    )
    assert answered.role == "assistant"
    assert answered.parts == (
        "(file image/png, 3 bytes)",
        'call web_search(query="x") [b1]',
        "result of web_search [b1]: hits=1",
    )


def test_an_agents_sdk_run_with_parallel_tools_an_agent_tool_and_a_handoff(tmp_path: Path) -> None:
    """The Agents SDK's own items from a real ``Runner`` (the journal tests' scripted app)."""
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    agent, config = oa_journal_agent.build()
    with safepoint.open_store(url) as store:
        session = SafepointSession("support", store)
        asyncio.run(agents.Runner.run(agent, "charge me please", session=session, run_config=config))
    output = sp(tmp_path, "show", session.run_id, "--store", url, "--messages", "50")
    rows = _rows(output)
    assert [role for role, _ in rows] == [
        "user",
        *["assistant", "assistant", "tool", "tool"],
        *["assistant", "tool"] * 3,
        "assistant",
    ]
    texts = [text for _, text in rows]
    assert texts[1].startswith('call lookup(q="a") [triage-0-0-')
    assert texts[2].startswith("call charge(amount=5) [triage-0-1-")
    assert texts[3].startswith("result [triage-0-0-")
    assert texts[3].endswith("]: found:a")
    assert texts[7].startswith("call transfer_to_specialist() [")
    assert texts[8].endswith(']: assistant="specialist"')  # the handoff's JSON answer, as words
    assert texts[-1] == oa_journal_agent.ANSWER
    for text in texts:
        assert '{"' not in text, text


def test_huge_and_deep_values_are_cut_before_they_are_built() -> None:
    """A megabyte argument or a value nested 50 deep makes a few thousand characters, not its size."""
    read = decoder("openai-agents")
    assert read is not None
    wide = {f"k{i}": {f"j{j}": ["x" * 5_000] * 50 for j in range(50)} for i in range(50)}
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(50):
        cur["n"] = {}
        cur = cur["n"]
    for arguments in (wide, deep, "y" * 1_000_000):
        text = read({"type": "function_call", "name": "f", "call_id": "c", "arguments": arguments}).text
        assert len(text) < 6_000
        assert text.startswith("call f(")


def test_a_langgraph_message_channel_of_plain_json() -> None:
    """LangGraph's JSON message format holds the user's dicts: chat messages or Responses API items."""
    read = decoder("langgraph")
    assert read is not None
    item = {"type": "function_call", "name": "f", "arguments": '{"a": 1}', "call_id": "c"}
    assert read(item) == read({"type": "function_call", "name": "f", "arguments": {"a": 1}, "call_id": "c"})
    assert read(item).text == "call f(a=1) [c]"
    assert read({"role": "user", "content": "hi"}).text == "hi"
    assert read({"$typed": ["pickle", "..."]}).text == "<pickle>"
    assert read(5).text == "5"
