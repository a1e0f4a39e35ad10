"""The inspector's actions (``safepoint ui --allow-actions``): answer, cancel, requeue, fork.

The same store calls as the CLI's ``answer``, ``cancel``, ``requeue`` and
``fork``: an answer resumes the waiting run (``safepoint.handover.answer_waiting``) and
hands it back to the workers that serve it; a run a worker holds a live lease
on is left alone (``Conflict``): the page never fences a worker off. A fork
with its edit is ``safepoint.edited_fork``'s, as the CLI makes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from safepoint.edited_fork import Edit, fork_with_edit, requeue_refusal
from safepoint.errors import InvalidArgument
from safepoint.frameworks import ADAPTER_LABEL
from safepoint.handover import answer_waiting
from safepoint.model import Checkpoint
from safepoint.store import Store

ACTIONS = ("answer", "cancel", "requeue")
FORK_FIELDS = ("step", "new_id", "last_message", "state_key", "state_value", "requeue")


def perform(store: Store, run_id: str, action: str, value: str) -> None:
    """Do ``action`` to the run; a typed ``SafepointError`` says why not."""
    if not run_id or action not in ACTIONS:
        raise InvalidArgument("the form names no run or no known action")
    if action == "cancel":
        store.cancel(run_id)
    elif action == "requeue":
        store.requeue(run_id)
    else:
        answer_waiting(store, run_id, value, force=False)


@dataclass(frozen=True)
class ForkOffer:
    """What a step page's fork form offers: requeue, or why not (an adapter's run: its framework)."""

    requeue: bool
    adapter: str | None
    why_not: str | None


def fork_offer(cp: Checkpoint) -> ForkOffer:
    why_not = requeue_refusal(cp)
    return ForkOffer(requeue=why_not is None, adapter=cp.labels.get(ADAPTER_LABEL), why_not=why_not)


def fork(store: Store, run_id: str, form: Mapping[str, str]) -> str:
    """Fork the run at the form's step with the form's edit (and requeue); the fork's run id."""
    if not run_id:
        raise InvalidArgument("the form names no run")
    try:
        step = int(form.get("step", ""))
    except ValueError:
        raise InvalidArgument("a step must be a whole number") from None
    # A browser sends a textarea's line breaks as CRLF whatever was typed: the text as typed.
    last = form.get("last_message", "").replace("\r\n", "\n")
    edit = Edit(_state_change(form.get("state_key", ""), form.get("state_value", "")), last or None)
    made = fork_with_edit(
        store,
        run_id,
        step,
        new_run_id=form.get("new_id") or None,
        edit=edit,
        requeue=form.get("requeue") == "1",
    )
    return made.run_id


def _state_change(key: str, text: str) -> dict[str, Any]:
    if not key and not text:
        return {}
    if not key:
        raise InvalidArgument("a state value needs the key it is set to")
    try:
        return {key: json.loads(text)}
    except ValueError:
        raise InvalidArgument("the state value must be JSON (a string in double quotes)") from None
