"""Preloaded by the ADK journal crash tests' forkserver: one offline turn, run at import.

ADK imports most of what a run needs only when it first runs (its flows,
auth and workflow modules, the HTTP stack behind them): about a second per
process. Running one turn here, in the forkserver, leaves those modules
imported in every child it forks, so a killed-and-resumed process pays only
for its own turns.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path

from helpers import adk_journal_child


def _warm() -> None:
    logging.getLogger("google_adk").setLevel(logging.CRITICAL)  # the app's warnings, not ours
    with tempfile.TemporaryDirectory() as work:
        store = adk_journal_child.open_store(f"sqlite:///{Path(work) / 'state.db'}")
        for stream in (False, True):
            asyncio.run(adk_journal_child.run_turns(store, True, 1, stream=stream))
        store.close()


_warm()
