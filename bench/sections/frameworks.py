"""Stored bytes per conversation turn on the three newer framework adapters (issue 20), next to each
framework's own durable backend: Pydantic AI, Google ADK, the Microsoft Agent Framework.

    .venv/bin/python bench/run.py --section frameworks

Each framework's workload (``workloads/<framework>_turns.py``) stores a
conversation of N turns — a ~200-byte user message and a ~400-byte reply a
turn, through the framework's own storage interface — in a fresh folder, for
N in ``TURNS``, and reports the bytes on disk per contender. A store that
writes each turn once grows linearly: the bytes a turn adds between 100 and
1,000 turns are those it adds between 10 and 100 (``growth`` near 1); one
that rewrites the conversation every turn grows quadratically (``growth``
near 10, the ratio of the conversation's lengths). Sizes, not times: the
figures do not depend on the machine's load.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

TURNS = (10, 100, 1000)
# (framework, workload module, what the framework's own contenders are)
FRAMEWORKS = (
    ("Pydantic AI", "workloads.pydantic_ai_turns"),
    ("Google ADK", "workloads.google_adk_turns"),
    ("Microsoft Agent Framework", "workloads.agent_framework_turns"),
)
LINEAR = 1.5  # growth below this is linear; quadratic growth here is about 10


@dataclass(slots=True)
class Contender:
    name: str
    sizes: dict[int, int] = field(default_factory=dict)  # turns -> bytes

    def per_turn(self, low: int, high: int) -> float:
        return (self.sizes[high] - self.sizes[low]) / (high - low)

    @property
    def growth(self) -> float:
        """Bytes a turn adds late in the conversation over those it adds early (1: linear)."""
        early = self.per_turn(TURNS[0], TURNS[1])
        return self.per_turn(TURNS[1], TURNS[2]) / early if early > 0 else float("inf")

    @property
    def linear(self) -> bool:
        return self.growth < LINEAR


@dataclass(slots=True)
class FrameworkResult:
    framework: str
    contenders: list[Contender]
    seconds: float

    @property
    def ours(self) -> Contender:
        return next(c for c in self.contenders if c.name == "safepoint")

    @property
    def theirs(self) -> list[Contender]:
        return [c for c in self.contenders if c.name != "safepoint"]


def run(turns: tuple[int, ...] = TURNS) -> list[FrameworkResult]:
    """Every framework's workload at every size, each in a folder of its own."""
    results = []
    for framework, module_name in FRAMEWORKS:
        module = importlib.import_module(module_name)
        started = time.monotonic()
        contenders: dict[str, Contender] = {}
        for n in turns:
            work = Path(tempfile.mkdtemp(prefix="safepoint-bench-frameworks-"))
            try:
                for name, size in module.measure(n, work).items():
                    contenders.setdefault(name, Contender(name)).sizes[n] = size
            finally:
                shutil.rmtree(work, ignore_errors=True)
        results.append(FrameworkResult(framework, list(contenders.values()), time.monotonic() - started))
    return results
