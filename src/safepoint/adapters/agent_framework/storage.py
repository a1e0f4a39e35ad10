"""``SafepointCheckpointStorage``: the Agent Framework's ``CheckpointStorage`` over safepoint runs.

The six methods are flows (``safepoint.flow``), written once and run on a
``Store`` (in a worker thread) or an ``AsyncStore`` (awaited) by the adapters'
``Runner``. Where things live is ``layout.py``; how values become JSON is
``codec.py``.

Copy semantics are the framework's: ``save`` encodes the checkpoint at once
(changing the object afterwards changes nothing stored) and every ``load``,
``list_checkpoints`` and ``get_latest`` decodes fresh objects. Reads always
load from the store, so they see what other processes wrote; a save starts
from the run's head this storage last saved or loaded, and a save built on a
head that another writer has since moved is refused by the store
(``Conflict``) and rebuilt on the new head.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from datetime import datetime
from typing import Any

from agent_framework import WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from safepoint import AsyncStore, Checkpoint, Conflict, InvalidArgument, NotFound, Store
from safepoint.adapters.cache import MAX_ATTEMPTS, CheckpointCache, gave_up, save_cached
from safepoint.adapters.runner import Runner, open_given
from safepoint.flow import FindRuns, Flow, Load, Save, delete_if_present, load_or_none
from safepoint.twins import Invoke, translate

from . import layout
from .codec import Codec, revive
from .layout import Lists, Live

_FIELDS = tuple(f.name for f in fields(WorkflowCheckpoint))
_SHOWN_ID = 80  # characters of a checkpoint id an error message shows


class CheckpointNotFound(NotFound, WorkflowCheckpointException):
    """No checkpoint has this id: safepoint's ``NotFound`` and the framework's own error alike."""

    def __init__(self, checkpoint_id: str) -> None:
        shown = checkpoint_id if len(checkpoint_id) <= _SHOWN_ID else checkpoint_id[:_SHOWN_ID] + "…"
        self.checkpoint_id = checkpoint_id
        self.run_id, self.step = layout.index_run_id(checkpoint_id), None
        Exception.__init__(self, f"no checkpoint with id {shown!r}")


class SafepointCheckpointStorage:
    """A ``CheckpointStorage`` whose checkpoints are steps of safepoint runs (see ``layout.py``).

    ``store``: a ``Store``, an ``AsyncStore``, or a URL (the storage then owns the store:
    ``close()`` closes it; ``store_options`` go to ``open_store``). ``allowed_types``: pydantic
    models (and request/response types of ``request_info`` events) your workflow's state,
    messages and requests may hold. ``index=False`` keeps no index runs: one transaction per
    checkpoint instead of two, but a load or delete by id then reads the head of every workflow
    run in the store — for stores holding one or a few workflows.
    """

    def __init__(
        self,
        store: Store | AsyncStore | str,
        *,
        allowed_types: Iterable[type[Any]] = (),
        index: bool = True,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.store: Store | AsyncStore
        self.store, self._owned = open_given(store, store_options)
        self.index = index
        self._codec = Codec(allowed_types)
        self._runner = Runner(self.store)
        self._cache = CheckpointCache(size=64)
        # Workflow runs a journaled turn holds (run id -> its Turn, turn.py): their saves go under
        # the turn's lease and carry its counters.
        self.holds: dict[str, Any] = {}

    # -- the framework's interface ------------------------------------------------------

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        """Store a copy of ``checkpoint`` (one step of its workflow's run); returns its id."""
        tree = self._encode(checkpoint)
        run_id = layout.workflow_run_id(checkpoint.workflow_name)
        await self._runner.arun(self._fenced(self._save(tree, run_id, checkpoint.workflow_name)), lock=run_id)
        return checkpoint.checkpoint_id

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """A fresh copy of the checkpoint; ``CheckpointNotFound`` (a ``WorkflowCheckpointException``)."""
        return await self._runner.arun(self._load(_text(checkpoint_id, "checkpoint_id")))

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        """Fresh copies of the workflow's checkpoints, in the order they were first saved."""
        return await self._runner.arun(self._list(_text(workflow_name, "workflow_name")))

    async def delete(self, checkpoint_id: str) -> bool:
        """Remove the checkpoint (a step recording the deletion); False if there was none."""
        run_id = await self._runner.arun(self._locate(_text(checkpoint_id, "checkpoint_id")))
        if run_id is None:
            return False
        return await self._runner.arun(self._fenced(self._delete(checkpoint_id, run_id)), lock=run_id)

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """A fresh copy of the workflow's checkpoint with the latest timestamp, or None."""
        return await self._runner.arun(self._latest(_text(workflow_name, "workflow_name")))

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        """The ids of the workflow's checkpoints, in the order they were first saved."""
        head = await self._runner.arun(
            load_or_none(layout.workflow_run_id(_text(workflow_name, "workflow_name")))
        )
        return [] if head is None else list(layout.live_in(head))

    def close(self) -> None:
        """Closes the store if this storage opened it from a URL."""
        if self._owned and isinstance(self.store, Store):
            self.store.close()

    # -- encoding -------------------------------------------------------------------------

    def _encode(self, checkpoint: WorkflowCheckpoint) -> dict[str, Any]:
        if not isinstance(checkpoint, WorkflowCheckpoint):
            raise InvalidArgument(f"save takes a WorkflowCheckpoint, not {type(checkpoint).__name__}")
        _text(checkpoint.checkpoint_id, "checkpoint.checkpoint_id")
        _text(checkpoint.workflow_name, "checkpoint.workflow_name")
        try:
            datetime.fromisoformat(_text(checkpoint.timestamp, "checkpoint.timestamp"))
        except ValueError:
            raise InvalidArgument("checkpoint.timestamp: not an ISO 8601 time") from None
        return {name: self._codec.encode(getattr(checkpoint, name), f"checkpoint.{name}") for name in _FIELDS}

    def _decode(self, cp: Checkpoint) -> WorkflowCheckpoint:
        where = (cp.run_id, cp.step)
        decoded = self._codec.decode(layout.unpack_in(cp)[0], where)
        return revive(lambda: WorkflowCheckpoint.from_dict(decoded), where)

    # -- a journaled turn's hold (turn.py) -------------------------------------------------

    def _fenced(self, flow: Flow[Any]) -> Flow[Any]:
        """``flow`` with each save to a run a journaled turn holds made under the turn's lease."""
        return translate(flow, self._fence)

    def _fence(self, request: Any) -> Any:
        if type(request) is Save:
            turn = self.holds.get(request.checkpoint.run_id)
            if turn is not None and turn.lease is not None:
                return Invoke(self.store.save, (request.checkpoint,), {"lease": turn.lease})
        return request

    def _opened(self, run_id: str, workflow_name: str) -> Flow[None]:
        """The workflow's run, its step 0 made if it has none yet (a turn holds it before the
        workflow's first save)."""
        head, _ = yield from self._head(run_id)
        if head is not None:
            return
        cp = Checkpoint(
            run_id=run_id,
            step=0,
            labels=layout.workflow_labels(workflow_name),
            state={"op": "open", "name": workflow_name},
        )
        try:
            yield Save(cp)
        except Conflict:  # another process opened it first
            return
        self._cache.put(cp, Lists(), replace=True)

    # -- flows ----------------------------------------------------------------------------

    def _head(self, run_id: str) -> Flow[tuple[Checkpoint | None, Lists]]:
        cached = self._cache.get(run_id)
        if cached is not None:
            return cached[0], cached[1]
        head: Checkpoint | None = yield from load_or_none(run_id)
        return head, self._remember(head)

    def _remember(self, head: Checkpoint | None) -> Lists:
        """Cache ``head`` with the journal lists of its checkpoint (what the next save extends)."""
        if head is None:
            return Lists()
        if _op(head) == "save":
            lists = layout.unpack_in(head)[1]
        else:  # a delete step: the lists of the save before it, if this storage wrote that very step
            known = self._cache.get(head.run_id)
            same = known is not None and (known[0].step, known[0].created_at) == (head.step, head.created_at)
            lists = known[1] if known is not None and same else Lists()
        self._cache.put(head, lists, replace=True)
        return lists

    def _save(self, tree: dict[str, Any], run_id: str, workflow_name: str) -> Flow[None]:
        checkpoint_id, labels = tree["checkpoint_id"], layout.workflow_labels(workflow_name)
        pointed = not self.index
        for _ in range(MAX_ATTEMPTS):
            head, lists = yield from self._head(run_id)
            if head is None:  # the run's step 0 opens it (so its first checkpoint is step 1)
                head = Checkpoint(
                    run_id=run_id, step=0, labels=labels, state={"op": "open", "name": workflow_name}
                )
            else:
                if not pointed:  # before the step: a live checkpoint always has its index entry
                    yield from self._point_index(checkpoint_id, run_id)
                    pointed = True
                head = head.next()
                packed, appended, lists = layout.pack(tree, lists, head.step)
                entry = {"op": "save", "id": checkpoint_id, "step": head.step, "ts": tree["timestamp"]}
                turn = self.holds.get(run_id)
                if turn is not None:  # a journaled turn's save carries its keys' root and counters
                    entry["root"] = turn.rooted(checkpoint_id)
                    head.counters.update(turn.counters())
                head.messages.extend([*appended, entry])
                head.labels, head.state = labels, {"op": "save", "checkpoint": packed}
            if not (yield from save_cached(self._cache, head, lists, replace=True)):
                continue  # another writer moved the run: build again on its head
            if _op(head) == "save":
                return
        raise gave_up(run_id, -1)

    def _point_index(self, checkpoint_id: str, run_id: str) -> Flow[None]:
        index_id = layout.index_run_id(checkpoint_id)
        for _ in range(MAX_ATTEMPTS):
            entry: Checkpoint | None = yield from load_or_none(index_id)
            if entry is not None and entry.state.get("run") == run_id:
                return
            if entry is not None:  # saved again under another workflow name: it moves there
                yield from self._forget(checkpoint_id, str(entry.state.get("run")))
            cp = entry.next() if entry is not None else Checkpoint(run_id=index_id, step=0)
            cp.labels, cp.state = layout.index_labels(checkpoint_id), {"run": run_id}
            try:
                yield Save(cp)
            except Conflict:
                continue
            return
        raise gave_up(index_id, 0)

    def _locate(self, checkpoint_id: str) -> Flow[str | None]:
        """The workflow run that holds (or last held) ``checkpoint_id``."""
        if self.index:
            entry: Checkpoint | None = yield from load_or_none(layout.index_run_id(checkpoint_id))
            return None if entry is None else str(entry.state.get("run"))
        runs = yield FindRuns({layout.ADAPTER_LABEL: layout.ADAPTER, layout.ROLE_LABEL: "workflow"})
        for info in runs:
            head: Checkpoint | None = yield from load_or_none(info.run_id)
            if head is not None and checkpoint_id in layout.live_in(head):
                return head.run_id
        return None

    def _find(self, checkpoint_id: str) -> Flow[tuple[Checkpoint, Live] | None]:
        run_id = yield from self._locate(checkpoint_id)
        head: Checkpoint | None = None if run_id is None else (yield from load_or_none(run_id))
        entry = None if head is None else layout.live_in(head).get(checkpoint_id)
        if head is None or entry is None:
            return None
        self._remember(head)
        return head, entry

    def _load(self, checkpoint_id: str) -> Flow[WorkflowCheckpoint]:
        found = yield from self._find(checkpoint_id)
        if found is None:
            raise CheckpointNotFound(checkpoint_id)
        return (yield from self._checkpoint_at(found[0], found[1].step))

    def _checkpoint_at(self, head: Checkpoint, step: int) -> Flow[WorkflowCheckpoint]:
        cp = head if step == head.step else (yield Load(head.run_id, step))
        return self._decode(cp)

    def _list(self, workflow_name: str) -> Flow[list[WorkflowCheckpoint]]:
        head: Checkpoint | None = yield from load_or_none(layout.workflow_run_id(workflow_name))
        if head is None:
            return []
        self._remember(head)
        found = []
        for entry in layout.live_in(head).values():
            found.append((yield from self._checkpoint_at(head, entry.step)))
        return found

    def _latest(self, workflow_name: str) -> Flow[WorkflowCheckpoint | None]:
        head: Checkpoint | None = yield from load_or_none(layout.workflow_run_id(workflow_name))
        entries = [] if head is None else list(layout.live_in(head).values())
        if head is None or not entries:
            return None
        self._remember(head)
        try:
            latest = max(entries, key=lambda entry: datetime.fromisoformat(entry.timestamp))
        except TypeError:  # aware and naive timestamps do not compare
            raise InvalidArgument(
                f"workflow {workflow_name!r} mixes timestamps with and without a zone"
            ) from None
        return (yield from self._checkpoint_at(head, latest.step))

    def _delete(self, checkpoint_id: str, run_id: str) -> Flow[bool]:
        deleted = yield from self._forget(checkpoint_id, run_id)
        if self.index:  # after the delete step: until then the entry still points at a live checkpoint
            yield from delete_if_present(layout.index_run_id(checkpoint_id))
        return deleted

    def _forget(self, checkpoint_id: str, run_id: str) -> Flow[bool]:
        """A step of ``run_id`` recording that ``checkpoint_id`` is deleted (False: it was not live)."""
        for _ in range(MAX_ATTEMPTS):
            head: Checkpoint | None = yield from load_or_none(
                run_id
            )  # liveness: from the store, never memory
            lists = self._remember(head)
            if head is None or checkpoint_id not in layout.live_in(head):
                return False
            cp = head.next()
            cp.messages.append({"op": "delete", "id": checkpoint_id})
            cp.state = {"op": "delete", "id": checkpoint_id}
            try:
                yield Save(cp)
            except Conflict:
                continue
            self._cache.put(cp, lists, replace=True)
            return True
        raise gave_up(run_id, 0)

    def __repr__(self) -> str:
        return f"<SafepointCheckpointStorage in {self.store!r}>"


def _op(cp: Checkpoint) -> Any:
    return cp.state.get("op") if isinstance(cp.state, dict) else None


def _text(value: Any, name: str) -> str:
    if type(value) is not str:
        raise InvalidArgument(f"{name} must be a str, not {type(value).__name__}")
    return value


__all__ = ["CheckpointNotFound", "SafepointCheckpointStorage"]
