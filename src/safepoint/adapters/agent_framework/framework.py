"""The Agent Framework's names the call journal needs that are not public (1.23), in one place.

Where a release moves one of these, this module carries the difference:

* the superstep a workflow is running (its runner's iteration counter: the
  public ``superstep_started`` event carries it only to the run's consumer);
* an ``AgentExecutor``'s own session (to tell apart two executors that wrap
  one agent object);
* a function call's id, which the function-invocation loop puts in the
  middleware context's ``metadata`` under ``call_id``;
* the name ``WorkflowBuilder`` gives a workflow built without one
  (``WorkflowBuilder-<uuid4>``: new in every process).
"""

from __future__ import annotations

import re
from typing import Any

from agent_framework import AgentExecutor, Workflow

_BUILDER_NAME = re.compile(r"WorkflowBuilder-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")


def named_by_builder(name: str) -> bool:
    """Whether ``name`` is the one the builder made up for a workflow built without a name."""
    return _BUILDER_NAME.fullmatch(name) is not None


def superstep(workflow: Workflow) -> int:
    """The number of the superstep ``workflow`` is running (1 for the first after its entry)."""
    return int(workflow._runner._iteration) + 1


def agent_executors(workflow: Workflow) -> list[AgentExecutor]:
    return [e for e in workflow.executors.values() if isinstance(e, AgentExecutor)]


def session_of(executor: AgentExecutor) -> Any:
    return getattr(executor, "_session", None)


def call_id(metadata: dict[str, Any]) -> str | None:
    found = metadata.get("call_id")
    return found if isinstance(found, str) and found else None
