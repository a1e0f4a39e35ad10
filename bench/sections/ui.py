"""The inspector's render time on big runs (issue 19): server time of the run page of a 10,000-step
run and the step page of a 2,000-message conversation, SQLite and PostgreSQL, plain and encrypted
(and, apart, the run's chat view: its head's last page of messages, which opens the head).

    .venv/bin/python bench/run.py --section ui

Each store gets one run saved as an agent saves it (``cp.next()``, one
~200-byte message and a token count a step, ``STEPS`` steps; the run page
charts all of them from ``store.timeline``) and one checkpoint of
``MESSAGES`` messages (the step page shows 200 of them). Each page is asked
for ``REPS`` times through Starlette's test client, in process (the ASGI app
and its handlers, the store's queries, the templates: what the server spends
on a request; no socket); the figure is the median wall time. A first
request, untimed, warms the store's caches as the operator's first click
would. Target: under 300 ms for both pages on every store.
"""

from __future__ import annotations

import base64
import statistics
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from scratch_stores import Made, scratch_stores  # noqa: E402

from safepoint import Checkpoint, open_store  # noqa: E402

STEPS, MESSAGES, REPS = 10_000, 2_000, 7
TARGET_MS = 300.0
KEYS = f"index:{base64.b64encode(bytes(range(32))).decode()} k1:{base64.b64encode(b'k' * 32).decode()}"


@dataclass(frozen=True)
class UiResult:
    store: str  # "SQLite", "PostgreSQL", each "+ encrypted" or not
    run_page_ms: float
    step_page_ms: float
    fill_s: float
    chat_view_ms: float = 0.0  # the 10,000-step run's head conversation, its last page (opens the head)


def filled(store: Any) -> None:
    cp = Checkpoint(run_id="big", counters={"tokens_in": 0})
    store.save(cp)
    for i in range(STEPS):
        cp = cp.next()
        cp.messages.append({"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "x" * 200})
        cp.counters["tokens_in"] += 5
        store.save(cp)
    messages = [{"role": "user", "content": f"m{i} " + "y" * 300} for i in range(MESSAGES)]
    store.save(Checkpoint(run_id="long", messages=messages))


def timed(store: Any) -> tuple[float, float, float]:
    from starlette.testclient import TestClient  # noqa: PLC0415

    from safepoint.ui import create_app  # noqa: PLC0415
    from safepoint.ui.paths import run_path  # noqa: PLC0415

    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    out = []
    last = -(-STEPS // 200)  # the chat view's last page (200 messages a page)
    for path in (run_path("big"), run_path("long", step=0), run_path("big", chat=last)):
        assert client.get(path).status_code == 200
        times = []
        for _ in range(REPS):
            began = time.perf_counter()
            answer = client.get(path)
            times.append((time.perf_counter() - began) * 1000)
            assert answer.status_code == 200
        out.append(statistics.median(times))
    return out[0], out[1], out[2]


def stores(pg_url: str | None) -> AbstractContextManager[Made]:
    """(name, url, options) of each store measured; PostgreSQL in scratch schemas, dropped after."""
    return scratch_stores("ui", pg_url, KEYS)


def run(pg_url: str | None) -> list[UiResult]:
    results = []
    with stores(pg_url) as made:
        for name, url, options in made:
            store = open_store(url, **options)
            began = time.perf_counter()
            filled(store)
            fill = time.perf_counter() - began
            run_ms, step_ms, chat_ms = timed(store)
            store.close()
            results.append(UiResult(name, run_ms, step_ms, fill, chat_ms))
    return results
