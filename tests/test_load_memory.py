"""A load's peak memory stays within 3x the message bytes it returns (issue 17).

Measured with ``tracemalloc`` above what the test holds before the load:
the rows read, the bodies split out of them and the decoded messages must
not all be alive at once.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import safepoint
from safepoint import Checkpoint, codec

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
