"""Test helpers for migration chains: fixture files, ``assert_migrates``, whole-store checks.

The workflow they serve: before changing the checkpoint shape, capture a
stored checkpoint as a fixture (``safepoint export RUN --step N``, or
``write_fixture``); write the migration with the change; prove it with
``assert_migrates(fixture, chain, expected)``; and before deploying, prove
every stored checkpoint still loads (``assert_all_loadable`` in a test,
``safepoint check`` in CI). See docs/migrations.md.

The fixture file format (what ``export`` writes, ``import`` reads, and how
references and ``$`` keys are kept) is ``safepoint.fixtures``'s.

``check_all`` and ``assert_all_loadable`` report run ids, steps and typed
errors only — never stored values. ``assert_migrates`` does show values in
its diff: it compares a fixture the test author wrote against what they expect.
"""

from __future__ import annotations

import difflib
import json
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from safepoint import codec
from safepoint.errors import InvalidArgument, NotFound, SafepointError
from safepoint.fixtures import (
    FIXTURE_FORMAT,
    fixture_checkpoint,
    fixture_text,
    read_fixture,
    unwrap_fixture,
    write_fixture,
)
from safepoint.migration_check import CheckFailure, CheckReport, check_one, stored_keys
from safepoint.migrations import MigrationChain
from safepoint.store import Store

# What this module has always offered: the fixture helpers (now in
# safepoint.fixtures) and the report types (safepoint.migration_check) with it.
__all__ = [
    "FIXTURE_FORMAT",
    "CheckFailure",
    "CheckReport",
    "assert_all_loadable",
    "assert_migrates",
    "check_all",
    "check_one",
    "fixture_checkpoint",
    "fixture_text",
    "read_fixture",
    "stored_keys",
    "write_fixture",
]

JSONDict = dict[str, Any]


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
        data = unwrap_fixture(fixture, "fixture") if "safepoint_fixture" in fixture else dict(fixture)
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
