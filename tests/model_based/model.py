"""The reference model: what the store should hold, in dicts and lists.

Small and obvious on purpose: its value is that it is easier to trust than
the store. A checkpoint is a plain dict of its content fields as the caller
gave them (before scrubbing); ``expected`` says what a load must return
under the store's secret policy and migration chain.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

SECRET_NAME = "TOKEN"
SECRET_VALUE = "zq-Secret-9f8e7d6c5b4a"
CANARY = "CANARY-c4n4ry-17"  # planted in values: never on disk while the store is encrypted
# Planted in texts and label values: what the ``redact`` operation takes out after the fact (a
# literal value: no default rule matches it, JSON writes it as is), and the marker it leaves.
PLANTED = "PLANTED-x7Q-cobalt-4412"
PLANTED_MARKER = "[REDACTED:value-1]"
PLANTED_BYTES_MARKER = b"[REDACTED:secret:value-1]"  # what a bytes value holding it becomes, whole
WORKER_VERSION = 1  # the chain the workers were deployed with; a schema bump never reaches them


def migrated(counters: dict[str, Any], version: int) -> dict[str, Any]:
    """The migration from ``version`` to ``version + 1``: it records itself in the counters."""
    return {**counters, f"migrated_to_{version + 1}": version + 1}


@dataclass
class Lease:
    """A lease the model knows of: who holds it, at which epoch, until when (epoch seconds)."""

    owner: str
    epoch: int
    expires_at: float


@dataclass
class Call:
    """A call journal entry the model knows of: as its first writer left it (the first result wins)."""

    state: str  # "intent" | "done"
    step: int  # the step whose checkpoint covers it: the head + 1 when it was first written
    result: Any = None  # as the caller gave it (before scrubbing)
    request: Any = None  # the request the entry was first written with (compared by digest)
    usage: tuple[int, int, float] | None = None
    writer: str | None = None  # the lease the entry was first written under
    epoch: int | None = None
    redacted_later: bool = False  # a redaction replaced a planted value in its result (it replays redacted)


@dataclass
class Run:
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)  # step -> content as given
    status: str = "running"  # the run row's status (a release may set it apart from the head's)
    queued: bool = False
    lease: Lease | None = None
    calls: dict[str, Call] = field(default_factory=dict)  # the run's call journal, by key
    # Audit records redactions left on it. A record is keyed by the request's shape (so that a
    # rerun after a kill completes it): the machine's one request, taken again, adds to its record.
    redactions: int = 0

    @property
    def head(self) -> int:
        return max(self.checkpoints)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.checkpoints[self.head]["labels"])


@dataclass
class Model:
    runs: dict[str, Run] = field(default_factory=dict)
    # (run_id, step) -> content: a save that was never acknowledged (a killed writer's
    # last one) may or may not be there; nothing else unacknowledged may.
    maybe: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    chain_version: int = 1  # the main handle's chain: every load is lifted to it
    encrypted: bool = False
    policy: str = "reference"

    # -- updates ---------------------------------------------------------------------

    def saved(self, run_id: str, step: int, content: dict[str, Any]) -> None:
        """An acknowledged save: the run (new or not) gains ``step``; its row takes the head's status."""
        run = self.runs.setdefault(run_id, Run())
        run.checkpoints[step] = copy.deepcopy(content)
        run.status = content["status"]

    def pruned(self, run_id: str, steps: list[int]) -> None:
        """Retention deleted ``steps``' checkpoints, and with them the entries they covered."""
        run = self.runs[run_id]
        for step in steps:
            del run.checkpoints[step]
        run.calls = {key: call for key, call in run.calls.items() if call.step not in steps}

    def deleted(self, run_id: str) -> None:
        del self.runs[run_id]
        self.maybe = {key: value for key, value in self.maybe.items() if key[0] != run_id}

    def redacted(self, run_id: str) -> bool:
        """A redaction of ``PLANTED`` reached ``run_id``: every stored string holding it now holds
        the marker in its place (each step, history included, and each journal result); whether
        anything changed (then the run has its audit record)."""
        run = self.runs[run_id]
        changed = False
        for step, content in run.checkpoints.items():
            new = _planted_out(content)
            changed = changed or new != content
            run.checkpoints[step] = new
        for call in run.calls.values():
            new = _planted_out(call.result)
            if new != call.result:
                call.result, call.redacted_later, changed = new, True, True
        run.redactions = max(run.redactions, int(changed))
        return changed

    # -- questions -------------------------------------------------------------------

    def claimable(self, now: float) -> set[str]:
        """Runs a claim may take now: queued, with no lease or an expired one."""
        return {
            run_id
            for run_id, run in self.runs.items()
            if run.queued and (run.lease is None or run.lease.expires_at <= now)
        }

    def entries(self, run_id: str, step: int | None = None) -> list[tuple[str, Call]]:
        """The run's entries (of ``step``, or all) in the store's order: by step, then in the
        order they were first written (a dict keeps insertion order; a result completing an
        intent keeps the intent's place)."""
        calls = self.runs[run_id].calls.items()
        return sorted(
            [(key, call) for key, call in calls if step is None or call.step == step],
            key=lambda item: item[1].step,
        )

    def live_lease(self, run_id: str, now: float) -> bool:
        run = self.runs.get(run_id)
        return run is not None and run.lease is not None and run.lease.expires_at > now

    def expected_result(self, result: Any) -> Any:
        """What a read of a recorded result returns with secrets resolved as the policy allows."""
        if self.policy == "redact":
            return _replaced(result, SECRET_VALUE, f"[REDACTED:{SECRET_NAME}]")
        return copy.deepcopy(result)

    def expected(self, content: dict[str, Any], *, resolved: bool = True) -> dict[str, Any]:
        """What a migrating load returns for ``content``: lifted to the chain, secrets per policy."""
        out = copy.deepcopy(content)
        for version in range(out["schema_version"], self.chain_version):
            out["counters"] = migrated(out["counters"], version)
        out["schema_version"] = max(out["schema_version"], self.chain_version)
        if self.policy == "redact" or not resolved:
            marker = f"[REDACTED:{SECRET_NAME}]" if self.policy == "redact" else f"[SECRET:{SECRET_NAME}]"
            out = _replaced(out, SECRET_VALUE, marker)
        return out


def _planted_out(value: Any) -> Any:
    """``value`` redacted of ``PLANTED``: replaced in every string value by its marker; a bytes
    value holding it is replaced whole (as a save's scrubber replaces bytes with a finding)."""
    if isinstance(value, bytes):
        return PLANTED_BYTES_MARKER if PLANTED.encode() in value else value
    if isinstance(value, dict):
        return {key: _planted_out(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_planted_out(item) for item in value]
    return _replaced(value, PLANTED, PLANTED_MARKER)


def _replaced(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string value (keys hold no secret)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {key: _replaced(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    return value
