"""The Agents SDK's names the call journal needs that its public API does not offer, in one room.

The journal sees every model and tool call of a run only through a default
``AgentRunner`` (``agents.run.set_default_agent_runner``): ``Runner.run``,
``run_sync`` and ``run_streamed`` look the default up at call time, and so
does the nested ``Runner.run`` an ``agent.as_tool()`` makes, which closes over
the original agent and could not be reached by cloning the graph alone
(docs/design/call-journal.md). ``AgentRunner`` is documented as experimental;
the other names here are private. All exist from openai-agents 0.19.0 (the
extra's lower bound) to the locked version; ``tests/test_journal_openai_agents.py``
pins them, and ``make install-checks`` runs it at the lower bound.
"""

from __future__ import annotations

from typing import Any

from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner
from agents.tool import FunctionTool, ValidToolOutputPydanticModelsTypeAdapter

__all__ = [
    "TOOL_OUTPUT",
    "AgentRunner",
    "get_default_agent_runner",
    "is_agent_tool",
    "set_default_agent_runner",
]

# Validates the SDK's structured tool outputs (text, image, file) from their JSON form.
TOOL_OUTPUT: Any = ValidToolOutputPydanticModelsTypeAdapter


def is_agent_tool(tool: FunctionTool) -> bool:
    """Whether ``tool`` is an ``agent.as_tool()``: its result is the nested run's answer, made of
    calls the journal records one by one, so the tool itself is not recorded (``calls.py``)."""
    return bool(getattr(tool, "_is_agent_tool", False))
