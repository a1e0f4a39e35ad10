"""What encryption at rest costs: client CPU per save and per load, encrypted against plain, and rekey's pace.

    .venv/bin/python bench/sections/encryption.py             # SQLite, 3 processes
    .venv/bin/python bench/run.py --section encryption        # the same, as make bench runs it

The workload is the agent every SQLite section is fed (``workloads.agent``:
two messages a step, ~500-byte replies, a ~50 KB tool output every tenth
step), saved the way users save it (``cp.next()``, the step applied,
``store.save``), with blobs on: ``blob_threshold`` is 16 KiB, so every tool
output goes to the blob folder — sealed under a keyed name on the
encrypted store. Two stores take turns in one process, each on its own
file: ``plain`` (the default options) and ``encrypted`` (the same with a
keyring), in blocks of ``BLOCK`` saves whose order alternates. Only
``store.save`` and ``store.load`` are timed, with ``time.process_time``.

Saves are reported around step 10 (steps 1-20) and step 1000 (steps
991-1010), loads of the latest checkpoint at step 10 and step 1000 (each
loaded ``LOADS`` times, the blobs fetched). Each rep is a fresh process;
the ratios are medians of the reps' own encrypted/plain ratios. Target:
<= 1.15x at both steps, for saves and for loads.

``rekey``: a store of ``REKEY_RUNS`` runs of ``REKEY_STEPS`` agent steps,
encrypted under one key, then ``rekey_store`` under a keyring with a new
writing key: rows and stored bytes re-sealed per second (wall clock).
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from workloads import agent as agent_workload  # noqa: E402

from safepoint import Checkpoint, Keyring, open_store  # noqa: E402

STEPS = 1011
BLOCK = 10
LOADS = 10
EARLY_RUNS = 20
WINDOWS = {10: (1, 11), 1000: (991, 1011)}  # the saves reported as "at step N": steps [a, b)
TARGET = 1.15
BLOB_THRESHOLD = 16 * 1024
REKEY_RUNS, REKEY_STEPS = 100, 40
CONFIGS = ("plain", "encrypted")


def _key(byte: int) -> str:
    return base64.b64encode(bytes([byte]) * 32).decode()


KEYRING_TEXT = f"index:{_key(1)} k1:{_key(2)}"  # fixed bench keys: the cost does not depend on them
ROTATED_TEXT = f"{KEYRING_TEXT} k2:{_key(3)}"


@dataclass(frozen=True)
class EncryptionResult:
    reps: int
    save_us: dict[str, dict[int, float]]  # config -> step -> median CPU us per save
    load_us: dict[str, dict[int, float]]
    save_ratio: dict[int, float]  # step -> median over reps of encrypted / plain
    load_ratio: dict[int, float]
    save_ratios: dict[int, list[float]]
    load_ratios: dict[int, list[float]]
    flat: dict[str, float]  # config -> save at step 1000 / save at step 10
    rekey_rows: int
    rekey_bytes: int
    rekey_seconds: float

    @property
    def rekey_rows_per_s(self) -> float:
        return self.rekey_rows / self.rekey_seconds

    @property
    def rekey_mb_per_s(self) -> float:
        return self.rekey_bytes / self.rekey_seconds / 1e6


def _options(config: str) -> dict[str, Any]:
    options: dict[str, Any] = {"blob_threshold": BLOB_THRESHOLD}
    if config == "encrypted":
        options["encryption"] = Keyring.from_text(KEYRING_TEXT)
    return options


def measure(folder: str) -> dict[str, Any]:
    """One process, both stores taking turns: CPU us per save and per load at steps 10 and 1000."""
    steps = agent_workload.build(STEPS).steps
    stores = {c: open_store(f"sqlite:///{folder}/{c}.db", **_options(c)) for c in CONFIGS}
    early: dict[str, list[float]] = {c: [] for c in CONFIGS}
    loads: dict[str, dict[int, list[float]]] = {c: {10: [], 1000: []} for c in CONFIGS}
    # Step 10: EARLY_RUNS short runs per store, each saved to step 10 and loaded there, alternating.
    for run in range(EARLY_RUNS):
        order = CONFIGS if run % 2 == 0 else CONFIGS[::-1]
        for config in order:
            cp = _saved(stores[config], f"early-{run}", steps[1:11], early[config])
            loads[config][10] += _loads(stores[config], cp.run_id)
    # Step 1000: one long run per store, in blocks of BLOCK saves whose order alternates.
    cps = {c: Checkpoint(run_id=f"long-{c}") for c in CONFIGS}
    for config in CONFIGS:
        stores[config].save(cps[config])
    late: dict[str, list[float]] = {c: [] for c in CONFIGS}
    for turn, first in enumerate(range(1, STEPS, BLOCK)):
        order = CONFIGS if turn % 2 == 0 else CONFIGS[::-1]
        for config in order:
            timed = late[config] if first >= WINDOWS[1000][0] else []
            cps[config] = _saved(stores[config], cps[config], steps[first : first + BLOCK], timed)
        if first + BLOCK == 1001:  # both runs are at step 1000: their loads
            for config in order:
                loads[config][1000] += _loads(stores[config], cps[config].run_id)
    for store in stores.values():
        store.close()
    return {
        "saves": {
            c: {"10": statistics.median(early[c]), "1000": statistics.median(late[c])} for c in CONFIGS
        },
        "loads": {c: {str(k): statistics.median(v) for k, v in loads[c].items()} for c in CONFIGS},
    }


def _saved(store: Any, cp: Checkpoint | str, steps: list[Any], cpu: list[float]) -> Checkpoint:
    """``steps`` saved as users save them (a run named by ``cp`` starts at step 0, untimed)."""
    if isinstance(cp, str):
        cp = Checkpoint(run_id=cp)
        store.save(cp)
    for agent_step in steps:
        cp = cp.next()
        agent_step.apply(cp)
        began = time.process_time()
        store.save(cp)
        cpu.append((time.process_time() - began) * 1e6)
    return cp


def _loads(store: Any, run_id: str) -> list[float]:
    out = []
    for _ in range(LOADS):
        began = time.process_time()
        store.load(run_id)
        out.append((time.process_time() - began) * 1e6)
    return out


def rekey(folder: str) -> tuple[int, int, float]:
    """Rows re-sealed, their stored bytes, and the seconds ``rekey_store`` took."""
    from safepoint.store.admin import rekey_store  # noqa: PLC0415

    url = f"sqlite:///{folder}/rekey.db"
    steps = agent_workload.build(REKEY_STEPS).steps
    store = open_store(url, **_options("encrypted"))
    for run in range(REKEY_RUNS):
        cp = Checkpoint(run_id=f"rekey-{run}")
        store.save(cp)
        for agent_step in steps[1:]:
            cp = cp.next()
            agent_step.apply(cp)
            store.save(cp)
    store.close()
    size = sum(p.stat().st_size for p in Path(folder).glob("rekey.db*"))
    rotated = open_store(url, blob_threshold=BLOB_THRESHOLD, encryption=Keyring.from_text(ROTATED_TEXT))
    began = time.perf_counter()
    done = rekey_store(rotated)
    seconds = time.perf_counter() - began
    rotated.close()
    return done.rows, size, seconds


_CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
from sections import encryption
print(json.dumps(encryption.measure({folder!r})))
"""


def run(reps: int = 3) -> EncryptionResult:
    samples = []
    with tempfile.TemporaryDirectory(prefix="safepoint-encryption-") as tmp:
        for rep in range(reps):
            folder = Path(tmp) / f"rep{rep}"
            folder.mkdir()
            script = _CHILD.format(bench=str(BENCH_DIR), folder=str(folder))
            done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"encryption bench child failed:\n{done.stderr}")
            samples.append(json.loads(done.stdout.splitlines()[-1]))
        rekey_folder = Path(tmp) / "rekey"
        rekey_folder.mkdir()
        rows, size, seconds = rekey(str(rekey_folder))

    # (JSON made the step keys text.)
    def median_of(kind: str) -> dict[str, dict[int, float]]:
        return {
            c: {s: statistics.median(x[kind][c][str(s)] for x in samples) for s in WINDOWS} for c in CONFIGS
        }

    def ratios(kind: str) -> dict[int, list[float]]:
        return {
            s: [x[kind]["encrypted"][str(s)] / x[kind]["plain"][str(s)] for x in samples] for s in WINDOWS
        }

    save_us, load_us = median_of("saves"), median_of("loads")
    save_ratios, load_ratios = ratios("saves"), ratios("loads")
    return EncryptionResult(
        reps=reps,
        save_us=save_us,
        load_us=load_us,
        save_ratio={s: statistics.median(v) for s, v in save_ratios.items()},
        load_ratio={s: statistics.median(v) for s, v in load_ratios.items()},
        save_ratios=save_ratios,
        load_ratios=load_ratios,
        flat={c: save_us[c][1000] / save_us[c][10] for c in CONFIGS},
        rekey_rows=rows,
        rekey_bytes=size,
        rekey_seconds=seconds,
    )


def main(argv: list[str] | None = None) -> int:
    from report import encryption as encryption_report  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = " ".join([".venv/bin/python bench/sections/encryption.py", *given])
    print(encryption_report.render(run(args.reps), command=command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
