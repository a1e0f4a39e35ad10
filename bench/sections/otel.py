"""What OpenTelemetry costs a save: client CPU per save with the observer on vs off (issue 14).

    .venv/bin/python bench/sections/otel.py                    # 2,000 saves x 5 reps, SQLite
    .venv/bin/python bench/sections/otel.py --saves 2000 --reps 3
    .venv/bin/python bench/run.py --otel-only                  # the same, as make bench runs it
    .venv/bin/python bench/sections/otel.py --instructions     # instructions per save, under valgrind

The workload is the agent every other SQLite section is fed
(``workloads.agent``: two messages a step, ~500-byte replies, a ~50 KB tool
output every tenth step; about 6 KB a step on average), saved the way users
save it (``cp.next()``, the step applied, ``store.save``) into a SQLite file
store with the default options. Only ``store.save`` is timed, with
``time.process_time``: every thread of the process, so a span processor's
export thread counts too.

Six stores take turns in one process, each on its own file and run, in
blocks of ``BLOCK`` saves whose order rotates, so that a change in the
machine's speed (it is shared) falls on all of them alike:

- ``off``: the default observer (what every user without OpenTelemetry gets);
- ``hook``: ``safepoint.observe.NoObserver()``, an observer that does nothing:
  what safepoint's own side of the hook costs;
- ``traces``: ``OpenTelemetryObserver`` with a ``TracerProvider``
  and a ``BatchSpanProcessor`` (the processor a production user configures)
  into an ``InMemorySpanExporter``, metrics off;
- ``metrics``: the same with a ``MeterProvider`` and an ``InMemoryMetricReader``,
  traces off;
- ``on``: both, as a user turns OpenTelemetry on (the target's configuration);
- ``sampled``: ``on`` with the sampler many production users set,
  ``ParentBased(TraceIdRatioBased(0.1))``: one trace in ten recorded.

After each block of a store with spans, its processor is flushed inside
the timer (the export is counted) and the exporter cleared outside it (an
in-memory exporter keeps every span; a real one sends them away). Each rep
is a fresh process; the ratio reported is the median of the reps' own
on/off ratios. "extra absent" runs the ``off`` loop in a process where
OpenTelemetry cannot be imported, and checks that nothing imported it. The
issue's target: on <= 1.1x off.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]  # bench/, which holds the packages imported here
if str(BENCH_DIR) not in sys.path:  # run as a script or from bench/run.py
    sys.path.insert(0, str(BENCH_DIR))

from workloads import agent as agent_workload  # noqa: E402

from safepoint import Checkpoint, open_store  # noqa: E402
from safepoint.observe import NoObserver  # noqa: E402

CONFIGS = ("off", "hook", "traces", "metrics", "on", "sampled")
SAMPLED = 0.1  # the ratio of the ``sampled`` configuration
BLOCK = 50  # saves per turn
PROCESSOR = "BatchSpanProcessor"
TARGET = 1.1


@dataclass(frozen=True)
class OtelResult:
    backend: str
    saves: int
    reps: int
    step_bytes: float  # mean JSON bytes of the messages a step adds
    us: dict[str, float]  # median CPU microseconds per save, by configuration
    ratio: float  # median over reps of on / off
    ratios: list[float]  # each rep's on / off
    absent_us: float  # off, in a process without OpenTelemetry
    absent_ratio: float  # median over reps of absent / off (the process run beside it)

    def part(self, config: str, base: str) -> float:
        return self.us[config] - self.us[base]


def _observer(config: str) -> tuple[Any, Any]:
    """The store's observer for ``config`` and what flushes its spans (or None)."""
    if config == "off":
        return None, None
    if config == "hook":
        return NoObserver(), None
    # The extra may be absent where this module is imported: import only here.
    from opentelemetry.metrics import NoOpMeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: PLC0415
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased  # noqa: PLC0415
    from opentelemetry.trace import NoOpTracerProvider  # noqa: PLC0415

    from safepoint.observe.otel import OpenTelemetryObserver  # noqa: PLC0415

    tracer_provider: Any = NoOpTracerProvider()
    meter_provider: Any = NoOpMeterProvider()
    flush = None
    if config in ("traces", "on", "sampled"):
        exporter = InMemorySpanExporter()
        sampler = ParentBased(TraceIdRatioBased(SAMPLED)) if config == "sampled" else None
        tracer_provider = TracerProvider(sampler=sampler)
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        flush = (tracer_provider.force_flush, exporter.clear)
    if config in ("metrics", "on", "sampled"):
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return OpenTelemetryObserver(tracer_provider, meter_provider), flush


class _Lane:
    """One store saving the agent's run, timed block by block."""

    def __init__(self, config: str, url: str) -> None:
        observer, self.flush = _observer(config)
        self.store = open_store(url, **({} if observer is None else {"observer": observer}))
        self.cp = Checkpoint(run_id=f"bench-otel-{config}")
        self.store.save(self.cp)  # step 0 creates the run: not timed
        self.cpu = 0.0

    def block(self, steps: list[agent_workload.AgentStep]) -> None:
        store, cp, cpu = self.store, self.cp, 0.0
        for agent_step in steps:
            cp = cp.next()
            agent_step.apply(cp)
            began = time.process_time()
            store.save(cp)
            cpu += time.process_time() - began
        if self.flush is not None:
            force_flush, clear = self.flush
            began = time.process_time()
            force_flush()
            cpu += time.process_time() - began
            clear()
        self.cp = cp
        self.cpu += cpu


def measure(
    url_of: dict[str, str], saves: int, configs: tuple[str, ...], workload_steps: int | None = None
) -> dict[str, float]:
    """CPU microseconds per save of each configuration, taking turns in this process
    (the first ``saves`` of ``workload_steps`` agent steps built)."""
    steps = agent_workload.build(max(saves, workload_steps or 0)).steps
    lanes = {config: _Lane(config, url_of[config]) for config in configs}
    for turn, first in enumerate(range(0, saves, BLOCK)):
        shift = turn % len(configs)
        for config in configs[shift:] + configs[:shift]:  # rotate: no configuration always first
            lanes[config].block(steps[first : first + BLOCK])
    for lane in lanes.values():
        lane.store.close()
    return {config: lane.cpu / saves * 1e6 for config, lane in lanes.items()}


_CHILD = """
import json, sys
if {absent}:
    sys.modules["opentelemetry"] = None  # as if the extra were not installed
sys.path.insert(0, {bench!r})
from sections import otel as otel_section
result = otel_section.measure({urls!r}, {saves}, {configs!r})
if {absent}:
    imported = [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None]
    assert not imported, imported
print(json.dumps(result))
"""


def _child(urls: dict[str, str], saves: int, configs: tuple[str, ...], absent: bool) -> dict[str, float]:
    script = _CHILD.format(absent=absent, bench=str(BENCH_DIR), urls=urls, saves=saves, configs=configs)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"otel bench child failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def _urls(backend: str, folder: Path, tag: str, configs: tuple[str, ...]) -> dict[str, str]:
    if backend == "memory":
        return dict.fromkeys(configs, "memory://")
    return {config: f"sqlite:///{folder}/{tag}-{config}.db" for config in configs}


def run(saves: int = 2000, reps: int = 5, backends: tuple[str, ...] = ("sqlite",)) -> list[OtelResult]:
    workload = agent_workload.build(saves)
    step_bytes = workload.content_json_bytes() / saves
    results = []
    with tempfile.TemporaryDirectory(prefix="safepoint-otel-") as tmp:
        folder = Path(tmp)
        for backend in backends:
            times: dict[str, list[float]] = {config: [] for config in CONFIGS}
            absent: list[float] = []
            for rep in range(reps):
                # The process without the extra runs first on odd reps, second on even ones.
                order = (False, True) if rep % 2 == 0 else (True, False)
                for without in order:
                    if without:
                        urls = _urls(backend, folder, f"absent{rep}", ("off",))
                        absent.append(_child(urls, saves, ("off",), absent=True)["off"])
                    else:
                        paired = _child(_urls(backend, folder, f"r{rep}", CONFIGS), saves, CONFIGS, False)
                        for config in CONFIGS:
                            times[config].append(paired[config])
            ratios = [on / off for on, off in zip(times["on"], times["off"], strict=True)]
            results.append(
                OtelResult(
                    backend=backend,
                    saves=saves,
                    reps=reps,
                    step_bytes=step_bytes,
                    us={config: statistics.median(values) for config, values in times.items()},
                    ratio=statistics.median(ratios),
                    ratios=ratios,
                    absent_us=statistics.median(absent),
                    absent_ratio=statistics.median(
                        [a / o for a, o in zip(absent, times["off"], strict=True)]
                    ),
                )
            )
    return results


def instructions(saves: int = 200, configs: tuple[str, ...] = CONFIGS) -> dict[str, float]:
    """Instructions per save of each configuration, counted by valgrind (callgrind).

    A count does not move with the machine's other load, as CPU time does:
    it is the noise-free half of the picture (not the other half: cache
    misses, which make the same instructions dearer inside a real program).
    Each configuration runs alone in two processes with the same setup, one
    saving ``WARMUP`` steps and one ``WARMUP + saves``; the difference,
    divided by ``saves``, is per save. Slow (valgrind runs Python ~50x
    slower): minutes per configuration, two processes at a time.
    """
    if shutil.which("valgrind") is None:
        raise RuntimeError("--instructions needs valgrind (apt-get install valgrind)")
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="safepoint-otel-ir-") as tmp:
        for config in configs:
            pair = []
            for n in (WARMUP, WARMUP + saves):
                urls = {config: f"sqlite:///{tmp}/{config}-{n}.db"}
                script = _IR_CHILD.format(
                    bench=str(BENCH_DIR), urls=urls, n=n, total=WARMUP + saves, config=config
                )
                command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
                pair.append(
                    subprocess.Popen(
                        [*command, sys.executable, "-c", script], stderr=subprocess.PIPE, text=True
                    )
                )
            collected = [_collected(process) for process in pair]
            counts[config] = (collected[1] - collected[0]) / saves
    return counts


WARMUP = 100  # saves both processes of a pair make before the counted ones
_IR_CHILD = """
import sys
sys.path.insert(0, {bench!r})
from sections import otel as otel_section
otel_section.measure({urls!r}, {n}, ({config!r},), workload_steps={total})
"""


def _collected(process: subprocess.Popen[str]) -> int:
    _, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"valgrind child failed:\n{err}")
    for line in err.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(f"no instruction count in valgrind's output:\n{err}")


def main(argv: list[str] | None = None) -> int:
    from report import otel as otel_report  # noqa: PLC0415  # the report imports this module: only the script needs it

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--saves", type=int, help="saves per process (default 2,000; 200 with --instructions)"
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--backend", choices=("sqlite", "memory"), action="append", help="sqlite (default); memory too"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per save under valgrind instead (slow; --saves of them, default 200)",
    )
    args = parser.parse_args(argv)
    if args.instructions:
        saves = args.saves or 200
        print(otel_report.render_instructions(instructions(saves), saves))
        return 0
    given = sys.argv[1:] if argv is None else argv
    command = " ".join([".venv/bin/python bench/sections/otel.py", *given])
    print(
        otel_report.render(
            run(args.saves or 2000, args.reps, tuple(args.backend or ("sqlite",))), command=command
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
