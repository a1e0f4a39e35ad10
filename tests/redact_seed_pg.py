"""Runs that hold one hostile value everywhere a redaction must reach, and how to look for it.

``seed_run`` writes a run whose messages, state, pending action, a (non-adapter) label,
a journal entry and blobs hold ``VALUE`` in three forms: raw, JSON-escaped (a JSON
document kept as a string) and base64. ``needles`` gives every byte form the value
could take in what a store writes — a ``pg_dump`` (COPY text doubles backslashes,
bytea is hex), an S3 object, a SQLite page — so that 0 hits means it is gone.
``holds_value`` looks through a loaded checkpoint or entry; ``resume`` takes the next step.
Used by test_redact_postgres.py and test_redact_kill.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from safepoint import Checkpoint, Store

# Quotes, a backslash, a slash, HTML and non-ASCII and astral characters: what escapes
# differently in every encoding. Not a token shape a default rule knows, so saves keep it.
VALUE = "Zq'v\"9\\k/<é>&😀-dsr-4471"
LABEL = "owner"  # a label an adapter does not resolve runs by: redacted, not left


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def forms(value: str = VALUE) -> list[str]:
    """The value as a save is given it: raw, escaped once and twice by JSON (either
    escaping of non-ASCII), and base64."""
    escaped = [json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
    twice = [json.dumps(text)[1:-1] for text in escaped]
    return sorted({value, *escaped, *twice, b64(value)})


def needles(value: str = VALUE) -> list[bytes]:
    """Every byte string whose presence in a dump, object or file means the value is there."""
    out: set[bytes] = set()
    for form in forms(value):
        data = form.encode()
        out |= {data, form.replace("\\", "\\\\").encode(), data.hex().encode(), data.hex().upper().encode()}
    return sorted(out)


def hits(data: bytes, value: str = VALUE) -> int:
    """How many of the value's byte forms ``data`` holds (0: none)."""
    return sum(data.count(needle) for needle in needles(value))


def big(run_id: str, size: int) -> str:
    """A text of about ``size`` characters holding the value raw and in base64: a blob."""
    filler = (run_id + "-filler. ") * (size // (len(run_id) + 9) + 1)
    return f"{filler[: size // 2]} {VALUE} {filler[: size // 2]} {b64(VALUE)} end"


def seed_run(store: Store, run_id: str, *, blob_size: int, calls: bool = True) -> None:
    """Three steps and (``calls``) a journal entry, each holding the value; a blob at steps 1
    and in the entry (``blob_size`` above the store's threshold). Step 2 adds a message
    without it, so its chain values change when step 0's message is redacted."""
    cp = Checkpoint(
        run_id=run_id,
        messages=[{"role": "user", "content": f"my key is {VALUE}, keep it"}],
        state={"raw": VALUE, "doc": json.dumps({"token": VALUE}), "b64": b64(VALUE), "n": 0},
        pending_action={"tool": "send", "args": {"token": VALUE, "to": "ops"}},
        labels={LABEL: f"by {VALUE}", "team": "red"},
    )
    store.save(cp)
    if calls:
        store.record_call(run_id, "fetch-1", {"answer": f"found {VALUE}", "page": big(run_id, blob_size)})
    cp = cp.next()
    cp.pending_action = None
    cp.messages.append({"role": "tool", "content": big(run_id, blob_size)})
    cp.state["n"] = 1
    store.save(cp)
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": f"done with {run_id}"})
    cp.state["n"] = 2
    store.save(cp)


def holds_value(value: Any) -> bool:
    """Whether any form of the value is in ``value`` (a checkpoint's dict, an entry's result)."""
    text = json.dumps(value, ensure_ascii=False)
    return any(form in text for form in forms())


def loaded_clean(store: Store, run_id: str) -> list[int]:
    """The steps (and -1 for the journal) of ``run_id`` whose loaded content holds the value."""
    dirty = [
        info.step for info in store.history(run_id) if holds_value(content(store.load(run_id, info.step)))
    ]
    if any(holds_value(entry.result) for entry in store.recorded_calls(run_id)):
        dirty.append(-1)
    return dirty


def content(cp: Checkpoint) -> dict[str, Any]:
    """What a checkpoint holds, without what the store sets (timestamps, digest, report)."""
    data = cp.to_dict()
    return {
        key: data[key]
        for key in (
            "step",
            "status",
            "messages",
            "counters",
            "cursors",
            "state",
            "pending_action",
            "labels",
            "parent",
        )
    }


def resume(store: Store, run_id: str) -> int:
    """Load the head, take one more step, save it: the step saved."""
    cp = store.load(run_id).next()
    cp.messages.append({"role": "user", "content": "carry on"})
    cp.state["n"] = cp.step
    return store.save(cp).step
