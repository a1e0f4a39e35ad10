"""A tiny agent graph (StateGraph + ToolNode), logging to a ledger file what every model/tool call sees."""
import json, os, signal, sys, asyncio
sys.path.insert(0, "/tmp/lgjournal")
from typing import Annotated, TypedDict
from common import ScriptedModel
from langchain_core.tools import tool
from langchain_core.messages import AnyMessage
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.config import get_config

LEDGER = os.environ.get("LEDGER", "/tmp/lgjournal/ledger.jsonl")

def _where(cfg):
    md, cf = cfg.get("metadata", {}), cfg.get("configurable", {})
    return {k: md.get(k) for k in ("langgraph_step", "langgraph_node", "langgraph_path", "langgraph_triggers",
                                   "langgraph_checkpoint_ns")} | {
        "thread_id": cf.get("thread_id"), "checkpoint_ns": cf.get("checkpoint_ns"),
        "checkpoint_id": cf.get("checkpoint_id"), "task_id": cf.get("__pregel_task_id")}

def log(kind, **kw):
    with open(LEDGER, "a") as f:
        f.write(json.dumps({"kind": kind, "pid": os.getpid(), **kw}, default=str) + "\n")

def maybe_crash(point):
    if os.environ.get("CRASH_AT") == point and not os.path.exists(LEDGER + ".crashed"):
        open(LEDGER + ".crashed", "w").close()
        log("CRASH", point=point)
        os.kill(os.getpid(), signal.SIGKILL)

@tool
def pay(amount: int) -> str:
    """Non-idempotent payment."""
    log("EFFECT pay", amount=amount, **_where(get_config()))
    maybe_crash("after_pay")
    return f"paid {amount}"

@tool
def lookup(q: str) -> str:
    """Idempotent lookup."""
    log("tool lookup", **_where(get_config()))
    return f"found {q}"

TOOLS = [pay, lookup]
model = ScriptedModel()

def agent(state, config):
    n_ai = sum(m.type == "ai" for m in state["messages"])
    log("model call", n_ai_before=n_ai, **_where(config))
    if n_ai == 1:
        maybe_crash("in_model2")
    mode = os.environ.get("MODE", "invoke")
    bound = model.bind_tools(TOOLS)
    if mode == "invoke":
        msg = bound.invoke(state["messages"], config)
    elif mode == "stream":
        msg = None
        for ch in bound.stream(state["messages"], config):
            msg = ch if msg is None else msg + ch
    return {"messages": [msg]}

async def aagent(state, config):
    n_ai = sum(m.type == "ai" for m in state["messages"])
    log("model call", n_ai_before=n_ai, **_where(config))
    if n_ai == 1:
        maybe_crash("in_model2")
    bound = model.bind_tools(TOOLS)
    if os.environ.get("MODE") == "astream":
        msg = None
        async for ch in bound.astream(state["messages"], config):
            msg = ch if msg is None else msg + ch
    else:
        msg = await bound.ainvoke(state["messages"], config)
    return {"messages": [msg]}

class S(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]

def build(checkpointer, tool_node=None, use_async=False):
    g = StateGraph(S)
    g.add_node("agent", aagent if use_async else agent)
    g.add_node("tools", tool_node or ToolNode(TOOLS))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)
