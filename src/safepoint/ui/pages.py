"""What each page shows, read from the store: plain data for the templates (which escape it all).

Nothing here formats HTML. Stored values arrive as Python values and leave
as Python values; Jinja2's autoescaping makes every one of them text in the
page, whatever it holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from safepoint.blobs.base import BlobRef
from safepoint.errors import SafepointError
from safepoint.frameworks import framework_view, user_runs
from safepoint.harness import budgets
from safepoint.model import VALUE_FIELDS, Checkpoint, Status
from safepoint.readable import checkpoint_diff, describe, pending, question
from safepoint.step_calls import ShownCall, step_calls
from safepoint.store import Store

from . import chart

PAGE = 50  # runs per page
MESSAGES = 200  # messages per page of a step


def shown_json(value: Any) -> str:
    """A stored value as indented JSON text (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def runs_page(
    store: Store,
    *,
    status: str | None,
    label: str | None,
    prefix: str | None,
    cursor: str | None,
    show_all: bool = False,
) -> dict[str, Any]:
    labels = None
    if label:
        name, _, value = label.partition("=")
        labels = {name: value}
    filters: dict[str, Any] = {"status": status or None, "labels": labels, "run_id_prefix": prefix or None}
    lister = store.runs if show_all else partial(user_runs, store)
    page = lister(limit=PAGE, cursor=cursor or None, **filters)
    runs = page.items
    failed = store.runs(status="failed", limit=10).items  # quarantined runs, with their reasons
    return {
        "runs": runs,
        "next_cursor": page.next_cursor,
        "statuses": [s.value for s in Status],
        "status": status or "",
        "label": label or "",
        "prefix": prefix or "",
        "show_all": show_all,
        "counts": store.run_counts(),
        "claimable": store.queue_depth(),
        "failed": [r for r in failed if r.last_error and not r.unreadable]
        if not status or status == "failed"
        else [],
    }


@dataclass(frozen=True)
class BudgetBar:
    name: str
    used: float
    limit: float | None

    @property
    def percent(self) -> int:
        if not self.limit:
            return 0
        return max(0, min(100, round(100 * self.used / self.limit)))


def run_page(store: Store, run_id: str, steps_page: int = 1) -> dict[str, Any]:
    info = store.run(run_id)
    queue = store.queue_state(run_id)
    points = store.timeline(run_id)
    steps = [p.step for p in points]
    lines = [
        chart.line(
            "tokens",
            steps,
            [_number(p.counters, "tokens_in") + _number(p.counters, "tokens_out") for p in points],
        ),
        chart.line("spend", steps, [_number(p.counters, "spend") for p in points]),
        chart.line("bytes", steps, [float(p.stored_bytes) for p in points]),
        chart.line("messages", steps, [float(p.message_count) for p in points]),
    ]
    newest_first = points[::-1]
    pages = max(1, -(-len(points) // PAGE))
    page = max(1, min(steps_page, pages))
    action = points[-1].pending_action if points else None  # the head's, as stored: no message loaded
    limits = budgets.Budget.from_counters(info.counters)
    used = budgets.used(info.counters)
    bars = [
        BudgetBar(name, float(used.get(name, 0)), getattr(limits, name))
        for name in ("tokens", "spend", "steps")
        if getattr(limits, name) is not None
    ]
    return {
        "info": info,
        "queue": queue,
        "leased": queue.leased(),
        "lines": lines,
        "chart": {"width": chart.WIDTH, "height": chart.HEIGHT},
        "recent": newest_first[(page - 1) * PAGE : page * PAGE],
        "steps": len(points),
        "steps_page": page,
        "steps_pages": pages,
        "pending": pending(action) if action is not None else None,
        "question": question(action) if action is not None else None,
        "bars": bars,
        "framework": framework_view(info.labels, None),
        "forks": store.forks(run_id),
    }


def step_page(store: Store, run_id: str, step: int, page: int) -> dict[str, Any]:
    cp = store.load(run_id, step, migrate=False, fetch_blobs=False)
    info = store.run(run_id)
    try:  # its own, the open step's at the head, a fork's parent's at its fork step
        calls: list[tuple[ShownCall, str]] | str = [
            (call, shown_json(call.entry.result))
            for call in step_calls(store, run_id, step, head_step=info.head_step, parent=info.parent)
        ]
    except SafepointError as exc:  # a damaged entry: verify names it
        calls = type(exc).__name__
    pages = max(1, -(-len(cp.messages) // MESSAGES))
    page = max(1, min(page, pages))
    start = (page - 1) * MESSAGES
    messages = [(start + i, *describe(m)) for i, m in enumerate(cp.messages[start : start + MESSAGES])]
    return {
        "cp": cp,
        "messages": messages,
        "page": page,
        "pages": pages,
        "fields": _fields(cp),
        "scrubbed": cp.scrub_report.counts,
        "blobs": _blob_refs([list(cp.messages), *(getattr(cp, name) for name in VALUE_FIELDS)]),
        "framework": framework_view(cp.labels, cp.state),
        "calls": calls,
    }


def diff_page(store: Store, run_id: str, step_a: int, step_b: int) -> dict[str, Any]:
    a = store.load(run_id, step_a, migrate=False, fetch_blobs=False)
    b = store.load(run_id, step_b, migrate=False, fetch_blobs=False)
    found = checkpoint_diff(a, b)
    return {
        "a": step_a,
        "b": step_b,
        "shared": found["messages"]["shared"],
        "removed": [describe(m) for m in list(a.messages)[found["messages"]["shared"] :]],
        "added": [describe(m) for m in found["messages"]["added"]],
        "fields": [(c["path"], shown_json(c["before"]), shown_json(c["after"])) for c in found["fields"]],
    }


def _fields(cp: Checkpoint) -> list[tuple[str, str]]:
    return [
        ("counters", shown_json(cp.counters)),
        *((name, shown_json(getattr(cp, name))) for name in VALUE_FIELDS),
        ("labels", shown_json(cp.labels)),
    ]


def _blob_refs(value: Any, found: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    found = [] if found is None else found
    if isinstance(value, BlobRef):
        found.append({"digest": value.digest, "size": value.size, "media_type": value.media_type})
    elif isinstance(value, dict):
        for item in value.values():
            _blob_refs(item, found)
    elif isinstance(value, list):
        for item in value:
            _blob_refs(item, found)
    return found[:100]


def _number(counters: dict[str, Any], name: str) -> float:
    value = counters.get(name, 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
