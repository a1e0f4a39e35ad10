"""A minimal call journal (JSON file stand-in for the store) on approach E, replaying models and tools."""
from __future__ import annotations

import contextvars, dataclasses, hashlib, json, os
from typing import Any

from pydantic import TypeAdapter
from openai.types.responses import ResponseOutputItem, ResponseCompletedEvent, Response
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.usage import serialize_usage, deserialize_usage
from agents.run import AgentRunner, set_default_agent_runner
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from agents.models.interface import Model

import intercept
from intercept import JModel, WrapProvider, clone_run_args, ACTIVE

OUTPUT = TypeAdapter(ResponseOutputItem)
STATS = {"replayed_model": 0, "called_model": 0, "replayed_tool": 0, "called_tool": 0, "reconciled": 0}
NON_IDEMPOTENT = {"charge"}
CUR_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("cur_agent", default=None)
PATH: contextvars.ContextVar[str] = contextvars.ContextVar("path", default="")


class FileJournal:
    def __init__(self, path):
        self.path = path
        self.d = json.load(open(path)) if os.path.exists(path) else {}
    def get(self, k): return self.d.get(k)
    def put(self, k, v):  # durable before returning (stand-in for one transaction per record)
        self.d[k] = v
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.d, f); f.flush(); os.fsync(f.fileno())
        os.replace(tmp, self.path)


def dump_response(r: ModelResponse) -> dict:
    return {"output": [o.model_dump(mode="json", exclude_unset=True) for o in r.output], "usage": serialize_usage(r.usage),
            "response_id": r.response_id, "request_id": r.request_id}


def load_response(d: dict) -> ModelResponse:
    return ModelResponse(output=[OUTPUT.validate_python(o) for o in d["output"]],
                         usage=deserialize_usage(d["usage"]), response_id=d["response_id"],
                         request_id=d.get("request_id"))


def digest(args, kwargs) -> str:
    inp = kwargs.get("input", args[1] if len(args) > 1 else None)
    norm = [i if isinstance(i, (dict, str)) else i.model_dump(mode="json") for i in (inp if isinstance(inp, list) else [inp])]
    return hashlib.sha256(json.dumps([kwargs.get("system_instructions", args[0] if args else None), norm],
                                     sort_keys=True, default=str).encode()).hexdigest()[:16]


def state():
    return ACTIVE.get()


async def on_call(model: JModel, args, kwargs):
    st = state()
    agent = model.label.split(":", 1)[1] if model.label.startswith("instance:") else CUR_AGENT.get()
    path = PATH.get()
    n = st["order"].setdefault((path, agent), 0); st["order"][(path, agent)] = n + 1
    key = f"{st['session']}|t{st['turn']}|{path}|{agent}|model#{n}"
    dg = digest(args, kwargs)
    rec = st["journal"].get(key)
    if rec and rec["digest"] == dg:
        STATS["replayed_model"] += 1; st["keys"].append(("replay", key))
        return load_response(rec["response"])
    STATS["called_model"] += 1; st["keys"].append(("call", key))
    r = await model.inner.get_response(*args, **kwargs)
    st["journal"].put(key, {"digest": dg, "response": dump_response(r)})
    return r


class _Stream:  # on_call.stream: replay as one ResponseCompletedEvent, record on completion
    async def __call__(self, *a): return await on_call(*a)
    def stream(self, model, args, kwargs):
        async def gen():
            st = state(); agent = model.label.split(":", 1)[1] if model.label.startswith("instance:") else CUR_AGENT.get()
            path = PATH.get(); n = st["order"].setdefault((path, agent), 0); st["order"][(path, agent)] = n + 1
            key = f"{st['session']}|t{st['turn']}|{path}|{agent}|model#{n}"; dg = digest(args, kwargs)
            rec = st["journal"].get(key)
            if rec and rec["digest"] == dg:
                STATS["replayed_model"] += 1; st["keys"].append(("replay", key))
                yield ResponseCompletedEvent(type="response.completed", sequence_number=0,
                                             response=Response.model_validate(rec["response"]))
                return
            STATS["called_model"] += 1; st["keys"].append(("call", key))
            async for ev in model.inner.stream_response(*args, **kwargs):
                if isinstance(ev, ResponseCompletedEvent):
                    st["journal"].put(key, {"digest": dg, "response": ev.response.model_dump(mode="json", exclude_unset=True)})
                yield ev
        return gen()
ON_CALL = _Stream()


async def on_tool(agent_name, tool: FunctionTool, inner, ctx: ToolContext, input_json: str):
    st = state()
    path = PATH.get()
    key = f"{st['session']}|t{st['turn']}|{path}|{agent_name}|tool:{tool.name}|{ctx.tool_call_id}"
    rec = st["journal"].get(key)
    if rec and "result" in rec:
        STATS["replayed_tool"] += 1; st["keys"].append(("replay", key))
        return rec["result"]
    if rec and "intent" in rec:  # in flight at the crash -> reconcile
        STATS["reconciled"] += 1; st["keys"].append(("reconcile", key))
        result = st["reconcile"](key, tool.name, input_json)
    else:
        if tool.name in NON_IDEMPOTENT:
            st["journal"].put(key, {"intent": input_json})
        STATS["called_tool"] += 1; st["keys"].append(("call", key))
        tok = PATH.set(f"{path}/{tool.name}:{ctx.tool_call_id}")  # nested agent-as-tool runs get their own path
        try:
            result = await inner(ctx, input_json)
        finally:
            PATH.reset(tok)
    st["journal"].put(key, {"result": result if isinstance(result, (str, int, float, bool, type(None))) else str(result)})
    return result


async def remember_agent(data):  # RunConfig.call_model_input_filter: runs right before every model call
    CUR_AGENT.set(data.agent.name)
    return data.model_data


class JournalRunner(AgentRunner):
    def _args(self, agent, kw):
        rc = kw.get("run_config") or RunConfig()
        if rc.call_model_input_filter is None:
            rc = dataclasses.replace(rc, call_model_input_filter=remember_agent)
        a, kw["run_config"] = clone_run_args(agent, rc, ON_CALL, on_tool)
        return a
    async def run(self, starting_agent, input, **kw):
        if state() is None:
            return await super().run(starting_agent, input, **kw)
        return await super().run(self._args(starting_agent, kw), input, **kw)
    def run_streamed(self, starting_agent, input, **kw):
        if state() is None:
            return super().run_streamed(starting_agent, input, **kw)
        return super().run_streamed(self._args(starting_agent, kw), input, **kw)


set_default_agent_runner(JournalRunner())


async def journaled_run(journal: FileJournal, agent, input, *, session, reconcile, streamed=False, **kw):
    """The user-facing one line: `await journaled_run(journal, agent, input, session=session)`."""
    # turn key: the journal's own counter; an unfinished turn with the same input is resumed
    meta = journal.get(f"{session.session_id}|turns") or {"n": 0, "open": None}
    dg = hashlib.sha256(json.dumps(input, default=str).encode()).hexdigest()[:16]
    if meta["open"] and meta["open"]["digest"] == dg:
        turn = meta["open"]["turn"]
        # resume: the SDK saved the partial turn to the session before the crash -> roll it back
        popped = 0
        while len(await session.get_items()) > meta["open"]["base"]:
            await session.pop_item(); popped += 1
        print(f"[journal] resuming turn {turn}: rolled back {popped} session items to base {meta['open']['base']}")
    else:
        turn = meta["n"] + 1
        meta = {"n": turn, "open": {"turn": turn, "digest": dg, "base": len(await session.get_items())}}
        journal.put(f"{session.session_id}|turns", meta)
    st = {"journal": journal, "session": session.session_id, "turn": turn, "order": {}, "keys": [], "reconcile": reconcile}
    tok = ACTIVE.set(st)
    try:
        if streamed:
            r = Runner.run_streamed(agent, input, session=session, **kw)
            async for _ in r.stream_events():
                pass
        else:
            r = await Runner.run(agent, input, session=session, **kw)
    finally:
        ACTIVE.reset(tok)
    journal.put(f"{session.session_id}|turns", {"n": turn, "open": None})
    return r, st
