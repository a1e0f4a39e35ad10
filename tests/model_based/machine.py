"""The hypothesis state machine, built from the table: one class per row of the covering array.

Every example runs two tenants of one store (``Config.tenants``: the main
handle's, implicit or named by the row, and "b"), each with its own handle,
keyring, model and context. Each operation of ``operations.TABLE`` becomes
two rules: one of the same name, acting on the main tenant, and ``b_<name>``
acting on the second; each rule's one argument, ``args``, is the entry's
plain-data draw, and its precondition is the entry's on that tenant's
context. After every step, ``invariants.check_step`` checks the tenant that
acted against its model, and the other tenant must show exactly what it
showed before the step (``invariants.snapshot``: its listing, run rows,
histories with their digests, queue states and call journals) — so no
operation of one tenant changes what the other sees; after a step on the
whole store (``STORE_WIDE``) the other is also checked against its model
whole, every checkpoint loaded. ``invariants.check_end`` runs for both at
the end of every example. A failing sequence is
shrunk and printed by hypothesis as a script over these classes; run it
after ``from model_based.machine import *`` (tests/ and src/ on the path),
or replay its steps with ``model_based.repro`` (docs/testing.md).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .configurations import ROWS, Config
from .context import Context, Finding
from .invariants import check_end, check_step, snapshot
from .model import Model
from .operations import TABLE, Op
from .values import BLOB_THRESHOLD
from .world import World

# The steps of the example running now, as (operation, args): after a failure,
# hypothesis's last run is the shrunk one, so this is its script (soak.py writes it).
LAST_STEPS: list[tuple[str, dict[str, Any]]] = []
COUNTS = {"operations": 0}  # operations taken in this process (make soak reports it)
SECOND = "b_"  # the prefix of the rules that act on the second tenant


class ModelMachine(RuleBasedStateMachine):
    """A fresh store of two tenants and a fresh model for each, per example; subclasses set ``config``."""

    config: Config

    def __init__(self) -> None:
        super().__init__()
        LAST_STEPS.clear()
        first, second = self.config.tenants
        main = World(self.config, first)
        try:
            other = World(self.config, second, place=main)
        except BaseException:
            main.close()
            raise
        self.ctxs = (Context(main, self._model()), Context(other, self._model()))
        self.ctxs[0].other, self.ctxs[1].other = self.ctxs[1], self.ctxs[0]
        self.ctx = self.ctxs[0]  # the main tenant's
        self.acted: int | None = None  # which tenant the last step acted on (None: no step yet)
        self.steps = 0

    def _model(self) -> Model:
        return Model(policy=self.config.secrets, encrypted=self.config.encryption == "on")

    def step(self, name: str, args: dict[str, Any]) -> None:
        """Take one operation of the table on the tenant the rule's name says (``b_…``: the
        second): act on its store, then its model's update."""
        index = 1 if name.startswith(SECOND) else 0
        op = _BY_NAME[name.removeprefix(SECOND)]
        LAST_STEPS.append((name, args))
        COUNTS["operations"] += 1
        ctx, idle = self.ctxs[index], self.ctxs[1 - index]
        self.steps += 1
        ctx.steps = idle.steps = self.steps  # one count for both: it names the files a step writes
        self.acted = index
        ctx.in_flight = True
        before, chain = copy.deepcopy(ctx.model.runs), ctx.model.chain_version
        outcome = op.act(ctx, args)
        op.update(ctx, args, outcome)
        changed = _steps(ctx.model.runs).items() - _steps(before).items()
        wide = name in STORE_WIDE or chain != ctx.model.chain_version
        ctx.dirty = None if wide else {key for key, _ in changed}
        entries = _entries(ctx.model.runs).items() ^ _entries(before).items()
        ctx.calls_dirty = None if wide else {run_id for (run_id, _), _ in entries}
        # The idle tenant: checked whole against its model after a step on the whole store,
        # else compared with what it showed before (store_agrees_with_model).
        idle.dirty = idle.calls_dirty = None if wide else set()
        ctx.in_flight = False

    @invariant()
    def store_agrees_with_model(self) -> None:
        for index, ctx in enumerate(self.ctxs):
            ctx.in_flight = True
            idle = self.acted is not None and index != self.acted
            if not idle or ctx.dirty is None:
                check_step(ctx)
            seen = snapshot(ctx)
            if idle and seen != ctx.seen:
                acted = self.ctxs[1 - index].world.tenant
                raise Finding(
                    f"a step of tenant {acted!r} changed what tenant {ctx.world.tenant!r} sees: "
                    + _changed(ctx.seen, seen)
                )
            ctx.seen = seen
            ctx.in_flight = False

    def teardown(self) -> None:
        try:
            if not any(ctx.in_flight for ctx in self.ctxs):  # a failure already raised: leave it be
                for ctx in self.ctxs:
                    check_step(ctx, every_run=True)
                    check_end(ctx)
        finally:
            try:
                self.ctxs[1].world.close()
            finally:
                self.ctxs[0].world.close()  # the owner of the place: removes it


_BY_NAME = {op.name: op for op in TABLE}
# Steps that act on the whole store: after one, every run's checkpoints are loaded again.
STORE_WIDE = frozenset(
    {
        "schema_bump",
        "reopen",
        "encrypt",
        "rekey",
        "retention_gc",
        "old_worker",
        "sigkill_writer",
        "redact",
        "erase",
    }
)


def _steps(runs: dict[str, Any]) -> dict[tuple[str, int], str]:
    """Each checkpoint the model holds, by (run, step), as comparable text."""
    return {
        (rid, step): repr(content) for rid, run in runs.items() for step, content in run.checkpoints.items()
    }


def _entries(runs: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Each call journal entry the model holds, by (run, key), as comparable text."""
    return {(rid, key): repr(call) for rid, run in runs.items() for key, call in run.calls.items()}


def _changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What differs between two snapshots of a tenant: its listing, or which run's what."""
    if before.keys() != after.keys():
        return f"its runs were {sorted(before)}, now {sorted(after)}"
    parts = ("run row", "history", "queue state", "call journal")
    for run_id in sorted(before):
        for part, was, now in zip(parts, before[run_id], after[run_id], strict=True):
            if was != now:
                return f"the {part} of {run_id!r} changed"
    return "nothing (the snapshots differ in their order)"


def _rule_for(op: Op, config: Config, index: int) -> Any:
    name = op.name if index == 0 else SECOND + op.name

    def take(self: ModelMachine, args: dict[str, Any]) -> None:
        self.step(name, args)

    take.__name__ = take.__qualname__ = name
    return precondition(lambda self: op.pre(self.ctxs[index]))(rule(args=op.args(config))(take))


def machine_for(config: Config) -> type[ModelMachine]:
    """The state machine of one row: the table's rules, for each tenant, with that row's
    argument strategies."""
    body: dict[str, Any] = {"config": config, "__module__": __name__}
    for op in TABLE:
        body[op.name] = _rule_for(op, config, 0)
        body[SECOND + op.name] = _rule_for(op, config, 1)
    return type(config.name, (ModelMachine,), body)


MACHINES: dict[str, type[ModelMachine]] = {row.name: machine_for(row) for row in ROWS}
globals().update(MACHINES)  # so that hypothesis's printed `state = rowNN_…()` runs after `import *`
# BLOB_THRESHOLD: the printed draws of large texts name it (the strategy's map, shown as source).
__all__ = list(MACHINES)
__all__ += ["BLOB_THRESHOLD"]
