"""An offline agent on ``Run`` for the call journal's crash test: ``run(store, run_id, ledger, …)``.

A support agent answers ``turns`` questions. Each turn the scripted model
(deterministic: its reply is a function of the request) asks for tools in
``ROUNDS`` rounds of three calls — ``lookup`` (an idempotent service,
``Ledger.once``) and ``send`` (a non-idempotent effect, ``Ledger.record``) —
then answers; the turn's answer is the step's commit. Every request the model
answers is a paid call, noted in the ledger (``Ledger.model``) under the
request's digest.

With ``journal=True`` the agent is written the way docs/harness.md shows:
the model through ``run.call``, the tools through ``run.action``, ``send``
with a reconcile hook that asks the ledger. With ``journal=False`` the same
agent calls its model and tools directly and adds usage with ``add_usage``:
what a crash costs without the journal.

The loop decides its next move from the run (docs/harness.md, "Resuming
mid-step"): tool calls without a reply are answered; after a user or tool
message the model is asked; after the turn's answer the next question comes.
The child prints ``journal <name>`` when a model response or a tool's result
is recorded and ``hook <key>`` when a reconcile hook is asked, so the test can
tell a request paid again (or a hook asked) after the result was recorded — a
bug — from one in flight at a kill, the honest gap.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import partial
from typing import Any

from safepoint import Store
from safepoint.harness import PendingAction, Reconcile, Run
from safepoint.journal import CallUsage
from safepoint.testing.crash import Ledger

ROUNDS = 2
TOOLS = ("lookup", "send", "lookup")
QUESTIONS = ("Where is order 17?", "Refund order 17.", "Tell the customer.", "Close the ticket.")
PRICE_IN, PRICE_OUT = 0.000003, 0.000015


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def scripted_model(seed: int, request: dict[str, Any]) -> dict[str, Any]:
    """The reply to ``request``: a function of the request and the seed only."""
    messages = request["messages"]
    turn = sum(m["role"] == "user" for m in messages)
    since_user = next(i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user")
    rounds = sum(m["role"] == "assistant" for m in messages[since_user:])
    h = hashlib.sha256(f"{seed}:{digest(request)}".encode()).digest()
    message: dict[str, Any] = {"role": "assistant"}
    if rounds < ROUNDS:
        message["content"] = ""
        message["tool_calls"] = [
            {"id": f"call_{turn}_{rounds}_{i}_{h[i]:02x}", "name": name, "args": {"order": 17, "n": h[i + 3]}}
            for i, name in enumerate(TOOLS)
        ]
    else:
        message["content"] = f"answer {turn}: {h[:4].hex()}"
    tokens_in, tokens_out = len(json.dumps(messages)) // 4, 20 + h[8] % 50
    return {
        "message": message,
        "usage": {"in": tokens_in, "out": tokens_out, "cost": tokens_in * PRICE_IN + tokens_out * PRICE_OUT},
    }


def usage(reply: dict[str, Any]) -> CallUsage:
    used = reply["usage"]
    return CallUsage(used["in"], used["out"], used["cost"])


def unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the last assistant message that have no reply yet."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            answered = {m["tool_call_id"] for m in messages[index + 1 :] if m["role"] == "tool"}
            return [c for c in messages[index].get("tool_calls", []) if c["id"] not in answered]
    return []


class Agent:
    """The agent's model and tools, bound to the ledger (the outside world)."""

    def __init__(self, ledger: Ledger, seed: int) -> None:
        self.ledger, self.seed = ledger, seed

    def model(self, request: dict[str, Any]) -> dict[str, Any]:
        self.ledger.model(digest(request))  # the provider answers: a paid call
        return scripted_model(self.seed, request)

    def tool(self, name: str, args: dict[str, Any], key: str) -> dict[str, Any]:
        if name == "send":
            self.ledger.record(key, args)
            return {"sent": key[:12]}
        return self.ledger.once(key, lambda: {"order": args["order"], "status": f"status {args['n']}"})

    def settled(self, action: PendingAction) -> Reconcile:
        """The tools' reconcile hook (printed: the test checks it is asked only for an action
        with no recorded result): ``send`` asks the ledger whether the message went out;
        ``lookup`` is idempotent, so it runs again."""
        print(f"hook {action.key}", flush=True)
        if action.tool == "send" and self.ledger.happened(action.key):
            return Reconcile.skip({"sent": action.key[:12]})
        return Reconcile.rerun()


def _report_recorded(store: Store, pause_after: int | None, responses_only: bool) -> None:
    """Print ``journal <name>`` when a call's result is recorded — a model response named by its
    request's digest, an action's result by its key — and, after the ``pause_after``-th (of
    the model responses alone with ``responses_only``), print ``paused record`` and block: the
    parent kills the child between the record and the save that covers it."""
    record, counted = store.record_call, [0]

    def recording(run_id: str, key: str, result: Any, **kwargs: Any) -> Any:
        entry = record(run_id, key, result, **kwargs)
        request = kwargs["request"]
        response = "messages" in request
        print(f"journal {digest(request) if response else key}", flush=True)
        counted[0] += response or not responses_only
        if counted[0] == pause_after:
            print("paused record", flush=True)
            sys.stdin.readline()
        return entry

    store.record_call = recording  # type: ignore[method-assign]


def run(
    store: Store,
    run_id: str,
    ledger: Ledger,
    *,
    turns: int = 3,
    seed: int = 7,
    journal: bool = True,
    pause_after_record: int | None = None,
    pause_after_response: int | None = None,
) -> Any:
    """Run (or resume) the agent to its end; returns its answers and its journal's tally."""
    agent = Agent(ledger, seed)
    _report_recorded(store, pause_after_response or pause_after_record, pause_after_response is not None)
    hooks = {"send": agent.settled, "lookup": agent.settled}
    system = {"role": "system", "content": "You are a support agent."}
    with Run.open(store, run_id, messages=[system], state={"answers": []}, reconcile=hooks) as run:
        while run.active:
            messages = run.messages
            calls = unanswered(messages)
            if calls:
                for call in calls:
                    if journal:
                        tool = partial(agent.tool, call["name"], call["args"])
                        result = run.action(call["name"], call["args"], tool)
                    else:
                        result = agent.tool(call["name"], call["args"], f"{run_id}:{call['id']}")
                    run.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
            elif messages[-1]["role"] in ("user", "tool"):
                request = {"model": "scripted", "messages": list(messages)}
                if journal:
                    reply = run.call("model", request, agent.model, usage=usage)
                else:
                    reply = agent.model(request)
                    used = usage(reply)
                    run.add_usage(tokens_in=used.tokens_in, tokens_out=used.tokens_out, spend=used.spend)
                run.append(reply["message"])
                if "tool_calls" not in reply["message"]:
                    run.state["answers"].append(reply["message"]["content"])
                    run.commit()  # the turn's answer: one step per turn
            elif sum(m["role"] == "user" for m in messages) < turns:
                run.append({"role": "user", "content": QUESTIONS[sum(m["role"] == "user" for m in messages)]})
            else:
                run.finish()
        tally = run.journal
        return {
            "answers": run.state["answers"],
            "journal": {"replayed": tally.replayed, "resent": tally.resent, "divergences": tally.divergences},
        }
