"""``safepoint demo``: an agent run SIGKILLed mid-run, resumed in a fresh process, finished exactly.

``script.py`` runs and narrates it, ``agent.py`` is the agent it kills (also the crash-kit
tests' workload), ``summary.py`` the closing table. ``python -m safepoint.demo [STORE_URL]``
and the CLI's ``safepoint demo`` both call ``main``.
"""

from __future__ import annotations

from .script import main

__all__ = ["main"]
