"""Lifting one stored checkpoint through migrations, checking what each returns — no I/O.

``MigrationChain`` (``chain``) holds the functions and says
which versions load; this module runs them on a private copy of one
checkpoint, as plain data, and checks every result before the next step sees
it: a dict, the same ``run_id`` and ``step``, every checkpoint field still
there with its type, JSON data only. A wrong shape caught here names the
migration instead of failing later in the store. Errors never quote stored
values: a migration that raises is named with its exception's *type*, the
exception chained as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from safepoint import codec
from safepoint.errors import InvalidArgument, MigrationError, NotJSONCompatible
from safepoint.messagelist import thaw
from safepoint.model import FIELD_TYPES, IDENTITY_FIELDS, MIGRATED_FIELDS

Migration = Callable[[dict[str, Any]], dict[str, Any]]

# The fields a migration may change (model.MIGRATED_FIELDS) but not remove or
# retype, and their types (model.FIELD_TYPES): the store rebuilds a Checkpoint
# from the result. schema_version is not here: the chain sets it after each step.
_FIELD_TYPES = {name: FIELD_TYPES[name] for name in MIGRATED_FIELDS if name != "schema_version"}


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (versions and steps)."""
    return isinstance(value, int) and not isinstance(value, bool)


def migration_name(function: object) -> str:
    """How errors name a migration: its qualified name, without ``<locals>`` noise."""
    name = str(getattr(function, "__qualname__", None) or type(function).__name__)
    return name.replace("<locals>.", "")


def identity(data: Mapping[str, Any], run_id: str | None, step: int | None) -> tuple[str, int]:
    """The run id and step that name ``data`` in errors: the arguments, else its own fields."""
    run_id = data.get("run_id") if run_id is None else run_id
    step = data.get("step") if step is None else step
    if not isinstance(run_id, str):
        raise InvalidArgument("migrate needs a str run_id, in the checkpoint or as run_id=")
    if not is_int(step):
        raise InvalidArgument(f"run {run_id!r}: migrate needs an int step, in the checkpoint or as step=")
    return run_id, step


def lift(
    data: Mapping[str, Any], steps: Iterable[tuple[int, Migration]], *, run_id: str, step: int
) -> dict[str, Any]:
    """``data`` run through ``steps`` (each the version it lifts from and its function), as a new dict.

    ``data`` is never changed: the functions run on a deep copy, and with no
    steps that copy comes back. ``NotJSONCompatible`` (naming the path) when
    ``data`` is not JSON; ``MigrationError`` when a function fails or returns
    a wrong shape.
    """
    problem = _json_problem(data)
    if problem is not None:
        raise problem
    checkpoint: dict[str, Any] = thaw(dict(data))  # a deep copy: the input stays as stored
    for from_version, function in steps:
        checkpoint = _apply(function, from_version, checkpoint, run_id, step)
    return checkpoint


def _apply(
    function: Migration, version: int, checkpoint: dict[str, Any], run_id: str, step: int
) -> dict[str, Any]:
    """Run one migration and check what it returned."""
    name = migration_name(function)

    def failure(detail: str) -> MigrationError:
        return MigrationError(run_id, step, version, version + 1, detail)

    # Captured before the call: the function may change its argument in place.
    identity = {key: checkpoint[key] for key in IDENTITY_FIELDS if key in checkpoint}
    fields = [key for key in _FIELD_TYPES if key in checkpoint]
    try:
        result = function(checkpoint)
    except Exception as exc:
        raise failure(f"{name} raised {type(exc).__name__} (chained as the cause)") from exc
    if not isinstance(result, dict):
        hint = " (does it end with `return cp`?)" if result is None else ""
        raise failure(f"{name} returned {type(result).__name__}, not a dict{hint}")
    for key, before in identity.items():
        after = result.get(key)
        if type(after) is not type(before) or after != before:
            raise failure(f"{name} changed {key}; a migration must keep the checkpoint's run_id and step")
    for key in fields:
        if key not in result:
            raise failure(f"{name} removed the field {key!r}")
        if not isinstance(result[key], _FIELD_TYPES[key]):
            raise failure(f"{name} made {key!r} a {type(result[key]).__name__}")
    for index, message in enumerate(result.get("messages", ())):
        if not isinstance(message, dict):
            raise failure(f"{name} made messages[{index}] a {type(message).__name__}, not a dict")
    problem = _json_problem(result)
    if problem is not None:
        raise failure(f"{name} returned data that is not JSON-compatible: {problem}") from problem
    result["schema_version"] = version + 1
    return result


def _json_problem(data: Mapping[str, Any]) -> NotJSONCompatible | None:
    """The first value of ``data`` that is not plain JSON, named by its path, or None."""
    if codec.is_plain_json(data):
        return None
    try:
        for key, value in data.items():
            if not isinstance(key, str):
                raise NotJSONCompatible(f"[{key!r}]", f"field name of type {type(key).__name__} is not a str")
            codec.check_json(value, key if key.isidentifier() else f"[{key!r}]")
    except NotJSONCompatible as exc:
        return exc
    return None
