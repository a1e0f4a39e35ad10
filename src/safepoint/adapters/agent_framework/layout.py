"""Where a workflow's checkpoints live in safepoint, and how a step holds one.

One **workflow run** per workflow name, ``agent-framework/<name>``
(percent-encoded; ``agent-framework/#<sha256>`` when too long). Its step 0
opens it; every later step is one operation on the workflow's checkpoints:

* a **save** step: ``state = {"op": "save", "checkpoint": tree}``, the
  checkpoint's fields as JSON (``codec.py``);
* a **delete** step: ``state = {"op": "delete", "id": …}`` — the deletion is
  a step of its own, so earlier steps are never edited and ``safepoint
  verify`` sees an ordinary run.

The run's message log is its **journal**, append-only: one entry per save
(``{"op": "save", "id", "step", "ts"}``, and ``"root"`` when a journaled run
saved it: the root of its call keys, ``turn.py``), per delete (``{"op": "delete",
"id"}``) and per list item stored incrementally (``{"op": "item", "v"}``).
Replaying the journal gives the live checkpoints in the framework's order
(``live``). A list of four items or more inside a checkpoint is not inlined:
its items go to the journal, tagged with the list's name, and the tree holds
``{"$log": [name, length]}``. A list that grew since the previous checkpoint
of the run (a conversation carried in the workflow's state) keeps its name
and appends only its new items, so each save stores only the new turn,
although every framework checkpoint is a full snapshot.

One **index run** per checkpoint id, ``agent-framework-index/<id>``
(labelled ``safepoint.role=index``): its head says which workflow run holds
the id, so ``load`` and ``delete`` by id alone read one small run. It is
written before the checkpoint's step (an entry always exists for a live
checkpoint) and removed after the delete step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from safepoint import Checkpoint

from .codec import LOG, TYPED, revive

ADAPTER_LABEL = "safepoint.adapter"
ADAPTER = "agent-framework"
ROLE_LABEL = "safepoint.role"
NAME_LABEL = "agent_framework.workflow_name"
ID_LABEL = "agent_framework.checkpoint_id"
LOG_MIN = 4  # lists this long or longer go to the journal; shorter ones cost less inline
_MAX_RUN_ID = 255
_MAX_LABEL = 1_000

Path = tuple[str, ...]


def _run_id(prefix: str, key: str) -> str:
    run_id = prefix + quote(key, safe=":|", errors="surrogatepass")
    if len(run_id) <= _MAX_RUN_ID:
        return run_id
    return prefix + "#" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def workflow_run_id(workflow_name: str) -> str:
    """The run holding ``workflow_name``'s checkpoints."""
    return _run_id("agent-framework/", workflow_name)


def index_run_id(checkpoint_id: str) -> str:
    """The index run saying which workflow run holds ``checkpoint_id``."""
    return _run_id("agent-framework-index/", checkpoint_id)


def label_value(text: str) -> str:
    """``text`` as a label (labels hold no NUL and stay short): percent-encoded when it must be."""
    if "\x00" in text or len(text) > _MAX_LABEL:
        return quote(text[:_MAX_LABEL], safe="", errors="surrogatepass")
    return text


def workflow_labels(workflow_name: str) -> dict[str, str]:
    return {ADAPTER_LABEL: ADAPTER, ROLE_LABEL: "workflow", NAME_LABEL: label_value(workflow_name)}


def index_labels(checkpoint_id: str) -> dict[str, str]:
    return {ADAPTER_LABEL: ADAPTER, ROLE_LABEL: "index", ID_LABEL: label_value(checkpoint_id)}


@dataclass(frozen=True, slots=True)
class Live:
    """A live checkpoint as the journal knows it: the step holding it, its timestamp, and the
    root of the call journal's keys when a journaled run saved it (``turn.py``)."""

    step: int
    timestamp: str
    root: str | None = None


def live(journal: Sequence[Mapping[str, Any]]) -> dict[str, Live]:
    """The live checkpoints, by id, in the order the framework's in-memory storage keeps them
    (first save; a re-save keeps its place, a delete and a new save move it to the end)."""
    found: dict[str, Live] = {}
    for entry in journal:
        op = entry.get("op")
        if op == "save":
            root = entry.get("root")
            found[str(entry["id"])] = Live(
                int(entry["step"]), str(entry["ts"]), root if isinstance(root, str) else None
            )
        elif op == "delete":
            found.pop(str(entry["id"]), None)
    return found


def live_in(head: Checkpoint) -> dict[str, Live]:
    """``live`` of ``head``'s journal; an entry this adapter did not write is ``CorruptCheckpoint``."""
    return revive(lambda: live(head.messages), (head.run_id, head.step))


def unpack_in(cp: Checkpoint) -> tuple[Any, Lists]:
    """``unpack`` of ``cp``'s checkpoint tree; one this adapter did not write is ``CorruptCheckpoint``."""
    return revive(lambda: unpack(cp.state["checkpoint"], cp.messages), (cp.run_id, cp.step))


@dataclass(slots=True)
class Lists:
    """The lists of one checkpoint that live in the journal: path -> (its journal list, the items)."""

    by_path: dict[Path, tuple[str, list[Any]]] = field(default_factory=dict)


def pack(tree: Any, previous: Lists, step: int) -> tuple[Any, list[dict[str, Any]], Lists]:
    """``tree`` with its long lists replaced by journal references; the journal entries to append;
    and the lists as packed (the ``previous`` of the next checkpoint).

    A journal list is named (``"<step>.<n>"``, after the step that started it) and its items
    are the journal's ``item`` entries tagged with that name, in order; a reference is
    ``{"$log": [name, length]}`` — the same size however long the list, so a step's header
    does not grow with the conversation. A list extending the previous checkpoint's list at
    the same path keeps its name and appends only its new items; any other starts a new one.
    """
    appended: list[dict[str, Any]] = []
    packed = Lists()

    def walk(node: Any, path: Path) -> Any:
        if isinstance(node, list):
            if len(node) < LOG_MIN:
                return [walk(item, (*path, "[]")) for item in node]
            name, items = previous.by_path.get(path, ("", []))
            kept = len(items)
            if not name or kept > len(node) or node[:kept] != items:
                name, kept = f"{step}.{len(packed.by_path)}", 0  # not an extension: all of it anew
            appended.extend({"op": "item", "list": name, "v": item} for item in node[kept:])
            packed.by_path[path] = (name, node)
            return {LOG: [name, len(node)]}
        if isinstance(node, dict) and TYPED not in node:
            return {key: walk(value, (*path, key)) for key, value in node.items()}
        return node  # typed values are packed whole: their lists are few and short

    return walk(tree, ()), appended, packed


def unpack(tree: Any, journal: Sequence[Mapping[str, Any]]) -> tuple[Any, Lists]:
    """The tree ``pack`` made, its lists read back from ``journal``; and the lists found."""
    found = Lists()
    named: dict[str, list[Any]] | None = None

    def items_of(name: str, length: int) -> list[Any]:
        nonlocal named
        if named is None:  # one pass over the journal, the first time a list is needed
            named = {}
            for entry in journal:
                if entry.get("op") == "item":
                    named.setdefault(str(entry.get("list")), []).append(entry.get("v"))
        return named.get(name, [])[:length]

    def walk(node: Any, path: Path) -> Any:
        if isinstance(node, list):
            return [walk(item, (*path, "[]")) for item in node]
        if isinstance(node, Mapping):
            if TYPED in node:
                return node
            ref = node.get(LOG)
            if ref is not None and len(node) == 1:
                items = items_of(str(ref[0]), int(ref[1]))
                found.by_path[path] = (str(ref[0]), items)
                return items
            return {key: walk(value, (*path, key)) for key, value in node.items()}
        return node

    return walk(tree, ()), found
