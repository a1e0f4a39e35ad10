"""The call journal: a run's record of model responses and tool results, replayed on resume.

The store keeps the entries (``Store.record_call``, ``call_intent``,
``recorded_call``, ``recorded_calls``: put-if-absent, fenced by the run's
lease, scrubbed, sealed and verified like checkpoints). This package holds
what every integration does with them, written once (``replay``): replay a
recorded call, record a new one, settle the one in flight at a crash (a
model call re-sent is marked first, ``resends`` counts the marks back), and
count cost from entries; ``holding`` (a turn's lease on its run, and how a
turn's flows reach the store from a framework's event loop) and ``counters``
(the counter names every integration writes) serve the framework adapters.
``Run`` (``run.call``, ``run.action``), LangGraph (``safepoint.adapters.langgraph``)
and the Agents SDK (``safepoint.adapters.openai_agents``) sit on it. See docs/journal.md.
"""

from safepoint.records import CallUsage, Recorded

from .replay import (
    NOT_RECORDABLE,
    RESENT,
    ActionWaiting,
    Place,
    Tally,
    ToolPolicy,
    diverged_key,
    marker,
    model_call,
    raised_within,
    tool_call,
)

__all__ = [
    "NOT_RECORDABLE",
    "RESENT",
    "ActionWaiting",
    "CallUsage",
    "Place",
    "Recorded",
    "Tally",
    "ToolPolicy",
    "diverged_key",
    "marker",
    "model_call",
    "raised_within",
    "tool_call",
]
