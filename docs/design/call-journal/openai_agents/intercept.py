"""The interception candidates, each recording what it sees into SEEN."""
from __future__ import annotations

import contextvars, copy, dataclasses
from typing import Any

from agents import Agent, Handoff, RunHooks, RunConfig
from agents.models.interface import Model, ModelProvider
from agents.tool import FunctionTool
from agents.tool_context import ToolContext

SEEN: list[tuple] = []


class JModel(Model):
    """Delegating wrapper; `on_call(kind, model, kwargs, call)` decides (replay or call)."""
    def __init__(self, inner: Model, label: str, on_call=None):
        self.inner, self.label, self.on_call = inner, label, on_call
    async def get_response(self, *args, **kwargs):
        SEEN.append((self.label, "model"))
        if self.on_call:
            return await self.on_call(self, args, kwargs)
        return await self.inner.get_response(*args, **kwargs)
    def stream_response(self, *args, **kwargs):
        SEEN.append((self.label, "model-stream"))
        if self.on_call and hasattr(self.on_call, "stream"):
            return self.on_call.stream(self, args, kwargs)
        return self.inner.stream_response(*args, **kwargs)
    def get_retry_advice(self, request):
        return self.inner.get_retry_advice(request)
    async def close(self):
        await self.inner.close()


class WrapProvider(ModelProvider):
    def __init__(self, inner: ModelProvider, label="provider", on_call=None):
        self.inner, self.label, self.on_call = inner, label, on_call
    def get_model(self, name):
        m = self.inner.get_model(name)
        return m if isinstance(m, JModel) else JModel(m, f"{self.label}:{name}", self.on_call)


# --- B: run hooks
class SeeHooks(RunHooks):
    async def on_llm_start(self, context, agent, system_prompt, input_items):
        SEEN.append((agent.name, "hook-llm"))
    async def on_tool_start(self, context, agent, tool):
        SEEN.append((agent.name, "hook-tool", tool.name, getattr(context, "tool_call_id", None)))


# --- C: clone the graph (models + tools + handoffs), DBOS-style but with a memo (handoff cycles)
def wrap_tool(tool: FunctionTool, agent_name: str, on_tool=None) -> FunctionTool:
    inner = tool.on_invoke_tool
    async def invoke(ctx, input_json):  # unannotated: the SDK then passes the full ToolContext
        SEEN.append((agent_name, "tool", tool.name, getattr(ctx, "tool_call_id", None)))
        if on_tool:
            return await on_tool(agent_name, tool, inner, ctx, input_json)
        return await inner(ctx, input_json)
    return dataclasses.replace(tool, on_invoke_tool=invoke)


def wrap_agent(agent: Agent, on_call=None, on_tool=None, seen=None) -> Agent:
    seen = {} if seen is None else seen
    if id(agent) in seen:
        return seen[id(agent)]
    clone = agent.clone()
    seen[id(agent)] = clone
    if isinstance(agent.model, Model) and not isinstance(agent.model, JModel):
        clone.model = JModel(agent.model, f"instance:{agent.name}", on_call)
    clone.tools = [wrap_tool(t, agent.name, on_tool) if isinstance(t, FunctionTool) else t for t in agent.tools]
    hs = []
    for h in agent.handoffs:
        if isinstance(h, Agent):
            hs.append(wrap_agent(h, on_call, on_tool, seen))
        else:
            orig = h.on_invoke_handoff
            async def inv(*a, _orig=orig, **k):
                return wrap_agent(await _orig(*a, **k), on_call, on_tool, seen)
            hs.append(dataclasses.replace(h, on_invoke_handoff=inv))
    clone.handoffs = hs
    return clone


def clone_run_args(agent, run_config: RunConfig | None, on_call=None, on_tool=None):
    rc = run_config or RunConfig()
    if not isinstance(rc.model_provider, WrapProvider):
        rc = dataclasses.replace(rc, model_provider=WrapProvider(rc.model_provider, on_call=on_call))
    return wrap_agent(agent, on_call, on_tool), rc


# --- E: a journal-aware AgentRunner installed as the SDK default (nested agent.as_tool runs use it)
from agents.run import AgentRunner, set_default_agent_runner, get_default_agent_runner
ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("journal_active", default=None)


class JournalRunner(AgentRunner):
    def __init__(self, on_call=None, on_tool=None):
        super().__init__()
        self.on_call, self.on_tool = on_call, on_tool
    async def run(self, starting_agent, input, **kw):
        if ACTIVE.get() is None:
            return await super().run(starting_agent, input, **kw)
        agent, kw["run_config"] = clone_run_args(starting_agent, kw.get("run_config"), self.on_call, self.on_tool)
        return await super().run(agent, input, **kw)
    def run_streamed(self, starting_agent, input, **kw):
        if ACTIVE.get() is None:
            return super().run_streamed(starting_agent, input, **kw)
        agent, kw["run_config"] = clone_run_args(starting_agent, kw.get("run_config"), self.on_call, self.on_tool)
        return super().run_streamed(agent, input, **kw)
    # run_sync: AgentRunner.run_sync drives self.run? (checked in exp1)


# --- D: internals: contextvar-scoped patch of the model resolver and the function-tool invoker
import agents.run_internal.run_loop as _run_loop
import agents.run_internal.tool_execution as _tool_exec
_orig_get_model = _run_loop.get_model
_orig_invoke = _tool_exec._invoke_function_tool_with_metadata


def _patched_get_model(agent, run_config):
    m = _orig_get_model(agent, run_config)
    st = ACTIVE.get()
    if st is None or isinstance(m, JModel):
        return m
    return JModel(m, f"patched:{agent.name}", st.get("on_call"))


async def _patched_invoke(*, function_tool, context, arguments):
    st = ACTIVE.get()
    if st is not None:
        SEEN.append((getattr(context.agent, "name", None), "patched-tool", function_tool.name, context.tool_call_id))
    return await _orig_invoke(function_tool=function_tool, context=context, arguments=arguments)


def install_patches():
    _run_loop.get_model = _patched_get_model
    _tool_exec._invoke_function_tool_with_metadata = _patched_invoke
