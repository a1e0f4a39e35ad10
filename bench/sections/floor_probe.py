"""The floor section's probe process: drives ``floor_lanes`` under one meter and prints what it measured.

    .venv/bin/python bench/sections/floor_probe.py cpu FOLDER LANE[,LANE...] [SCALE]
    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \\
        .venv/bin/python bench/sections/floor_probe.py ir FOLDER LANE[,LANE...] [SCALE]

``ir`` runs under callgrind: the lanes one after the other, each uninstrumented until its
window starts (callgrind then runs at full speed, ~5x native instead of ~50x), collection
switched on just before each measured call and off just after it, the counts dumped and the
instrumentation stopped at each window's end (dump label ``lane@window``). The client requests
are issued by nine instructions of machine code called through ``ctypes`` (x86-64), so no C
compiler is needed; elsewhere, by ``journal_calls.build_shim``'s library (``SAFEPOINT_BENCH_SHIM``).

``cpu`` runs the lanes side by side, step by step (so the machine's drift falls on all of them),
and times each measured call with ``time.process_time``; each load window also takes one more
load under ``tracemalloc`` for its peak. Every load is a first load (``StoreLane.load``).
``SCALE`` < 1 shrinks every step number (the smoke test).
"""

from __future__ import annotations

import base64
import ctypes
import gc
import json
import mmap
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:  # run as a script, under valgrind
    sys.path.insert(0, str(BENCH_DIR))

import safepoint  # noqa: E402
from sections import floor_lanes as lanes  # noqa: E402 - after the path above

MAIN = (100, 120)  # the issue's counted saves: steps 100-119, after 99 warm-up saves
AT_10 = (6, 11)  # "at step 10": steps 6-10 (one tool output among them, with tools)
AT_1000 = (996, 1001)
LOADS = {"ir": 3, "cpu": 9}  # loads measured per load window, after one untimed
# Fixed bench keys, as the encryption section's: the cost does not depend on them.
KEYRING = " ".join(
    f"{name}:{base64.b64encode(bytes([i + 1]) * 32).decode()}" for i, name in enumerate(("index", "k1"))
)


# -- callgrind's client requests -------------------------------------------------------------

_BASE = (ord("C") << 24) | (ord("T") << 16)  # VG_USERREQ_TOOL_BASE('C','T'), callgrind.h
TOGGLE_COLLECT, DUMP_STATS_AT, START, STOP = _BASE + 2, _BASE + 3, _BASE + 4, _BASE + 5
# x86-64 (valgrind.h, VALGRIND_DO_CLIENT_REQUEST_EXPR): rax = &args, rdx = 0 (the default), the
# special preamble (four rotations of rdi, 128 bits in all: a no-op natively), xchg rbx,rbx; the
# result comes back in rdx.
_AMD64 = bytes.fromhex("4889f8 31d2 48c1c703 48c1c70d 48c1c73d 48c1c733 4887db 4889d0 c3")


class Callgrind:
    """Callgrind's client requests: start/stop instrumentation, toggle collection, dump with a label."""

    def __init__(self) -> None:
        shim = os.environ.get("SAFEPOINT_BENCH_SHIM")
        self._shim = ctypes.CDLL(shim) if shim else None
        if self._shim is None:
            if platform.machine() not in ("x86_64", "AMD64"):
                raise RuntimeError("no client-request code for this CPU: set SAFEPOINT_BENCH_SHIM")
            self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            self._page.write(_AMD64)
            address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
            self._call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(address)
            self._args = (ctypes.c_uint64 * 6)()

    def _request(self, code: int, arg: int = 0) -> None:
        self._args[0], self._args[1] = code, arg
        self._call(ctypes.addressof(self._args))

    def start(self) -> None:
        self._shim.sp_start() if self._shim else self._request(START)

    def stop(self) -> None:
        if not self._shim:  # the shim has no stop: it stays instrumented (slower, same counts)
            self._request(STOP)

    def toggle(self) -> None:
        self._shim.sp_toggle() if self._shim else self._request(TOGGLE_COLLECT)

    def dump(self, label: str) -> None:
        text = ctypes.create_string_buffer(label.encode())
        self._shim.sp_dump(text) if self._shim else self._request(DUMP_STATS_AT, ctypes.addressof(text))


# -- the meters ----------------------------------------------------------------------------------


class IrMeter:
    """Collects callgrind's counts around each measured call; one dump per window."""

    def __init__(self) -> None:
        self.cg = Callgrind()
        self.calls: dict[str, int] = {}

    def begin(self, label: str) -> None:
        self.cg.start()

    def measure(self, label: str, call: Callable[[], object]) -> None:
        toggle = self.cg.toggle
        toggle()
        call()
        toggle()
        self.calls[label] = self.calls.get(label, 0) + 1

    def end(self, label: str, call: Callable[[], object] | None = None) -> None:
        self.cg.dump(label)
        self.cg.stop()

    def out(self) -> dict[str, Any]:
        return {"calls": self.calls}


class CpuMeter:
    """Process CPU time of each measured call; a load window's peak memory (``tracemalloc``)."""

    def __init__(self) -> None:
        self.cpu: dict[str, list[float]] = {}
        self.peak: dict[str, int] = {}

    def begin(self, label: str) -> None:
        pass

    def measure(self, label: str, call: Callable[[], object]) -> None:
        clock = time.process_time
        began = clock()
        call()
        self.cpu.setdefault(label, []).append(clock() - began)

    def end(self, label: str, call: Callable[[], object] | None = None) -> None:
        if call is not None:
            self.peak[label] = peak(call)

    def out(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "peak": self.peak}


def peak(call: Callable[[], object]) -> int:
    """Peak bytes ``call`` allocated above what was held before it (``tracemalloc``)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        high = tracemalloc.get_traced_memory()[1] - base
        del result
    finally:
        tracemalloc.stop()
    return high


# -- the lanes each mode runs ----------------------------------------------------------------------


def _window(bounds: tuple[int, int], scale: float) -> range:
    start = max(1, round(bounds[0] * scale))
    return range(start, max(start + 1, round(bounds[1] * scale)))


def build(name: str, folder: Path, scale: float = 1.0) -> lanes.Lane:
    """The lane called ``name``, on its own file in ``folder``."""
    main, at10, at1000 = (_window(b, scale) for b in (MAIN, AT_10, AT_1000))
    ends = {"main": main}
    both = {"10": at10, "1000": at1000}
    count = max(at1000) + 1
    issue, tools, agent = lanes.issue_steps(count), None, None
    path = folder / f"{name}.db"
    keyring = safepoint.Keyring.from_text(KEYRING)
    kinds: dict[str, Callable[[], lanes.Lane]] = {
        "empty": lambda: lanes.EmptyLane(name, issue, ends),
        "floor_c": lambda: lanes.RawLane(name, issue, ends, path, "NORMAL", loads_at=(max(at1000),)),
        "floor_c2": lambda: lanes.RawLane(name, issue, ends, path, "FULL"),
        "save": lambda: lanes.StoreLane(
            name, issue, {**both, **ends}, path, loads_at=(max(at10), max(at1000))
        ),
        "save_noscrub": lambda: lanes.StoreLane(name, issue, ends, path, options={"scrubber": False}),
        "save_encrypted": lambda: lanes.StoreLane(
            name,
            issue,
            {**both, **ends},
            path,
            options={"encryption": keyring},
            loads_at=(max(at10), max(at1000)),
        ),
        "journal": lambda: lanes.JournalLane(name, issue, ends, path),
        "langgraph": lambda: lanes.LangGraphLane(name, issue, ends, path),
    }
    for pattern in ("list", "deep"):
        kinds[f"fresh_{pattern}"] = lambda p=pattern: lanes.StoreLane(name, issue, both, path, pattern=p)  # type: ignore[misc]
    if name.endswith("tools"):
        tools = lanes.issue_steps(count, tools=True)
        kinds["save_tools"] = lambda: lanes.StoreLane(name, tools, both, path)
        for pattern in ("list", "deep"):
            kinds[f"fresh_{pattern}_tools"] = lambda p=pattern: lanes.StoreLane(
                name, tools, both, path, pattern=p
            )  # type: ignore[misc]
    if name.startswith("agent_"):
        agent = lanes.agent_steps(max(main) + 1)
        kinds["agent_floor_c"] = lambda: lanes.RawLane(name, agent, ends, path, "NORMAL")
        kinds["agent_floor_c2"] = lambda: lanes.RawLane(name, agent, ends, path, "FULL")
        kinds["agent_save"] = lambda: lanes.StoreLane(name, agent, ends, path)
        kinds["agent_save_noscrub"] = lambda: lanes.StoreLane(
            name, agent, ends, path, options={"scrubber": False}
        )
    return kinds[name]()


def drive(built: list[lanes.Lane], meter: IrMeter | CpuMeter, loads: int) -> dict[str, Any]:
    """The lanes step by step, side by side; each measured call through ``meter``."""
    out: dict[str, Any] = {"message_bytes": {}, "facts": {}}
    for n in range(1, max(lane.last for lane in built) + 1):
        for lane in built:
            if n > lane.last:
                continue
            call = lane.advance(n)
            window = next((w for w, steps in lane.windows.items() if n in steps), None)
            if window is None:
                call()
            else:
                label = f"{lane.name}@{window}"
                if n == lane.windows[window][0]:
                    meter.begin(label)
                meter.measure(label, call)
                if n == lane.windows[window][-1]:
                    meter.end(label)
            if n in lane.loads_at:
                label = f"{lane.name}@load{n}"
                out["message_bytes"][label] = lane.message_bytes
                load = lane.load(loads + 2)  # the untimed one, the measured ones, the peak's
                load()  # untimed: the file's first read (the OS cache), by a store of its own
                meter.begin(label)
                for _ in range(loads):
                    meter.measure(label, load)
                meter.end(label, load)
    for lane in built:
        out["facts"][lane.name] = lane.facts
        lane.close()
    return out


def main(argv: list[str]) -> dict[str, Any]:
    mode, folder, names = argv[0], Path(argv[1]), argv[2].split(",")
    scale = float(argv[3]) if len(argv) > 3 else 1.0
    folder.mkdir(parents=True, exist_ok=True)
    meter: IrMeter | CpuMeter = IrMeter() if mode == "ir" else CpuMeter()
    out: dict[str, Any] = {"message_bytes": {}, "facts": {}}
    # Under callgrind one lane at a time, each window dumped alone; natively side by side.
    for group in [[name] for name in names] if mode == "ir" else [names]:
        done = drive([build(name, folder, scale) for name in group], meter, LOADS[mode])
        for key, found in out.items():
            found.update(done[key])
    return {**out, **meter.out()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
