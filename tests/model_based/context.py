"""What every operation shares: the example's context, a call's outcome, checkpoints from model content.

``attempt`` is where DESIGN's error rule is held for every call the machine
makes: whatever escapes the store must be a ``SafepointError`` whose message
quotes no value the machine stored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from safepoint import Checkpoint, Lease, ParentRef, SafepointError
from safepoint.messagelist import thaw

from .model import SECRET_VALUE, Model
from .values import strings_in, value_fields
from .world import World

RUN_IDS = ("run-a", "run-b", "run-c", "run-d", "run/é $e")


class Finding(AssertionError):
    """The store and the model disagree (or the store broke a rule every call keeps)."""


@dataclass
class Outcome:
    """What one call on the store gave: its value or its (typed) error, and what the action computed."""

    value: Any = None
    error: SafepointError | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """One example: the world (the store), the model, and what the machine holds between steps."""

    world: World
    model: Model
    # run_id -> (the checkpoint object kept going in place, the model content it holds)
    objects: dict[str, tuple[Checkpoint, dict[str, Any]]] = field(default_factory=dict)
    # run_id -> a kept object whose run's head a redaction rewrote since: its next save is a Conflict
    stale: dict[str, Checkpoint] = field(default_factory=dict)
    leases: list[Lease] = field(default_factory=list)  # leases the machine claimed, current or not
    stored_strings: set[str] = field(default_factory=set)  # what no error message may quote
    steps: int = 0
    # The (run, step)s the last step added or changed in the model (None: every one).
    dirty: set[tuple[str, int]] | None = None
    # The runs whose call journal the last step changed in the model (None: every run's).
    calls_dirty: set[str] | None = None
    in_flight: bool = False  # a step or a check began and has not finished (it failed)
    other: Context | None = None  # the example's other tenant
    seen: dict[str, Any] | None = None  # what the tenant showed after the last step (invariants.snapshot)

    def free_ids(self) -> list[str]:
        return [run_id for run_id in RUN_IDS if run_id not in self.model.runs]

    def run_ids(self) -> list[str]:
        return sorted(self.model.runs)

    def remember(self, value: Any) -> None:
        self.stored_strings.update(s for s in strings_in(value) if not _is_a_name(s))


def _is_a_name(text: str) -> bool:
    # Run ids are fine in errors (DESIGN: names, paths, run ids, steps).
    return text in RUN_IDS


def attempt(ctx: Context, call: Callable[[], Any], what: str) -> Outcome:
    """Run ``call``; a typed error is returned as the outcome, anything else is a finding."""
    try:
        return Outcome(value=call())
    except SafepointError as exc:
        text = str(exc)
        for value in [SECRET_VALUE, *ctx.stored_strings]:
            if value in text:
                raise Finding(f"{what}: {type(exc).__name__} quotes a stored value in its message") from exc
        return Outcome(error=exc)
    except Exception as exc:
        raise Finding(f"{what}: raised {type(exc).__name__}, not a SafepointError") from exc


def expect(outcome: Outcome, error: type[SafepointError] | None, what: str) -> None:
    """The outcome is the one the model predicts: no error, or ``error``."""
    got = outcome.error
    if error is None and got is not None:
        raise Finding(f"{what}: the model expects success, the store raised {type(got).__name__}: {got}")
    if error is not None and not isinstance(got, error):
        shown = "success" if got is None else f"{type(got).__name__}: {got}"
        raise Finding(f"{what}: the model expects {error.__name__}, the store gave {shown}")


# -- model content <-> checkpoints -------------------------------------------------------


def content_of(
    change: dict[str, Any], schema_version: int, base: dict[str, Any] | None, *, rewrite: bool = False
) -> dict[str, Any]:
    """A checkpoint's content in the model's form: ``base`` (the run's head, or None) with ``change``."""
    message = {"role": "user", "content": change["message"]}
    if base is None:
        messages, counters, parent = [message], {"saves": 1}, None
    else:
        old = list(base["messages"])
        messages = ([{"role": "system", "content": "summary"}, *old[-1:]] if rewrite else old) + [message]
        counters = {**base["counters"], "saves": base["counters"].get("saves", 0) + 1}
        parent = base["parent"]
    return copy.deepcopy(
        {
            "schema_version": schema_version,
            "status": change["status"],
            "messages": messages,
            "counters": counters,
            "labels": dict(change["labels"]),
            "parent": parent,
            **change["values"],
        }
    )


def build(run_id: str, step: int, content: dict[str, Any]) -> Checkpoint:
    """A fresh checkpoint holding ``content``, as a user builds one each step."""
    values = {k: copy.deepcopy(v) for k, v in content.items() if k not in ("parent", "status")}
    parent = content["parent"]
    return Checkpoint(
        run_id=run_id,
        step=step,
        status=content["status"],
        parent=None if parent is None else ParentRef(parent["run_id"], parent["step"]),
        **values,
    )


def observed(cp: Checkpoint) -> dict[str, Any]:
    """A loaded checkpoint's content in the model's form (every value field read by name)."""
    data = cp.to_dict()
    out = {
        name: data[name] for name in ("schema_version", "status", "messages", "counters", "labels", "parent")
    }
    for name in value_fields():
        out[name] = thaw(getattr(cp, name))
    return out


def difference(got: dict[str, Any], want: dict[str, Any]) -> str:
    """Which fields differ, and the first one's loaded and expected values (shortened)."""
    names = [name for name in sorted(set(got) | set(want)) if got.get(name) != want.get(name)]
    if not names:
        return "nothing"
    first = names[0]
    loaded, wanted = _short(got.get(first)), _short(want.get(first))
    return f"{', '.join(names)}; {first} loaded as {loaded}, the model has {wanted}"


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
