"""The demo agent: a deterministic scripted agent on ``Run`` that works a batch of documents.

It is the workload of ``safepoint demo`` and of the crash-kit tests (as the entry point
``safepoint.demo.agent:run_demo_agent``, with ``safepoint.demo.agent:store_options``), and
an example of an agent written to survive crashes. Each step it asks a fake
model (a function of the run's seed and step: no network, no randomness),
then takes the tool calls the model made, through ``run.action``:

* ``read_document`` — pure; rerun after a crash;
* ``enrich`` — an API called with a key from a registered secret
  (``DEMO_API_KEY``); its response echoes the request URL, key included, so the
  store's scrubber has something to replace. The service dedupes by
  idempotency key (``ledger.once``), so a rerun is harmless;
* ``build_report`` — returns about 200 KB (a value for blob offload);
* ``publish_report`` — not idempotent (``ledger.record``): its reconcile hook
  asks the ledger whether the report went out, and skips or reruns.

The loop decides every move from the run alone (an unanswered tool call in
the last message is taken first), so it continues the same way whether it
started fresh, resumed at a step boundary, or resumed with an action pending.

    ledger = Ledger("effects.db")
    store = safepoint.open_store("sqlite:///demo.db", **store_options())
    run_demo_agent(store, "demo-1", ledger)      # {"status": "done", "answer": …}
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from safepoint.crashrig.fake_model import PRICE_IN, PRICE_OUT, document_text, fake_model
from safepoint.crashrig.ledger import Ledger
from safepoint.errors import BudgetExceeded
from safepoint.harness import Budget, PendingAction, Reconcile, ReconcileHook, Run
from safepoint.model import JSONDict
from safepoint.scrub import Secrets
from safepoint.store import Store

API_KEY_NAME = "DEMO_API_KEY"
DEMO_API_KEY = "dk-" + hashlib.sha256(b"safepoint demo api key").hexdigest()[:32]  # fake, but never stored
REPORT_BYTES = 200_000
DEFAULT_BUDGET = Budget(tokens=60_000, spend=100.0, steps=40)  # spend in cents
Call = dict[str, Any]


def store_options() -> dict[str, Any]:
    """``open_store`` options the agent needs: its API key registered as a secret."""
    return {"secrets": Secrets().add(API_KEY_NAME, DEMO_API_KEY)}


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


# -- tools: each takes the call's arguments and the action's idempotency key ------


def read_document(args: JSONDict, key: str, ledger: Ledger) -> str:
    return document_text(int(args["seed"]), int(args["index"]))


def enrich(args: JSONDict, key: str, ledger: Ledger) -> str:
    index = int(args["index"])
    url = f"https://api.example.test/v1/enrich?doc={index}&api_key={DEMO_API_KEY}"
    labels = ledger.once(key, lambda: [f"topic-{_digest('label', index, i)[:6]}" for i in range(2)])
    return f"POST {url} -> 200 labels {' '.join(labels)}"


def build_report(args: JSONDict, key: str, ledger: Ledger) -> str:
    lines, size, i = [], 0, 0
    while size < REPORT_BYTES:
        line = f"{i:05d} {args['digest']} {_digest('report', args['digest'], i)}\n"
        lines.append(line)
        size, i = size + len(line), i + 1
    return "".join(lines)


def published(key: str) -> str:
    """What ``publish_report`` returns — also what its reconcile hook records when skipping it."""
    return f"published as msg-{key[:12]}"


def publish_report(args: JSONDict, key: str, ledger: Ledger) -> str:
    ledger.record(key, {"channel": args["channel"], "report": args["report"]})
    return published(key)


TOOLS: dict[str, Callable[[JSONDict, str, Ledger], str]] = {
    "read_document": read_document,
    "enrich": enrich,
    "build_report": build_report,
    "publish_report": publish_report,
}


def reconcile_hooks(ledger: Ledger) -> dict[str, ReconcileHook]:
    """What to do with each tool's action when a crash left it pending."""

    def publish(action: PendingAction) -> Reconcile:
        # Not idempotent: ask the outside world whether it happened.
        if ledger.happened(action.key):
            return Reconcile.skip(published(action.key))
        return Reconcile.rerun()

    rerun = Reconcile.rerun()
    return {"read_document": rerun, "enrich": rerun, "build_report": rerun, "publish_report": publish}


# -- the agent loop ----------------------------------------------------------------


def _unanswered(messages: list[JSONDict]) -> tuple[int, list[Call]]:
    """The last assistant message's index and its tool calls that have no reply yet."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[index + 1 :]}
            calls = [c for c in messages[index].get("tool_calls") or () if c["id"] not in answered]
            return index, calls
    return -1, []


def _plan(run: Run) -> list[Call]:
    """The model's tool calls for this step, decided from the run's state alone."""
    config, state, batch = run.state["config"], run.state, run.cursors["batch"]
    step, seed = run.steps, int(config["seed"])
    calls: list[Call] = []
    if batch["done"] < batch["total"]:
        index = int(batch["done"])
        calls.append({"name": "read_document", "arguments": {"seed": seed, "index": index}})
        if index % int(config["enrich_every"]) == 0:
            calls.append({"name": "enrich", "arguments": {"index": index}})
    elif "report" not in state:
        calls.append({"name": "build_report", "arguments": {"digest": _digest(state["findings"])[:16]}})
    elif "published" not in state:
        calls.append(
            {"name": "publish_report", "arguments": {"channel": "#reports", "report": state["report"]}}
        )
    return [{"id": f"call-{step}-{i}", **call} for i, call in enumerate(calls)]


def _absorb(run: Run, first: int) -> None:
    """Fold the step's tool results (the messages after index ``first``) into cursors and state."""
    state = run.state
    for message in run.messages[first + 1 :]:
        name, content = message["name"], str(message["content"])
        if name == "read_document":
            state["findings"].append(content.split()[2])
            run.advance("batch")
        elif name == "enrich":
            state["labels"].append(content.rsplit(" labels ", 1)[1])
        elif name == "build_report":
            state["report"] = _digest(content)[:16]
        elif name == "publish_report":
            state["published"] = content


def _tool(name: str, args: JSONDict, ledger: Ledger) -> Callable[[str], str]:
    """The action's function: it gets the idempotency key, the tool gets the rest."""
    return lambda key: TOOLS[name](args, key, ledger)


def _step(run: Run, ledger: Ledger) -> None:
    first, calls = _unanswered(run.messages)
    if not calls:  # a fresh step: ask the model
        calls = _plan(run)
        seed = int(run.state["config"]["seed"])
        reply = fake_model(seed, run.steps, str(run.messages[-1]["content"])[:4000])
        cost = (reply.tokens_in * PRICE_IN + reply.tokens_out * PRICE_OUT) / 1000
        run.add_usage(tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, spend=cost)
        if not calls:
            run.append({"role": "assistant", "content": f"Summary: {reply.text}"})
            run.state["answer"] = _digest(run.state["findings"], run.state["labels"], run.state["published"])
            run.finish()
            return
        run.append({"role": "assistant", "content": reply.text, "tool_calls": calls})
        first = len(run.messages) - 1
    for call in calls:
        name, args = call["name"], call["arguments"]
        result = run.action(name, args, _tool(name, args, ledger))
        run.append({"role": "tool", "tool_call_id": call["id"], "name": name, "content": result})
    _absorb(run, first)
    run.commit()


def run_demo_agent(
    store: Store,
    run_id: str,
    ledger: Ledger,
    *,
    documents: int = 10,
    seed: int = 7,
    enrich_every: int = 3,
    budget: Budget | None = DEFAULT_BUDGET,
) -> JSONDict:
    """Run (or resume) the demo agent until it stops; return its status and answer.

    The store must have ``store_options()``'s secret registered: the run is
    resumed with its secrets resolved, so the agent sees what it saw before
    the crash. A ``budget`` that runs out ends the run as failed (returned,
    not raised: an expected ending for this agent).
    """
    config = {"seed": seed, "documents": documents, "enrich_every": enrich_every}
    try:
        with Run.open(
            store,
            run_id,
            budget=budget,
            labels={"agent": "demo"},
            state={"config": config, "findings": [], "labels": []},
            cursors={"batch": {"done": 0, "total": documents}},
            messages=[
                {"role": "system", "content": "You are a careful research agent."},
                {"role": "user", "content": f"Read the {documents} documents, then publish a report."},
            ],
            resolve_secrets=True,
            reconcile=reconcile_hooks(ledger),
        ) as run:  # held until the block ends: one live writer
            while run.active:
                _step(run, ledger)
    except BudgetExceeded:
        return {"status": "failed", "answer": None}
    return {"status": run.status.value, "answer": run.state.get("answer")}
