"""Q1/Q2 details: replay fidelity, graph.stream(stream_mode='messages'), subgraph namespaces, create_react_agent(Send) paths,
ToolNode wrapper signature, re-run within one process (same step, new task id)."""
import sys, os, json, inspect, sqlite3, warnings
sys.path.insert(0, "/tmp/lgjournal")
os.environ["LEDGER"] = "/tmp/lgjournal/ledger-exp4.jsonl"
if os.path.exists(os.environ["LEDGER"]): os.remove(os.environ["LEDGER"])
import journal_proto as jp; jp.install()
import graphapp
from common import PROVIDER_CALLS, ScriptedModel
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.graph import StateGraph, START, END
from langgraph.config import get_config
for f in ("/tmp/lgjournal/exp4.sqlite", "/tmp/lgjournal/exp4.sqlite.journal.jsonl"):
    if os.path.exists(f): os.remove(f)

print("== ToolNode.__init__ signature ==")
print(inspect.signature(ToolNode.__init__))
print("ToolCallRequest fields:", list(ToolCallRequest.__dataclass_fields__))

print("\n== replay fidelity + stream_mode='messages' (invoke inside node goes through the streaming path) ==")
saver = jp.JournalSaver.open("/tmp/lgjournal/exp4.sqlite")
app = graphapp.build(saver, ToolNode(graphapp.TOOLS, wrap_tool_call=jp.wrap_tool_call))
cfg = {"configurable": {"thread_id": "a"}}
streamed = [(m.type, m.content, getattr(m, "tool_call_chunks", None) and [c["id"] for c in m.tool_call_chunks], md["langgraph_node"]) for m, md in app.stream({"messages": [("user", "go")]}, cfg, stream_mode="messages")]
first = app.get_state(cfg).values["messages"]
print("provider calls, first run:", PROVIDER_CALLS); PROVIDER_CALLS.clear()
# Re-run the SAME thread from the step-0 checkpoint in this process: LangGraph forks (new checkpoint/task ids), steps/paths equal.
hist = list(app.get_state_history(cfg))[::-1]
step0 = [s for s in hist if s.metadata["step"] == 0][0]
print("re-executing from step 0 checkpoint (a fork: the journal in the real design must NOT replay into forks; proto does, to show keys match)")
streamed2 = [(m.type, m.content, getattr(m, "tool_call_chunks", None) and [c["id"] for c in m.tool_call_chunks], md["langgraph_node"]) for m, md in app.stream(None, step0.config, stream_mode="messages")]
second = app.get_state(cfg).values["messages"]
print("provider calls, re-execution:", PROVIDER_CALLS, "STATS", jp.STATS)
print("messages streamed (first):", streamed[:3])
print("messages streamed (replay):", streamed2[:3])
for a, b in zip(first, second):
    if a.type == "ai":
        print(" AI first :", "id", a.id, "tool_calls", [t["id"] for t in a.tool_calls], "usage", a.usage_metadata, "resp_md", a.response_metadata)
        print(" AI replay:", "id", b.id, "tool_calls", [t["id"] for t in b.tool_calls], "usage", b.usage_metadata, "resp_md", b.response_metadata)
    if a.type == "tool":
        print(" Tool first/replay:", a.tool_call_id, a.content, "|", b.tool_call_id, b.content, "ids", a.id, b.id)

print("\n== subgraph: what a model call inside a subgraph node sees ==")
seen = []
def inner(state, config):
    seen.append({k: config["metadata"].get(k) for k in ("langgraph_step", "langgraph_node", "langgraph_path", "langgraph_checkpoint_ns", "checkpoint_ns")} | {"cf_ns": config["configurable"].get("checkpoint_ns"), "task_id": config["configurable"].get("__pregel_task_id")[:8]})
    return {"messages": [ScriptedModel().invoke(state["messages"][-1:], config)]}
sub = StateGraph(graphapp.S); sub.add_node("inner", inner); sub.add_edge(START, "inner"); sub = sub.compile()
par = StateGraph(graphapp.S); par.add_node("pre", lambda s: {"messages": [("user", "x")]}); par.add_node("child", sub)
par.add_edge(START, "pre"); par.add_edge("pre", "child"); par = par.compile(checkpointer=jp.JournalSaver.open("/tmp/lgjournal/exp4.sqlite"))
par.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "sub"}})
for s in seen: print(" ", s)
print("  journal key used:", [k for k in saver.journal.entries if '"sub"' in k] or [k for k in jp.JournalSaver.open("/tmp/lgjournal/exp4.sqlite").journal.entries if '"sub"' in k])

print("\n== create_react_agent (prebuilt, version v2 = one Send per tool call): paths seen by wrap_tool_call ==")
from langgraph.prebuilt import create_react_agent
paths = []
def spy(request, execute):
    md = request.runtime.config["metadata"]
    paths.append((request.tool_call["name"], request.tool_call["id"], md["langgraph_step"], md["langgraph_path"], request.runtime.config["configurable"]["checkpoint_ns"][:14]))
    return execute(request)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    agent = create_react_agent(ScriptedModel(), ToolNode(graphapp.TOOLS, wrap_tool_call=spy), checkpointer=jp.JournalSaver.open("/tmp/lgjournal/exp4.sqlite"))
    print("  warnings:", [str(x.message)[:120] for x in w])
agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "cra"}})
for p in paths: print(" ", p)
