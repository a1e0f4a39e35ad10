"""A load's peak memory stays within 3x the message bytes it returns (issue 17).

Measured with ``tracemalloc`` above what the test holds before the load:
the rows read, the bodies split out of them and the decoded messages must
not all be alive at once.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, codec
from test_encryption import keyring

HOSTILE = "\u202e'); DROP TABLE safepoint_runs;-- {{7*7}} ${jndi:x} "


def test_loading_a_long_run_peaks_within_three_times_its_message_bytes(tmp_path: Path) -> None:
    with safepoint.open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        cp = Checkpoint(run_id="long")
        for step in range(300):
            if step:
                cp = cp.next()
            cp.messages.append({"role": "user", "content": f"{HOSTILE}{step} " + "q" * 1500})
            cp.messages.append({"role": "assistant", "content": f"answer {step} " + "a" * 1500})
            store.save(cp)
        message_bytes = sum(len(codec.encode(m)) for m in cp.messages)
        del cp
        store.load("long")  # warm: the statement cache and the store's first-load work
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            loaded = store.load("long")
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert len(loaded.messages) == 600
        assert loaded.messages[0]["content"].startswith(HOSTILE)
        assert peak <= 3 * message_bytes, f"peak {peak:,} B for {message_bytes:,} message bytes"


WORDS = ("plan", "tool", "order", "refund", "shipped", "customer", "invoice", "status", "agent", "reply")


def _words(step: int, count: int) -> str:
    return " ".join(WORDS[(step * 7 + i * 3) % len(WORDS)] for i in range(count))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_first_load_holds_the_rows_or_the_messages_not_both(tmp_path: Path, encrypted: bool) -> None:
    """A store that never saw the run (a fresh process resuming it) loads 200 steps of 2 KB
    messages within 1.5x their bytes: each row's bytes go as its messages are made, and the
    verification memo keeps no copy of a run loaded once (both in full were 2.3x)."""
    options = {"encryption": keyring()} if encrypted else {}
    url = f"sqlite:///{tmp_path / 's.db'}"
    with safepoint.open_store(url, **options) as store:
        cp = Checkpoint(run_id="long")
        for step in range(200):
            if step:
                cp = cp.next()
            cp.messages.append({"role": "user", "content": f"{step} " + _words(step, 300)})
            cp.messages.append({"role": "assistant", "content": f"{step} " + _words(step + 1, 300)})
            store.save(cp)
        message_bytes = sum(len(codec.encode(m)) for m in cp.messages)
        expected = [dict(m) for m in cp.messages]
        del cp
    with safepoint.open_store(url, **options) as fresh:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            loaded = fresh.load("long")
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert loaded.messages == expected
        assert peak <= 1.5 * message_bytes, f"peak {peak:,} B for {message_bytes:,} message bytes"
        again = fresh.load("long")  # a second load keeps what it verified, and gives the same
        assert again.messages == expected
