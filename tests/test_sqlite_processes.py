"""Several processes writing one SQLite file at once: nothing lost, nothing torn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import safepoint

WRITER = r"""
import sys, safepoint
url, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = safepoint.open_store(url)
conflicts = 0
# Each writer grows its own run and also races the others on a shared run.
own = safepoint.Checkpoint(run_id=name)
for step in range(steps):
    own.step = step
    own.messages.append({"role": "user", "content": f"{name} {step} " + "x" * 300})
    own.counters["steps"] = step + 1
    store.save(own)
    while True:
        try:
            shared = store.load("shared").next()
        except safepoint.NotFound:
            shared = safepoint.Checkpoint(run_id="shared")
        shared.messages.append({"role": "user", "content": f"{name} {step}"})
        try:
            store.save(shared)
            break
        except safepoint.Conflict:
            conflicts += 1
print(conflicts)
"""


def test_four_processes_share_one_file(tmp_path: Path) -> None:
    """4 writer processes, own runs plus one contended run: every save lands exactly once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    steps = 40
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, f"writer-{n}", str(steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    conflicts = 0
    for proc in writers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        conflicts += int(out.strip())
    with safepoint.open_store(url) as store:
        for n in range(4):
            run = store.load(f"writer-{n}")
            assert run.step == steps - 1
            assert [m["content"].split()[1] for m in run.messages] == [str(s) for s in range(steps)]
        shared = store.load("shared")
        assert shared.step == 4 * steps - 1
        assert len(shared.messages) == 4 * steps
        for n in range(4):
            mine = [m["content"] for m in shared.messages if m["content"].startswith(f"writer-{n} ")]
            assert mine == [f"writer-{n} {s}" for s in range(steps)]
        for info in store.history("shared"):
            store.load("shared", info.step)  # every step verifies
    print(f"4 processes x {steps} steps, {conflicts} conflicts retried")
