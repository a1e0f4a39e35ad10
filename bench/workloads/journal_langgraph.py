"""The journal-cost turn on LangGraph (``sections/journal_frameworks.py``): the graph of
``sections/journal_turn.py`` — agent → ToolNode (lookup, charge) → agent — on a
``SafepointSaver``, without and with ``journal=True`` and ``journal_tools()``."""

from __future__ import annotations

from pathlib import Path

from langgraph.prebuilt import ToolNode
from sections.journal_frameworks import App
from sections.journal_turn import _graph, _texts

import safepoint
from safepoint.adapters.langgraph import SafepointSaver, journal_tools


def open_app(folder: Path, journal: bool) -> App:
    folder.mkdir(parents=True, exist_ok=True)
    store = safepoint.open_store(f"sqlite:///{folder / 'store.db'}")
    texts = _texts()
    if journal:
        journaled = SafepointSaver(store, journal=True)
        graph = _graph(journaled, lambda tools: ToolNode(tools, **journal_tools()), texts)
    else:
        graph = _graph(SafepointSaver(store), ToolNode, texts)
    config = {"configurable": {"thread_id": "bench-journal"}}

    def turn(n: int) -> None:
        graph.invoke({"messages": [{"role": "user", "content": f"{n}: {texts['user']}"}]}, config)

    return App(turn, store.close)
