"""Importing an adapter without its framework raises ImportError naming the extra to install.

Each case runs in a fresh interpreter where the framework's package is hidden
(``sys.modules[name] = None``, as if it were not installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from adapter_checks import SRC

# (adapter module, the framework package hidden, the extra the error must name)
ADAPTERS = [
    ("langgraph", "langgraph.checkpoint.base", "langgraph"),
    ("openai_agents", "agents", "openai-agents"),
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("google_adk", "google.adk", "google-adk"),
    ("agent_framework", "agent_framework", "agent-framework"),
]


@pytest.mark.parametrize(("adapter", "hidden", "extra"), ADAPTERS)
def test_missing_framework_says_how_to_install_it(adapter: str, hidden: str, extra: str) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{hidden!r}] = None
        try:
            import safepoint.adapters.{adapter}
        except ImportError as exc:
            assert "pip install safepoint[{extra}]" in str(exc), exc
        else:
            raise AssertionError("imported without its framework")
        """
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(SRC)}
    )
