"""What each page shows, read from the store: plain data for the templates (which escape it all).

Nothing here formats HTML. Stored values arrive as Python values and leave
as Python values; Jinja2's autoescaping makes every one of them text in the
page, whatever it holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import urlencode

from safepoint.blobs.base import BlobRef
from safepoint.errors import InvalidArgument, SafepointError
from safepoint.frameworks import framework_view, user_runs
from safepoint.harness import budgets
from safepoint.model import VALUE_FIELDS, Checkpoint, Status
from safepoint.readable import checkpoint_diff, describe, pending, question
from safepoint.records import RunInfo
from safepoint.step_calls import ShownCall, step_calls
from safepoint.store import QueueState, Store
from safepoint.store.admin import queue_states

from . import chart, chat, sidebyside, step_summary
from .paths import run_path

PAGE = 50  # runs per page
MESSAGES = chat.MESSAGES  # messages per page of a conversation


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
    since: str | None = None,
    until: str | None = None,
    label_has: str | None = None,
    sort: str | None = None,
    order: str | None = None,
) -> dict[str, Any]:
    """The runs list: the store's filters (status, exact labels, id prefix, last update since and
    until) and its order (``SORTS``: the whole store is sorted, pages follow the order) in its
    query; "label contains" (plain stores only) applied here over at most ``SCAN`` runs a request.
    With no sort asked, the newest run first (the listing an index serves)."""
    encrypted = store.settings.sealer is not None
    labels = None
    if label:
        name, sep, value = label.partition("=")
        if not sep:
            raise InvalidArgument("a label is searched as name=value")
        labels = {name: value}
    if label_has and encrypted:  # a sealed label is matched only whole, through its blind index
        raise InvalidArgument("on an encrypted store labels match only exactly: name=value")
    since_at, until_at = _moment(since, "since"), _moment(until, "until")
    filters: dict[str, Any] = {
        "status": status or None,
        "labels": labels,
        "run_id_prefix": prefix or None,
        "updated_since": since_at,
        "updated_until": until_at,
    }
    sort_key = sort if sort in SORTS else None
    descending = order != "asc"
    if sort_key is not None:
        filters.update(sort=SORTS[sort_key], descending=descending)
    lister = store.runs if show_all else partial(user_runs, store)
    kept: list[RunInfo] = []
    scanned, next_cursor = 0, cursor or None
    while True:
        page = lister(limit=PAGE, cursor=next_cursor, **filters)
        scanned += len(page.items)
        next_cursor = page.next_cursor
        kept += [r for r in page.items if _kept(r, label_has)]
        if not label_has:
            break
        if len(kept) >= PAGE or next_cursor is None or scanned >= SCAN:
            break
    now = datetime.now(UTC)
    queue = queue_states(store, kept)
    rows = [ListedRun(r, queue.get(r.run_id), now) for r in kept]
    failed = store.runs(status="failed", limit=10).items  # quarantined runs, with their reasons
    # The search as the form holds it: echoed into the form and carried by every link.
    fields = {
        "status": status or "",
        "label": label or "",
        "label_has": label_has or "",
        "prefix": prefix or "",
        "since": since or "",
        "until": until or "",
    }
    query = {**fields, **({"all": "1"} if show_all else {})}
    ordered = {} if sort_key is None else {"sort": sort_key, "order": "desc" if descending else "asc"}
    return {
        "runs": rows,
        "next_cursor": next_cursor,
        "next_query": urlencode({**query, **ordered}),
        "sort_links": {
            key: urlencode({**query, "sort": key, "order": _flipped(key, sort_key, descending)})
            for key in SORTS
        },
        "sort": sort_key or "",
        "descending": descending,
        "scanned": scanned if label_has else None,
        "encrypted": encrypted,
        "statuses": [s.value for s in Status],
        **fields,
        "show_all": show_all,
        "counts": store.run_counts(),
        "claimable": store.queue_depth(),
        "failed": [r for r in failed if r.last_error and not r.unreadable]
        if not status or status == "failed"
        else [],
    }


PAGE_SCAN = 40  # pages of runs a filter applied here reads at most in one request
SCAN = PAGE * PAGE_SCAN


@dataclass(frozen=True)
class ListedRun:
    """A listed run and where it stands with the workers (``QueueState``'s own words for it)."""

    run: RunInfo
    queue: QueueState | None
    now: datetime

    @property
    def holder(self) -> str | None:
        return None if self.queue is None else self.queue.holder(self.now)

    @property
    def lease_expires_at(self) -> datetime | None:
        return None if self.holder is None or self.queue is None else self.queue.expires_at

    @property
    def shown_status(self) -> str:
        """Its status, or "queued" for a running run that waits in the queue for a worker."""
        if self.run.unreadable is not None:
            return "unreadable"
        waiting = self.queue is not None and self.queue.waiting(self.now)
        return "queued" if waiting and self.run.status is Status.RUNNING else self.run.status.value


# The columns a click sorts, and the store's sort for each: columns every store keeps in the
# clear (``safepoint.store.sorting``). Labels and counters are sealed on an encrypted store:
# no sort by them anywhere, so the listing is the same on both kinds of store.
SORTS = {"id": "run_id", "status": "status", "step": "step", "updated": "updated"}


def _flipped(key: str, sort_key: str | None, descending: bool) -> str:
    """A heading's order when clicked: the other way on the sorted column, else names A to Z
    and numbers and times largest first."""
    if key == sort_key:
        return "asc" if descending else "desc"
    return "asc" if key in ("id", "status") else "desc"


def _kept(run: RunInfo, label_has: str | None) -> bool:
    """Whether ``label_has`` is in one of the run's labels written ``name=value`` (or not asked)."""
    if not label_has:
        return True
    return any(label_has in f"{name}={value}" for name, value in run.labels.items())


def _moment(text: str | None, name: str) -> datetime | None:
    """A time from the search form (``datetime-local``: no zone), read as UTC."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be a date and time such as 2026-01-31T12:00") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


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


def run_page(
    store: Store, run_id: str, steps_page: int = 1, find: str | None = None, chat_page: int | None = None
) -> dict[str, Any]:
    """The run: who holds it, its charts and its steps' summaries (from ``store.timeline``, no message
    body), and its head's conversation: whole if it fits a page, else page ``chat_page`` if asked."""
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
    pages = step_summary.pages_of(len(points))
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
        "holder": queue.holder(),
        "waiting": queue.waiting() and info.status is Status.RUNNING,
        "lines": lines,
        "chart": {"width": chart.WIDTH, "height": chart.HEIGHT},
        "recent": step_summary.summaries(points, page, forked=info.parent is not None) if points else [],
        "steps": len(points),
        "steps_page": page,
        "steps_pages": pages,
        "pending": pending(action) if action is not None else None,
        "question": question(action) if action is not None else None,
        "bars": bars,
        "framework": framework_view(info.labels, None),
        "forks": store.forks(run_id),
        "find": find or "",
        "found": found_in_conversation(store, run_id, find) if find else None,
        **_head_chat(store, info, points[-1].message_count if points else 0, chat_page),
    }


def _head_chat(store: Store, info: RunInfo, count: int, page: int | None) -> dict[str, Any]:
    """The head's conversation, a page of it (``count``: its messages, from the timeline). Shown
    whole when it fits one page; a longer one when a page is asked for — only then is the head
    loaded, so a long run's page costs no message body."""
    pages = chat.pages_of(count)
    if page is None and pages > 1:
        return {"chat": None, "chat_page": None, "chat_pages": pages, "chat_pending": None}
    cp = store.load(info.run_id, migrate=False, fetch_blobs=False)
    pages = chat.pages_of(len(cp.messages))
    page = pages if page is None else max(1, min(page, pages))

    def link(at: int) -> str:
        return run_path(info.run_id, chat=at)

    return {
        "chat": chat.conversation(cp.messages, cp.labels, page, link),
        "chat_page": page,
        "chat_pages": pages,
        "chat_pending": chat.pending_of(cp.pending_action) if page == pages else None,
    }


FOUND = 100  # matches a conversation search shows
AROUND = 60  # characters shown either side of a match


def found_in_conversation(store: Store, run_id: str, text: str) -> list[tuple[int, str, str, int]]:
    """The head's messages whose shown text holds ``text`` (any case), as (index, role, excerpt,
    the head step page it is on): the run is opened and read here, on an encrypted store too
    (no index of message text exists); the term is neither stored nor logged."""
    cp = store.load(run_id, migrate=False, fetch_blobs=False)
    wanted = text.casefold()
    found = []
    for index, message in enumerate(cp.messages):
        role, shown = describe(message)
        at = shown.casefold().find(wanted)
        if at < 0:
            continue
        start, end = max(0, at - AROUND), at + len(text) + AROUND
        excerpt = ("…" if start else "") + shown[start:end] + ("…" if end < len(shown) else "")
        found.append((index, role, excerpt, index // MESSAGES + 1))
        if len(found) == FOUND:
            break
    return found


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
    pages = chat.pages_of(len(cp.messages))
    page = max(1, min(page, pages))

    def link(at: int) -> str:
        return run_path(run_id, step=step, page=at)

    # The step before: the one below it, in the parent for a fork's first step (a copy of the parent's).
    parent = info.parent
    previous = None if step == 0 else (parent.run_id if parent and step == parent.step else run_id, step - 1)
    return {
        "cp": cp,
        "messages": chat.conversation(cp.messages, cp.labels, page, link),
        "page": page,
        "pages": pages,
        "pending_card": chat.pending_of(cp.pending_action) if page == pages else None,
        "previous": previous,
        "following": step + 1 if step < info.head_step else None,
        "fields": _fields(cp),
        "scrubbed": cp.scrub_report.counts,
        "blobs": _blob_refs([list(cp.messages), *(getattr(cp, name) for name in VALUE_FIELDS)]),
        "framework": framework_view(cp.labels, cp.state),
        "calls": calls,
    }


def diff_page(store: Store, run_id: str, step_a: int, step_b: int) -> dict[str, Any]:
    """Two steps side by side (any two, in either order): messages, then fields."""
    a = store.load(run_id, step_a, migrate=False, fetch_blobs=False)
    b = store.load(run_id, step_b, migrate=False, fetch_blobs=False)
    found = checkpoint_diff(a, b)
    shared = found["messages"]["shared"]
    return {
        "a": step_a,
        "b": step_b,
        "shared": shared,
        "removed": len(a.messages) - shared,
        "added": len(b.messages) - shared,
        "rows": sidebyside.message_rows(a.messages, b.messages, shared, chat.reader(b.labels)),
        "fields": sidebyside.field_rows(found["fields"]),
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
