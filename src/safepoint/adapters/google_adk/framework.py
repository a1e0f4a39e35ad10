"""The ADK names the call journal relies on that ADK does not promise to keep.

Everything version-specific the journal touches is here, so a release that
moves one of them changes this module alone (``tests/test_journal_google_adk.py``
checks each is where the journal expects it):

- ``invocation_of``: a callback's or tool's context reaches its invocation
  (``Context.get_invocation_context()``, public in 2.x; ``_invocation_context``
  before it) — for the session, the session service and the branch;
- ``CLIENT_ID_PREFIX``: the prefix ADK gives the ids it makes up for function
  calls a model left without one (``functions.AF_FUNCTION_CALL_ID_PREFIX``).
  ADK strips such ids before a request goes to the model, so the journal's own
  ids for those calls (stable across a resume, where ADK's are random) carry it;
- ``AFTER_TIMESTAMP_FILTERS``: how ADK's in-memory session service reads
  ``GetSessionConfig(after_timestamp=...)``, which the session service matches:
  through 2.14, after ``num_recent_events``, the events after the newest one
  older than it (a tail); from 2.15, first, every event at or after it (a filter).
"""

from __future__ import annotations

import re
from typing import Any

from google.adk.flows.llm_flows import functions as _functions
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.version import __version__ as VERSION

__all__ = ["AFTER_TIMESTAMP_FILTERS", "CLIENT_ID_PREFIX", "VERSION", "BasePlugin", "invocation_of"]

CLIENT_ID_PREFIX: str = getattr(_functions, "AF_FUNCTION_CALL_ID_PREFIX", "adk-")


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as ``2.15.0`` or ``2.0.0b1``."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else (0, 0)


AFTER_TIMESTAMP_FILTERS: bool = _release(VERSION) >= (2, 15)


def invocation_of(context: Any) -> Any:
    """The ``InvocationContext`` a callback context or tool context belongs to."""
    getter = getattr(context, "get_invocation_context", None)
    if getter is not None:
        return getter()
    return context._invocation_context  # ADK before 2.x kept it private only
