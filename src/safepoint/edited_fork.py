"""Go back to a step of a run and try again from there: a fork with an edit, as the CLI's
``safepoint fork`` and the inspector's fork form both make it.

A fork is by reference (``Store.fork``): the new run's history starts with
the source's checkpoint at the fork step, its parent recorded; the source
is left as it was. An edit — state keys set to JSON values, or a rewrite of
the last message's text — is saved as the fork's next step, so the fork's
history shows what was changed and the parent's step is untouched.

Requeueing hands the fork to the workers. It is for runs a safepoint ``Run``
writes; a run an adapter wrote (label ``safepoint.adapter``) is resumed by
its framework (a worker's ``Run`` would not know its messages), so it is
refused there. A fork of a step that is not running (done, failed, waiting,
cancelled) has nothing for a worker to do and is refused too. Every refusal
is decided before anything is written: a refused fork leaves no run behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from safepoint.errors import InvalidArgument, RunStatusError
from safepoint.frameworks import ADAPTER_LABEL
from safepoint.model import Checkpoint, Status
from safepoint.store import Store

__all__ = ["Edit", "EditedFork", "fork_with_edit", "requeue_refusal"]


@dataclass(frozen=True)
class Edit:
    """What the fork's next step changes: ``state`` keys set to JSON values, the last message's text."""

    state: dict[str, Any] = field(default_factory=dict)
    last_message: str | None = None

    def __bool__(self) -> bool:
        return bool(self.state) or self.last_message is not None


@dataclass(frozen=True)
class EditedFork:
    """A fork made: the source's step, the fork at that step, and its head (the edit, if any)."""

    source: Checkpoint
    head: Checkpoint
    edited_step: int | None
    queued: bool

    @property
    def run_id(self) -> str:
        return self.head.run_id

    @property
    def adapter(self) -> str | None:
        """The adapter that wrote the source run (its framework resumes the fork), or None."""
        return self.source.labels.get(ADAPTER_LABEL)


def requeue_refusal(source: Checkpoint) -> str | None:
    """Why a fork of ``source`` cannot be queued for workers (one line, no value quoted), or None."""
    if ADAPTER_LABEL in source.labels:
        return (
            "requeue is for runs a safepoint Run writes; an adapter wrote this run and its framework "
            "resumes it: fork without requeue and resume the fork there"
        )
    if source.status is not Status.RUNNING:
        return (
            f"at step {source.step}, so a fork of it has nothing for a worker to run: "
            "fork at an earlier step, or without requeue"
        )
    return None


def fork_with_edit(
    store: Store,
    run_id: str,
    step: int | None = None,
    *,
    new_run_id: str | None = None,
    edit: Edit | None = None,
    requeue: bool = False,
) -> EditedFork:
    """Fork ``run_id`` at ``step`` (default: the latest), save ``edit`` as the fork's next step,
    and queue the fork for workers if ``requeue``.

    Refused before anything is written: requeue of an adapter's run (``InvalidArgument``) or of a
    step that is not running (``RunStatusError``); a last-message rewrite of a step whose last
    message has no text (``InvalidArgument``).
    """
    edit = edit or Edit()
    source = store.load(run_id, step, migrate=False, fetch_blobs=edit.last_message is not None)
    reason = requeue_refusal(source) if requeue else None
    if reason is not None and ADAPTER_LABEL in source.labels:
        raise InvalidArgument(reason)  # a wrong request, not a state the run may leave
    if reason is not None:
        raise RunStatusError(source.run_id, source.status.value, reason)
    if edit.last_message is not None:
        rewritten(source.messages, edit.last_message)  # refuses a message without text to rewrite
    head = store.fork(run_id, source.step, new_run_id=new_run_id)
    edited: int | None = None
    if edit:
        head = head.next()
        head.state = {**head.state, **edit.state}
        if edit.last_message is not None:
            head.messages = rewritten(list(head.messages), edit.last_message)
        store.save(head)
        edited = head.step
    if requeue:
        store.enqueue(head.run_id)
    return EditedFork(source=source, head=head, edited_step=edited, queued=requeue)


def rewritten(messages: list[Any], text: str) -> list[Any]:
    """``messages`` with the last one's text replaced; a message without text content is refused."""
    if not messages:
        raise InvalidArgument("the last message: the step has no messages")
    last = messages[-1]
    if not isinstance(last, dict) or not isinstance(last.get("content"), str):
        raise InvalidArgument("the last message has no text content to rewrite (edit the state instead)")
    return [*messages[:-1], {**last, "content": text}]
