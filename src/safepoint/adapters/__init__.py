"""Framework adapters: safepoint's store behind the interfaces agent frameworks already use.

* ``safepoint.adapters.langgraph.SafepointSaver`` — a LangGraph checkpointer
  (``pip install safepoint[langgraph]``).
* ``safepoint.adapters.openai_agents.SafepointSession`` — an OpenAI Agents SDK
  session, and ``CallJournal``, which replays a turn's recorded model and tool
  calls after a crash (``pip install safepoint[openai-agents]``).

Each lives in its own module or package and imports its
framework only when imported itself: ``import safepoint`` (and this package)
never loads a framework. Their logic is written once as flows
(``safepoint.flow``); ``runner.py`` runs them on a sync or async store, and
``cache.py`` keeps each run's last checkpoint for incremental saves.
"""

from __future__ import annotations

__all__: list[str] = []


def missing_framework(adapter: str, framework: str, extra: str) -> ImportError:
    """The error an adapter module raises when its framework is not installed: which extra installs it."""
    return ImportError(f"{adapter} needs {framework}: pip install safepoint[{extra}]")
