"""The agent graph a journaled run actually runs: a clone of the user's, each call wrapped.

For every agent a run reaches — the starting agent, its handoff targets
(also those a ``Handoff`` returns at run time), and agents used as tools —
``cloned`` makes one clone per turn (a memo, so handoff cycles end) whose
``Model`` instance is a ``calls.JournalModel`` and whose function tools go
through ``calls.journaled_tool``. ``configured`` gives the run's
``RunConfig`` a ``calls.JournalProvider`` (models named by a string are
resolved there: turning a name into a model at clone time would change the
SDK's default model settings), wraps a ``RunConfig.model`` instance, and
chains ``call_model_input_filter`` to learn which agent each name-resolved
model call is for (it runs right before every model call).

The user's agents are never changed. A clone leaks out in one place:
``result.last_agent`` is the clone of the agent that answered — compare
agents by name.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agents import Agent, Handoff, RunConfig
from agents.models.interface import Model
from agents.tool import FunctionTool

from safepoint.journal import ToolPolicy

from .calls import JournalModel, JournalProvider, journaled_tool
from .turn import AGENT, Turn

POLICY_ATTRIBUTE = "__safepoint_tool_policy__"  # set by ``non_idempotent`` on a FunctionTool


def cloned(turn: Turn, agent: Agent[Any]) -> Agent[Any]:
    """The turn's journaled clone of ``agent`` (the same clone each time; a clone is its own)."""
    known = turn.clones.get(id(agent))
    if known is not None:
        return known[1]  # type: ignore[no-any-return]
    clone = agent.clone()
    turn.clones[id(agent)] = (agent, clone)  # the original is kept so its id is not reused
    turn.clones[id(clone)] = (clone, clone)
    if isinstance(agent.model, Model) and not isinstance(agent.model, JournalModel):
        clone.model = JournalModel(agent.model, agent.name)
    clone.tools = [
        journaled_tool(tool, agent.name, policy_of(tool)) if isinstance(tool, FunctionTool) else tool
        for tool in agent.tools
    ]
    clone.handoffs = [
        cloned(turn, h) if isinstance(h, Agent) else _handoff(turn, h) if isinstance(h, Handoff) else h
        for h in agent.handoffs
    ]
    return clone


def _handoff(turn: Turn, handoff: Handoff[Any, Any]) -> Handoff[Any, Any]:
    """``handoff`` with the agent it hands off to (chosen at run time) cloned for the turn."""
    invoke = handoff.on_invoke_handoff

    async def on_invoke_handoff(*args: Any, **kwargs: Any) -> Any:
        target = await invoke(*args, **kwargs)
        return cloned(turn, target) if isinstance(target, Agent) else target

    return dataclasses.replace(handoff, on_invoke_handoff=on_invoke_handoff)


def policy_of(tool: FunctionTool) -> ToolPolicy | None:
    policy = getattr(tool, POLICY_ATTRIBUTE, None)
    return policy if isinstance(policy, ToolPolicy) else None


def configured(run_config: RunConfig | dict[str, Any] | None) -> RunConfig:
    """The run's config with the provider, a config-wide model and the input filter journaled."""
    if run_config is None:
        config = RunConfig()
    elif isinstance(run_config, dict):
        config = RunConfig(**run_config)
    else:
        config = run_config
    changes: dict[str, Any] = {}
    if not isinstance(config.model_provider, JournalProvider):
        changes["model_provider"] = JournalProvider(config.model_provider)
    if isinstance(config.model, Model) and not isinstance(config.model, JournalModel):
        changes["model"] = JournalModel(config.model, None)
    if not isinstance(config.call_model_input_filter, NamingFilter):
        changes["call_model_input_filter"] = NamingFilter(config.call_model_input_filter)
    return dataclasses.replace(config, **changes) if changes else config


class NamingFilter:
    """``call_model_input_filter``: note the agent whose model is called next, then run the
    user's own filter (if any) as it was."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, data: Any) -> Any:
        AGENT.set(getattr(data.agent, "name", None))
        if self.inner is None:
            return data.model_data
        result = self.inner(data)
        return await result if inspect.isawaitable(result) else result


def prepared(turn: Turn, agent: Agent[Any], kwargs: dict[str, Any]) -> tuple[Agent[Any], dict[str, Any]]:
    """The agent and run options a journaled ``Runner`` call runs with."""
    return cloned(turn, agent), {**kwargs, "run_config": configured(kwargs.get("run_config"))}
