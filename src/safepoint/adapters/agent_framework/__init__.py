"""The Microsoft Agent Framework adapter: a ``CheckpointStorage`` backed by a safepoint store, and
the call journal for the agents a checkpointed workflow runs.

Switch a workflow over in one line::

    storage = SafepointCheckpointStorage(safepoint.open_store("sqlite:///state.db"))
    workflow = WorkflowBuilder(start_executor=first, checkpoint_storage=storage).build()

Each workflow name is one safepoint run whose steps are its checkpoints (a
delete is a step too); an index run per checkpoint id finds it by id alone.
Checkpoint values go through JSON — the framework's own serialization of its
types, never pickle — and lists that grow from one checkpoint to the next are
stored incrementally. See ``layout.py`` for the storage layout and
docs/adapters.md for the whole story.

The call journal (``CallJournal``, docs/journal-agent-framework.md) runs the
workflow so a crash repeats no recorded model response or tool effect::

    result = await CallJournal(storage).run(workflow, message)
"""

from __future__ import annotations

from safepoint.adapters import missing_framework

try:
    import agent_framework  # noqa: F401  # the framework is an optional extra
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework(__name__, "the Microsoft Agent Framework", "agent-framework") from exc

from .journal import CallJournal, current_call_key, non_idempotent
from .storage import CheckpointNotFound, SafepointCheckpointStorage

__all__ = [
    "CallJournal",
    "CheckpointNotFound",
    "SafepointCheckpointStorage",
    "current_call_key",
    "non_idempotent",
]
