"""The agent the backup tests run, stop half way, back up, restore and resume: its answer is
known, so a restored run that resumes to it lost nothing and repeated nothing it recorded.

Each step appends a tool message large enough to be offloaded to the blob store (unique per
run and step), records one tool call through ``Run.action`` (the call journal) and adds both
into ``state["total"]``. ``keyring_text``/``key_material`` make a fresh keyring and the byte
strings that must never appear in a backup's files.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from safepoint import Status, Store
from safepoint.harness import Run

STEPS = 6
BLOB_THRESHOLD = 1024  # the tool messages (2.5 kB) go to the blob store


def tool_output(run_id: str, step: int) -> str:
    return f"{run_id}/{step}:" + hashlib.sha256(f"{run_id}/{step}".encode()).hexdigest() * 40


def answer(run_id: str) -> int:
    """What the uninterrupted run ends with in ``state["total"]``."""
    return sum(len(tool_output(run_id, step)) + step * step for step in range(STEPS))


def work(store: Store, run_id: str, upto: int) -> None:
    """Open (or resume) the run and take steps until ``upto`` are done; finish it at ``STEPS``."""
    with Run.open(store, run_id, state={"total": 0}) as run:
        while run.active and run.steps < upto:
            step = run.steps
            run.append({"role": "tool", "content": tool_output(run_id, step)})
            squared = run.action("square", {"n": step}, lambda _key, n=step: n * n)
            run.state["total"] += len(tool_output(run_id, step)) + squared
            if run.steps + 1 == STEPS:
                run.finish()
            else:
                run.commit()


def finished_right(store: Store, run_id: str) -> bool:
    head = store.load(run_id)
    contents = [message["content"] for message in head.messages]
    expected = [tool_output(run_id, step) for step in range(STEPS)]
    return head.status == Status.DONE and head.state["total"] == answer(run_id) and contents == expected


def keyring_text() -> tuple[str, list[bytes]]:
    """A keyring's text (a key file's lines) with fresh keys, and each key's raw bytes."""
    index, key = os.urandom(32), os.urandom(32)
    text = f"index:{base64.b64encode(index).decode()}\nk1:{base64.b64encode(key).decode()}\n"
    return text, [index, key]


def key_material(raw_keys: list[bytes]) -> list[bytes]:
    """Every form a key could be written in: raw, base64, hex."""
    return [form for key in raw_keys for form in (key, base64.b64encode(key), key.hex().encode())]


def files_holding(folder: Path, needles: list[bytes]) -> list[str]:
    """The files under ``folder`` whose bytes contain any of ``needles``."""
    return [
        str(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and any(needle in path.read_bytes() for needle in needles)
    ]
