"""One benchmark client process: the child that ``sections.pg_phases.Writers`` starts.

    python bench/sections/pg_writer.py '<JSON list of contender specs>'

Each spec names a contender kind (``safepoint``, ``raw``, ``langgraph``,
``fill``, ``claim``, ``claim_save``) and its options. The child opens every
contender (connections, the workload, a run's step 0: all untimed), prints
``ready``, then obeys its parent line by line on stdin:

- ``go NAME COUNT``: contender NAME does up to COUNT operations, timing each;
  the child answers ``done N`` (N operations done);
- ``end``: the child answers ``result JSON`` (every contender's timings and
  facts) and exits.

Parent and children talk over pipes only, so a child imports nothing but
what its contenders need (a safepoint or raw-SQL writer never loads
LangGraph), and starts in well under a second.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Protocol

# Run as a script: the contenders' packages live in bench/, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Contender(Protocol):
    def block(self, count: int) -> int:
        """Do up to ``count`` operations, timing each; return how many were done."""
        ...

    def result(self) -> dict[str, Any]:
        """JSON-able timings (``seconds``: one entry per operation) and facts."""
        ...

    def close(self) -> None: ...


# kind -> (module, class); imported only by the children that need them.
KINDS = {
    "safepoint": ("contenders.postgres_store", "SafepointWriter"),
    "raw": ("contenders.raw_postgres", "RawWriter"),
    "langgraph": ("contenders.langgraph_postgres", "LangGraphWriter"),
    "fill": ("contenders.claims", "QueueFiller"),
    "claim": ("contenders.claims", "ClaimWorker"),
    "claim_save": ("contenders.claims", "ClaimSaveWorker"),
    "floor": ("contenders.floor_postgres", "FloorWriter"),
}


def open_contender(spec: dict[str, Any]) -> Contender:
    module, name = KINDS[spec["kind"]]
    factory: Any = getattr(importlib.import_module(module), name)
    contender: Contender = factory(spec)
    return contender


def main(argv: list[str]) -> int:
    # The protocol owns stdout; anything a library prints goes to stderr instead.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    specs: list[dict[str, Any]] = json.loads(argv[1])
    contenders = {spec["name"]: open_contender(spec) for spec in specs}
    protocol.write("ready\n")
    try:
        for line in sys.stdin:
            command = line.split()
            if command[0] == "go":
                done = contenders[command[1]].block(int(command[2]))
                protocol.write(f"done {done}\n")
            elif command[0] == "end":
                results = {name: c.result() for name, c in contenders.items()}
                protocol.write("result " + json.dumps(results) + "\n")
                break
            else:
                raise SystemExit(f"pg_writer: unknown command {line!r}")
    finally:
        for contender in contenders.values():
            contender.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
