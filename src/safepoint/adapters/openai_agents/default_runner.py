"""The SDK's default runner, journal-aware: every ``Runner.run``/``run_sync``/``run_streamed`` of a
journaled turn — the nested ones an ``agent.as_tool()`` makes included — runs the turn's clone.

``Runner.run`` and its siblings look the default runner up when called, and
an agent used as a tool runs its agent with ``Runner.run`` too, on the
original agent it closes over; so the default runner is the one place that
sees every run of a turn (docs/design/call-journal.md, approach E).
``install`` puts a ``JournalRunner`` in front of whatever runner the app set
(and again if the app sets another later); outside a journaled turn it hands
every call to that runner unchanged.
"""

from __future__ import annotations

from typing import Any

from .graph import prepared
from .sdk import AgentRunner, get_default_agent_runner, set_default_agent_runner
from .turn import ACTIVE


class JournalRunner(AgentRunner):
    """Runs a journaled turn's clone of the agent graph; any other run as ``inner`` would."""

    def __init__(self, inner: AgentRunner) -> None:
        super().__init__()
        self.inner = inner

    def _prepared(self, agent: Any, input: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        turn = ACTIVE.get()
        if turn is None or not isinstance(input, str | list):  # a RunState resumes as the SDK saved it
            return agent, kwargs
        return prepared(turn, agent, kwargs)

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        agent, options = self._prepared(starting_agent, input, kwargs)
        own_provider = options is not kwargs and kwargs.get("run_config") is None
        try:
            return await self.inner.run(agent, input, **options)
        finally:
            if own_provider:  # the SDK closes a provider it made; this one was made here
                await options["run_config"].model_provider.aclose()

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        agent, options = self._prepared(starting_agent, input, kwargs)
        return self.inner.run_sync(agent, input, **options)

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        agent, options = self._prepared(starting_agent, input, kwargs)
        return self.inner.run_streamed(agent, input, **options)


def install() -> None:
    """Make the SDK's default runner journal-aware, in front of the runner the app set."""
    current = get_default_agent_runner()
    if not isinstance(current, JournalRunner):
        set_default_agent_runner(JournalRunner(current))
