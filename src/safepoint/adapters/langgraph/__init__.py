"""A LangGraph checkpointer backed by a safepoint store: ``SafepointSaver``.

Switch a graph over in one line::

    store = safepoint.open_store("sqlite:///state.db")       # or postgresql://…
    graph = builder.compile(checkpointer=SafepointSaver(store))

How LangGraph's data maps onto safepoint (details in ``layout.py``):

* One **thread run** per ``(thread_id, checkpoint_ns)``, named
  ``langgraph/<thread_id>[/<checkpoint_ns>]`` (percent-encoded; a SHA-256
  form when too long) and labelled ``langgraph.thread_id``,
  ``langgraph.checkpoint_ns``, ``langgraph.role=thread``. Each ``put`` and each
  ``put_writes`` appends one step; every step is the full LangGraph
  checkpoint plus its pending writes so far, so any checkpoint loads with
  one ``store.load``.
* The ``messages`` channel (``messages_channel=``), when it holds LangChain
  messages (or plain JSON dicts), is the step's **message log**: one dict per
  message (its fields plus an OpenAI-style ``role``), stored once and appended
  incrementally — a turn writes only its new messages, never the whole
  conversation again. ``RemoveMessage`` and other rewrites start a new
  stored range.
* Every other channel value, the versions, metadata and parent id are JSON in
  the step's ``state``; values that are not plain JSON go through LangGraph's
  serializer, locked down (no pickle, an allow-list of types —
  ``allowed_types=``), and are stored as ``{"$typed": ["msgpack", tree]}``, a
  JSON tree the scrubber can read (``codec.py``, ``msgpack.py``).
* Pending writes keep LangGraph's contract: keyed ``(task_id, idx)``, special
  channels at their negative idx and replaced on re-put, regular ones kept
  (idempotent), returned in ``(task_path, task_id, idx)`` order. Writes that
  arrive before their checkpoint wait in the thread run until it does.
* An **index run** (``langgraph-index/…``, ``langgraph.role=index``) logs
  which step holds each checkpoint id, for ``list`` and lookups by id;
  ``get_tuple`` for the latest checkpoint does not need it.
* A step's status is ``waiting`` while its checkpoint has a pending interrupt,
  so ``safepoint runs --status waiting`` lists threads waiting for a human.
* A saver remembers the last steps it saved or loaded of each thread
  (``memo.py``), so a turn costs what it adds: ``put`` converts only
  new messages (the old ones are the same objects), and ``get_tuple`` answers
  from memory once ``store.run`` shows the head has not moved.

Supported: ``get_tuple``, ``list`` (filter, before, limit; all namespaces of a
thread when the config has no ``checkpoint_ns``; all threads for ``None``),
``put``, ``put_writes``, ``delete_thread``, ``copy_thread`` — each sync and
async. Not supported: ``prune`` and ``delete_for_runs``, which would delete
steps from the middle of a run, and safepoint runs only grow.

**The call journal** (``SafepointSaver(store, journal=True)``, tools through
``ToolNode(tools, **journal_tools())``) records every chat-model response and
tool result of a graph turn and replays them when a crashed turn is resumed:
no recorded response is paid again, no tool effect is repeated
(``journal.py``; docs/journal-langgraph.md).

The package, by concern: ``saver.py`` is the checkpointer API (each method
runs one flow, blocking or awaited); ``reads.py`` and ``writes.py`` are those
flows; ``steps.py`` builds, saves and indexes one step of a thread run;
``layout.py`` is where a thread lives in the store and the shape of a step;
``memo.py`` what a saver remembers between turns; ``codec.py`` and
``msgpack.py`` translate LangGraph's values to checkpoint JSON and back.
The journal: ``journal.py`` (the saver's journal, keys, counters),
``turns.py`` (a turn's hold, lineage and finished step), ``calls.py`` (model
calls), ``digests.py`` (a request's digest, each message digested once),
``tools.py`` (tool calls), ``patches.py`` (the framework methods patched, and
every private name touched).
"""

from __future__ import annotations

from safepoint.adapters import missing_framework

try:
    import langchain_core.messages  # noqa: F401  # the adapter's own imports need both
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_framework(__name__, "LangGraph's checkpoint package", "langgraph") from exc

from . import calls as _calls  # noqa: F401  # the journal's model hook (patches.HOOKS)
from .journal import JournalOptions
from .saver import SafepointSaver
from .tools import current_call_key, journal_tools, non_idempotent

__all__ = ["JournalOptions", "SafepointSaver", "current_call_key", "journal_tools", "non_idempotent"]
