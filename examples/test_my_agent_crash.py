"""Crash-test an agent: SIGKILL it at every step boundary and at random instants, resume it in
fresh processes, and check it ends exactly like an uninterrupted run, every email sent once.

Copy this file into your tests, replace ``run_agent`` with (a call to) your own agent, and run
``pytest test_my_agent_crash.py``. The kit needs one thing from your agent: an importable
function ``(store, run_id, ledger) -> answer`` that runs or resumes the agent to its end with
``safepoint.harness.Run``, and sends its side effects through ``ledger`` (in the test) keyed by
the idempotency key ``run.action`` passes to the tool. See docs/crash-testing.md.
"""

from __future__ import annotations

import hashlib
from typing import Any

from safepoint import Store
from safepoint.harness import Budget, PendingAction, Reconcile, Run
from safepoint.testing.crash import Ledger, crash_test

INBOX = ["Where is my order?", "Cancel my subscription", "Invoice for March?", "Thanks!"]


def fake_model(prompt: str) -> tuple[str, int, int]:
    """Your model client goes here; the kit needs it to answer the same way every time."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return f"Dear customer, about '{prompt}': {digest[:12]}", len(prompt) + 30, 40


def run_agent(store: Store, run_id: str, ledger: Ledger) -> Any:
    """Answer every email in the inbox, one step each. Safe to call again after a crash."""

    def send_reply(to: int, body: str, key: str) -> str:
        # A mail API is not idempotent: the ledger records every send, so a duplicate shows.
        ledger.record(key, {"to": to, "body": body})
        return f"sent-{key[:8]}"

    def already_sent(action: PendingAction) -> Reconcile:
        # After a crash mid-send, ask the mail service (here: the ledger) what happened.
        if ledger.happened(action.key):
            return Reconcile.skip(f"sent-{action.key[:8]}")
        return Reconcile.rerun()

    with Run.open(
        store,
        run_id,
        budget=Budget(tokens=10_000, steps=len(INBOX) + 1),
        cursors={"inbox": 0},
        state={"replies": []},
        reconcile={"send_reply": already_sent},
    ) as run:  # held until the block ends: one live writer
        while run.active:
            index = int(run.cursors["inbox"])
            if index == len(INBOX):
                run.finish()
                break
            if run.pending is None:
                # A fresh step: ask the model. (A step resumed with its send pending already
                # did, and saved the draft with the pending action: don't pay for it twice.)
                draft, tokens_in, tokens_out = fake_model(INBOX[index])
                run.add_usage(tokens_in=tokens_in, tokens_out=tokens_out, spend=tokens_out * 0.002)
                run.state["draft"] = draft
            draft = run.state["draft"]
            receipt = run.action(
                "send_reply", {"to": index}, lambda key, i=index, d=draft: send_reply(i, d, key)
            )
            run.append({"role": "assistant", "content": draft, "receipt": receipt})
            run.state["replies"].append(receipt)
            run.advance("inbox")
            run.commit()
    return {"status": run.status.value, "replies": run.state["replies"]}


def test_my_agent_survives_crashes(tmp_path: Any) -> None:
    """Killed at every step boundary and at 10 random instants, the agent ends as if never killed."""
    report = crash_test(f"{__name__}:run_agent", tmp_path, random_kills=10, per_run=5)
    print(report)
