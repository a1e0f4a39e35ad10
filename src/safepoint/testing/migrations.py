"""Test helpers for migration chains: fixture files, ``assert_migrates``, whole-store checks.

The workflow they serve: before changing the checkpoint shape, capture a
stored checkpoint as a fixture (``safepoint export RUN --step N``, or
``write_fixture``); write the migration with the change; prove it with
``assert_migrates(fixture, chain, expected)``; and before deploying, prove
every stored checkpoint still loads (``assert_all_loadable`` in a test,
``safepoint check`` in CI). See docs/migrations.md.

A fixture file is ``{"safepoint_fixture": 2, "checkpoint": {...}}`` written
with sorted keys and two-space indents, newline-terminated, so that it diffs
well in code review and the same checkpoint always gives the same bytes.

Format 2 writes the checkpoint's values the way the store keeps them
(``safepoint.refs``): what the store wrote — a secret reference, scrubbed
text with its marks, a blob link — as its single-``$`` object, any ``$`` key
of the data with one more ``$``, and ``bytes`` as ``{"$bytes": base64}``. So
a fixture carries references explicitly, and reading it back gives the
same typed values. In a format 1 fixture nothing was escaped, so there every
reference-shaped dict is plain data: importing it never resolves a secret.

``check_all`` and ``assert_all_loadable`` report run ids, steps and typed
errors only — never stored values. ``assert_migrates`` does show values in
its diff: it compares a fixture the test author wrote against what they expect.
"""

from __future__ import annotations

import base64
import difflib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from safepoint import codec
from safepoint.errors import InvalidArgument, NotFound, SafepointError
from safepoint.migrations import MigrationChain
from safepoint.model import Checkpoint, ParentRef, Status
from safepoint.store import Store
from safepoint.store.admin import all_runs
from safepoint.store.references import from_stored, to_stored

FIXTURE_FORMAT = 2
_BYTES_KEY = "$bytes"  # bytes in a fixture (JSON has none): written only by fixture_text
_VALUE_FIELDS = ("messages", "pending_action", "cursors", "state")
_FIXTURE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "run_id": str,
    "step": int,
    "schema_version": int,
    "status": str,
    "messages": list,
    "counters": dict,
    "pending_action": (dict, type(None)),
    "cursors": dict,
    "state": dict,
    "labels": dict,
}
_FIXTURE_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
_PAGE_SIZE = 100  # runs per store.runs() page in assert_all_loadable

JSONDict = dict[str, Any]


def fixture_text(checkpoint: Checkpoint | Mapping[str, Any]) -> str:
    """The fixture file's text for ``checkpoint`` (a Checkpoint or its ``to_dict()``).

    What ``write_fixture`` writes and ``safepoint export`` prints. Raises
    ``NotJSONCompatible`` naming the path of a value that is not JSON data.
    """
    data = checkpoint.to_dict() if isinstance(checkpoint, Checkpoint) else checkpoint
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"a fixture holds a Checkpoint or its dict, not {type(data).__name__}")
    data = dict(data)
    codec.check_json(
        data, "checkpoint", allow_bytes=True, max_depth=codec.MAX_DEPTH + 1
    )  # the fields sit one level down
    for name in _VALUE_FIELDS:
        if name in data:
            data[name] = _bytes_out(to_stored(data[name]))
    envelope = {"safepoint_fixture": FIXTURE_FORMAT, "checkpoint": data}
    return orjson.dumps(envelope, option=_FIXTURE_OPTIONS).decode("utf-8")


def _bytes_out(value: Any) -> Any:
    if isinstance(value, bytes):
        return {_BYTES_KEY: base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _bytes_out(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_out(v) for v in value]
    return value


def _bytes_in(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(_BYTES_KEY), str):
            try:
                return base64.b64decode(value[_BYTES_KEY], validate=True)
            except ValueError:
                raise InvalidArgument("a fixture's bytes value is not valid base64") from None
        return {k: _bytes_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes_in(v) for v in value]
    return value


def write_fixture(checkpoint: Checkpoint | Mapping[str, Any], path: str | Path) -> Path:
    """Write ``checkpoint`` as a fixture file at ``path`` (its folder is created); returns the path."""
    path = Path(path)
    text = fixture_text(checkpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read_fixture(path: str | Path) -> JSONDict:
    """The checkpoint dict stored in the fixture file at ``path``.

    Raises ``InvalidArgument`` naming the file when it is not valid JSON or
    not a safepoint fixture of a format this version reads.
    """
    try:
        document = codec.decode(Path(path).read_bytes())
    except ValueError as exc:
        raise InvalidArgument(f"{path}: not a safepoint fixture (not valid JSON)") from exc
    return _unwrap(document, str(path))


def _unwrap(document: Any, where: str) -> JSONDict:
    if not isinstance(document, dict) or "safepoint_fixture" not in document:
        raise InvalidArgument(f"{where}: not a safepoint fixture (no 'safepoint_fixture' key)")
    version = document["safepoint_fixture"]
    if type(version) is not int or version not in (1, FIXTURE_FORMAT):
        raise InvalidArgument(
            f"{where}: the fixture's format is not one this version reads (1 or {FIXTURE_FORMAT})"
        )
    checkpoint = document.get("checkpoint")
    if not isinstance(checkpoint, dict):
        raise InvalidArgument(f"{where}: the fixture's 'checkpoint' is not a dict")
    if version == FIXTURE_FORMAT:  # references written explicitly; format 1's are data
        checkpoint = dict(checkpoint)
        for name in _VALUE_FIELDS:
            if name in checkpoint:
                checkpoint[name] = from_stored(_bytes_in(checkpoint[name]))
    return checkpoint


def fixture_checkpoint(data: Mapping[str, Any], run_id: str | None = None) -> Checkpoint:
    """A new run's step 0 from a fixture's checkpoint dict (``read_fixture``), as
    ``safepoint import`` starts it; ``InvalidArgument`` names a missing or bad field."""
    for name, kinds in _FIXTURE_FIELDS.items():
        if name not in data:
            raise InvalidArgument(f"the fixture's checkpoint has no {name!r} field")
        if not isinstance(data[name], kinds):
            raise InvalidArgument(f"the fixture's checkpoint field {name!r} has the wrong type")
    parent = data.get("parent")
    if parent is not None and not (
        isinstance(parent, dict) and isinstance(parent.get("run_id"), str) and type(parent.get("step")) is int
    ):
        raise InvalidArgument("the fixture's checkpoint field 'parent' has the wrong type")
    try:
        status = Status(data["status"])
    except ValueError:
        raise InvalidArgument("the fixture's checkpoint field 'status' is not a known status") from None
    labels = {**data["labels"], "imported_from": f"{data['run_id']}@{data['step']}"}
    return Checkpoint(
        run_id=run_id or data["run_id"],
        step=0,
        schema_version=data["schema_version"],
        messages=list(data["messages"]),
        counters=data["counters"],
        pending_action=data["pending_action"],
        cursors=data["cursors"],
        state=data["state"],
        status=status,
        labels=labels,
        parent=None if parent is None else ParentRef(parent["run_id"], parent["step"]),
    )


def assert_migrates(
    fixture: str | Path | Mapping[str, Any],
    chain: MigrationChain,
    expected: Mapping[str, Any] | Callable[[JSONDict], object] | None = None,
) -> JSONDict:
    """Assert the fixture migrates through ``chain`` to ``chain.current``; return the result.

    ``fixture`` is a fixture file's path, or a checkpoint dict (or a parsed
    fixture file). The result must be at ``chain.current`` and JSON data.
    With ``expected`` as a dict, each *top-level* key it names must equal the
    result's (other keys are not compared); the failure shows a diff. As a
    callable, it gets the result and fails by raising ``AssertionError`` (a
    plain ``assert`` in it) or by returning ``False``.
    """
    if isinstance(fixture, str | Path):
        name, data = str(fixture), read_fixture(fixture)
    else:
        data = _unwrap(fixture, "fixture") if "safepoint_fixture" in fixture else dict(fixture)
        name = f"checkpoint {data.get('run_id')!r} step {data.get('step')!r}"
    try:
        result = chain.migrate(data)
    except SafepointError as exc:
        raise AssertionError(f"{name} does not migrate: {type(exc).__name__}: {exc}") from exc
    version = result.get("schema_version")
    if version != chain.current:
        raise AssertionError(f"{name} migrated to schema_version {version!r}, not {chain.current}")
    try:
        codec.check_json(result, "checkpoint")
    except SafepointError as exc:
        raise AssertionError(f"{name} migrated to data that is not JSON-compatible: {exc}") from exc
    if callable(expected):
        if expected(result) is False:
            check = str(getattr(expected, "__qualname__", "the check")).replace("<locals>.", "")
            raise AssertionError(f"{name}: {check} returned False")
    elif expected is not None:
        _assert_partial_equal(name, result, expected)
    return result


def _assert_partial_equal(name: str, result: JSONDict, expected: Mapping[str, Any]) -> None:
    differing = [key for key in expected if key not in result or result[key] != expected[key]]
    if not differing:
        return
    want = {key: expected[key] for key in differing}
    got = {key: result[key] for key in differing if key in result}
    diff = difflib.unified_diff(
        _pretty(want), _pretty(got), fromfile="expected", tofile="migrated", lineterm=""
    )
    keys = ", ".join(differing)
    raise AssertionError(f"{name} migrated, but differs from expected in {keys}:\n" + "\n".join(diff))


def _pretty(value: Any) -> list[str]:
    # default=repr: `expected` is the caller's and may hold non-JSON values.
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr).splitlines()


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One stored checkpoint that does not load or migrate, and the typed error saying why."""

    run_id: str
    step: int
    error: SafepointError

    def __str__(self) -> str:
        message = str(self.error)
        where = f"run {self.run_id!r} step {self.step}"
        # Most safepoint errors already start by naming the run and step.
        prefix = "" if message.startswith(where) else f"{where}: "
        return f"{prefix}{type(self.error).__name__}: {message}"


@dataclass(slots=True)
class CheckReport:
    """What checking a set of stored checkpoints against a chain found.

    ``versions`` counts the checkpoints checked by their stored
    schema_version. Errors in ``failures`` keep their chained causes but not
    their tracebacks, which would hold the checkpoints' data in memory.
    """

    checked: int = 0
    up_to_date: int = 0  # already at chain.current
    migrated: int = 0  # lifted to chain.current without error
    failures: list[CheckFailure] = field(default_factory=list)
    versions: Counter[int] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """True when every checkpoint checked loads and migrates."""
        return not self.failures

    def summary(self) -> str:
        """One line of counts, then one line per failure."""
        noun = "checkpoint" if self.checked == 1 else "checkpoints"
        line = (
            f"checked {self.checked} {noun}: {self.up_to_date} at the current version, "
            f"{self.migrated} migrate, {len(self.failures)} fail"
        )
        return "\n".join([line, *(f"  {failure}" for failure in self.failures)])

    def fail(self, run_id: str, step: int, error: SafepointError) -> None:
        """Record a failure (for callers feeding the report themselves)."""
        self.failures.append(CheckFailure(run_id, step, _without_tracebacks(error)))


def _without_tracebacks(error: SafepointError) -> SafepointError:
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error


def check_one(report: CheckReport, chain: MigrationChain, run_id: str, step: int, data: JSONDict) -> None:
    """Migrate one stored checkpoint and record the outcome in ``report``."""
    report.checked += 1
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool):
        report.versions[version] += 1
    try:
        chain.migrate(data, run_id=run_id, step=step)
    except SafepointError as exc:
        report.fail(run_id, step, exc)
        return
    if version == chain.current:
        report.up_to_date += 1
    else:
        report.migrated += 1


def check_all(checkpoints: Iterable[tuple[str, int, JSONDict]], chain: MigrationChain) -> CheckReport:
    """Migrate every ``(run_id, step, checkpoint_dict)`` through ``chain``; report each failure.

    Pure: reads nothing and writes nothing. A malformed chain raises
    ``InvalidMigrationChain`` before any checkpoint is tried.
    """
    chain.validate()
    report = CheckReport()
    for run_id, step, data in checkpoints:
        check_one(report, chain, run_id, step, data)
    return report


def assert_all_loadable(
    store: Store, chain: MigrationChain, *, sample: int | None = None, seed: int = 0
) -> CheckReport:
    """Load every checkpoint in ``store`` (or a seeded random ``sample`` of them),
    migrate it through ``chain``, and raise ``AssertionError`` listing every
    failing run and step with its error. Returns the report when all pass.

    Uses only the public Store API and never writes. A checkpoint that fails
    to load (``CorruptCheckpoint``, …) is a failure too.
    """
    chain.validate()
    if sample is not None and (not isinstance(sample, int) or isinstance(sample, bool) or sample < 0):
        raise InvalidArgument(f"sample must be a non-negative int or None, not {sample!r}")
    keys = list(stored_keys(store))
    if sample is not None and sample < len(keys):
        chosen = sorted(random.Random(seed).sample(range(len(keys)), sample))
        keys = [keys[i] for i in chosen]
    report = CheckReport()
    for run_id, step in keys:
        try:
            data = _load_stored(store, run_id, step)
        except NotFound:
            continue  # deleted since it was listed (retention, a user): nothing left to load
        except SafepointError as exc:
            report.checked += 1
            report.fail(run_id, step, exc)
            continue
        check_one(report, chain, run_id, step, data)
    if not report.ok:
        raise AssertionError(report.summary())
    return report


def _load_stored(store: Store, run_id: str, step: int) -> JSONDict:
    """The checkpoint as stored, before any migration."""
    return store.load(run_id, step, migrate=False).to_dict()


def stored_keys(store: Store) -> Iterator[tuple[str, int]]:
    """Every ``(run_id, step)`` in ``store``: runs page by page, each run's history."""
    for run in all_runs(store, _PAGE_SIZE):
        try:
            history = store.history(run.run_id)
        except NotFound:
            continue  # deleted since the page was read
        for info in history:
            yield run.run_id, info.step
