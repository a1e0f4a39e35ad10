"""The LangGraph adapter's old flat modules (``safepoint.adapters.langgraph_*``) still import, warn, and
hand out the very objects of the package that replaced them (``safepoint.adapters.langgraph``)."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = {
    "langgraph_codec": ["codec"],
    "langgraph_flows": ["writes", "reads", "steps"],
    "langgraph_layout": ["layout"],
    "langgraph_memo": ["memo"],
    "langgraph_msgpack": ["msgpack"],
    "langgraph_reads": ["reads"],
    "langgraph_steps": ["steps"],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_warns_and_re_exports_the_new_names(old: str) -> None:
    """Importing an old path raises a DeprecationWarning naming the new one; each name is the new object."""
    sys.modules.pop(f"safepoint.adapters.{old}", None)
    with pytest.warns(DeprecationWarning, match=rf"safepoint\.adapters\.langgraph\.{MOVED[old][0]}"):
        stub = importlib.import_module(f"safepoint.adapters.{old}")
    new = [importlib.import_module(f"safepoint.adapters.langgraph.{name}") for name in MOVED[old]]
    assert stub.__all__
    for name in stub.__all__:
        assert any(getattr(module, name, None) is getattr(stub, name) for module in new), name
