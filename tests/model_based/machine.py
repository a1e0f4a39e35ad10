"""The hypothesis state machine, built from the table: one class per row of the covering array.

Each operation of ``operations.TABLE`` becomes a rule of the same name whose
one argument, ``args``, is the entry's plain-data draw; its precondition is
the entry's. ``invariants.check_step`` runs after every step and
``invariants.check_end`` at the end of every example. A failing sequence is
shrunk and printed by hypothesis as a script over these classes; run it
after ``from model_based.machine import *`` (tests/ and src/ on the path),
or replay its steps with ``model_based.repro`` (docs/testing.md).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .configurations import ROWS, Config
from .context import Context
from .invariants import check_end, check_step
from .model import Model
from .operations import TABLE, Op
from .values import BLOB_THRESHOLD
from .world import World

# The steps of the example running now, as (operation, args): after a failure,
# hypothesis's last run is the shrunk one, so this is its script (soak.py writes it).
LAST_STEPS: list[tuple[str, dict[str, Any]]] = []
COUNTS = {"operations": 0}  # operations taken in this process (make soak reports it)


class ModelMachine(RuleBasedStateMachine):
    """A fresh store and a fresh model per example; subclasses set ``config``."""

    config: Config

    def __init__(self) -> None:
        super().__init__()
        LAST_STEPS.clear()
        model = Model(policy=self.config.secrets, encrypted=self.config.encryption == "on")
        self.ctx = Context(World(self.config), model)

    def step(self, name: str, args: dict[str, Any]) -> None:
        """Take one operation of the table: act on the store, then the model's update."""
        op = _BY_NAME[name]
        LAST_STEPS.append((name, args))
        COUNTS["operations"] += 1
        ctx = self.ctx
        ctx.steps += 1
        ctx.in_flight = True
        before, chain = copy.deepcopy(ctx.model.runs), ctx.model.chain_version
        outcome = op.act(ctx, args)
        op.update(ctx, args, outcome)
        changed = _steps(ctx.model.runs).items() - _steps(before).items()
        wide = name in STORE_WIDE or chain != ctx.model.chain_version
        ctx.dirty = None if wide else {key for key, _ in changed}
        entries = _entries(ctx.model.runs).items() ^ _entries(before).items()
        ctx.calls_dirty = None if wide else {run_id for (run_id, _), _ in entries}
        ctx.in_flight = False

    @invariant()
    def store_agrees_with_model(self) -> None:
        self.ctx.in_flight = True
        check_step(self.ctx)
        self.ctx.in_flight = False

    def teardown(self) -> None:
        try:
            if not self.ctx.in_flight:  # a failure already raised: leave it to be reported
                check_step(self.ctx, every_run=True)
                check_end(self.ctx)
        finally:
            self.ctx.world.close()


_BY_NAME = {op.name: op for op in TABLE}
# Steps that act on the whole store: after one, every run's checkpoints are loaded again.
STORE_WIDE = frozenset(
    {"schema_bump", "reopen", "encrypt", "rekey", "retention_gc", "old_worker", "sigkill_writer", "redact"}
)


def _steps(runs: dict[str, Any]) -> dict[tuple[str, int], str]:
    """Each checkpoint the model holds, by (run, step), as comparable text."""
    return {
        (rid, step): repr(content) for rid, run in runs.items() for step, content in run.checkpoints.items()
    }


def _entries(runs: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Each call journal entry the model holds, by (run, key), as comparable text."""
    return {(rid, key): repr(call) for rid, run in runs.items() for key, call in run.calls.items()}


def _rule_for(op: Op, config: Config) -> Any:
    def take(self: ModelMachine, args: dict[str, Any]) -> None:
        self.step(op.name, args)

    take.__name__ = take.__qualname__ = op.name
    return precondition(lambda self: op.pre(self.ctx))(rule(args=op.args(config))(take))


def machine_for(config: Config) -> type[ModelMachine]:
    """The state machine of one row: the table's rules with that row's argument strategies."""
    body: dict[str, Any] = {"config": config, "__module__": __name__}
    for op in TABLE:
        body[op.name] = _rule_for(op, config)
    return type(config.name, (ModelMachine,), body)


MACHINES: dict[str, type[ModelMachine]] = {row.name: machine_for(row) for row in ROWS}
globals().update(MACHINES)  # so that hypothesis's printed `state = rowNN_…()` runs after `import *`
# BLOB_THRESHOLD: the printed draws of large texts name it (the strategy's map, shown as source).
__all__ = list(MACHINES)
__all__ += ["BLOB_THRESHOLD"]
