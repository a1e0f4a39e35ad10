"""What OpenTelemetry costs a save: client CPU per save with the observer on vs off.

    .venv/bin/python bench/otel_section.py                 # 2,000 saves x 5 reps, memory:// and SQLite
    .venv/bin/python bench/otel_section.py --saves 500 --reps 2

CPU is ``time.process_time`` (every thread of this process, so a batching
span processor's export thread would be counted too) over ``saves`` saves of
one growing run, each appending a user and an assistant message, built the
way users build them (``cp.next()`` and an append). "on" is
``OpenTelemetryObserver`` on the real SDK with a ``SimpleSpanProcessor``
into an ``InMemorySpanExporter`` (every span exported as it ends: the
dearest in-process setup) and a ``MeterProvider`` with an
``InMemoryMetricReader``; "off" is the default observer. "absent" runs the
"off" loop in a child process where OpenTelemetry cannot be imported, to
show the extra's absence changes nothing. Configurations alternate within
each rep, each in a fresh process, and the median rep is reported. The issue's target: on <= 1.1x off.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safepoint import Checkpoint, open_store

BACKENDS = ("memory", "sqlite")


@dataclass(frozen=True)
class OtelResult:
    backend: str
    saves: int
    off_us: float  # median CPU microseconds per save, observer off
    on_us: float  # the same with OpenTelemetry on
    absent_us: float  # off, in a process without OpenTelemetry

    @property
    def ratio(self) -> float:
        return self.on_us / self.off_us


def _url(backend: str, folder: Path, tag: str) -> str:
    return "memory://" if backend == "memory" else f"sqlite:///{folder}/{tag}.db"


def cpu_per_save(url: str, saves: int, observer: Any = None) -> float:
    """CPU microseconds per save over ``saves`` saves of one growing run."""
    options = {} if observer is None else {"observer": observer}
    store = open_store(url, **options)
    cp = Checkpoint(run_id="bench-otel", messages=[{"role": "system", "content": "You are a careful agent."}])
    store.save(cp)  # the first save creates the run: not what is timed
    began = time.process_time()
    for step in range(saves):
        cp = cp.next()
        cp.messages.append({"role": "user", "content": f"step {step}: look up the order status please"})
        cp.messages.append({"role": "assistant", "content": f"order {step} shipped; tracking follows"})
        cp.counters = {"tokens_in": 40 * step, "tokens_out": 25 * step}
        store.save(cp)
    spent = time.process_time() - began
    store.close()
    return spent / saves * 1e6


def _otel_observer() -> tuple[Any, Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415  (the extra may be absent)
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: PLC0415

    from safepoint.observe_otel import OpenTelemetryObserver  # noqa: PLC0415

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return OpenTelemetryObserver(tracer_provider, meter_provider), tracer_provider, meter_provider


# Each measurement runs in a fresh process, so none inherits another's heap
# (the in-memory exporter keeps every span, which slows the garbage collector
# for whatever runs after it in the same process).
_CHILD = """
import sys
if {absent}:
    sys.modules["opentelemetry"] = None
sys.path.insert(0, {bench!r})
import otel_section
observer = otel_section._otel_observer()[0] if {on} else None
print(otel_section.cpu_per_save({url!r}, {saves}, observer))
"""


def _measure(kind: str, url: str, saves: int) -> float:
    script = _CHILD.format(
        absent=kind == "absent", on=kind == "on", bench=str(Path(__file__).parent), url=url, saves=saves
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def run(saves: int = 2000, reps: int = 5, backends: tuple[str, ...] = BACKENDS) -> list[OtelResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="safepoint-otel-") as tmp:
        folder = Path(tmp)
        for backend in backends:
            times: dict[str, list[float]] = {"off": [], "on": [], "absent": []}
            kinds = list(times)
            for rep in range(reps):
                for kind in kinds[rep % 3 :] + kinds[: rep % 3]:  # rotate: no kind always first
                    times[kind].append(_measure(kind, _url(backend, folder, f"{kind}{rep}"), saves))
            off, on, absent = (statistics.median(times[kind]) for kind in kinds)
            results.append(OtelResult(backend, saves, off, on, absent))
    return results


def render(results: list[OtelResult]) -> str:
    lines = [
        "| backend | saves | CPU/save off | CPU/save on (OTel) | on / off | extra absent |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.backend} | {r.saves:,} | {r.off_us:.1f} us | {r.on_us:.1f} us | {r.ratio:.2f}x "
            f"| {r.absent_us:.1f} us |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    args = parser.parse_args(argv)
    print(render(run(args.saves, args.reps, tuple(args.backend or BACKENDS))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
