"""The user-state migration chain and its test helpers (fixtures, assert_migrates, whole-store checks)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import safepoint
from safepoint import (
    Checkpoint,
    InvalidArgument,
    InvalidMigrationChain,
    MigrationError,
    NotJSONCompatible,
    SchemaTooNew,
    Store,
    migration_check,
)
from safepoint.migrations import MigrationChain
from safepoint.testing import migrations as testing_migrations
from safepoint.testing.migrations import (
    CheckReport,
    assert_all_loadable,
    assert_migrates,
    check_all,
    fixture_text,
    read_fixture,
    write_fixture,
)

SECRET = "sk-live-4f3c2b1a0987"  # a stored value that must never reach an error message
DOCS = Path(__file__).resolve().parent.parent / "docs" / "migrations.md"

JSONDict = dict[str, Any]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=10)}),
    max_size=4,
)


def _noop(cp: JSONDict) -> JSONDict:
    return cp


def checkpoint(version: int = 1, run_id: str = "run-1", step: int = 0, **fields: Any) -> JSONDict:
    """A stored checkpoint as plain data, at ``version``."""
    return Checkpoint(run_id=run_id, step=step, schema_version=version, **fields).to_dict()


# --- a family of pure migrations, each parametrized by the version it lifts from ---


def _append_trail(version: int) -> Callable[[JSONDict], JSONDict]:
    def migrate(cp: JSONDict) -> JSONDict:  # changes its argument in place
        cp["state"].setdefault("trail", []).append(version)
        return cp

    return migrate


def _rename_content(version: int) -> Callable[[JSONDict], JSONDict]:
    def migrate(cp: JSONDict) -> JSONDict:  # builds a new dict, leaves its argument alone
        renamed = [{("text" if k == "content" else k): v for k, v in m.items()} for m in cp["messages"]]
        return {**cp, "messages": renamed}

    return migrate


def _count(version: int) -> Callable[[JSONDict], JSONDict]:
    def migrate(cp: JSONDict) -> JSONDict:
        cp["counters"]["lifted"] = cp["counters"].get("lifted", 0) + version
        return cp

    return migrate


def _wrap_state(version: int) -> Callable[[JSONDict], JSONDict]:
    def migrate(cp: JSONDict) -> JSONDict:
        return {**cp, "state": {f"v{version}": cp["state"]}}

    return migrate


def _cursor(version: int) -> Callable[[JSONDict], JSONDict]:
    def migrate(cp: JSONDict) -> JSONDict:
        cp["cursors"][f"c{version}"] = len(cp["messages"])
        return cp

    return migrate


FAMILY = [_append_trail, _rename_content, _count, _wrap_state, _cursor]


@st.composite
def chains_and_data(draw: st.DrawFn) -> tuple[list[Callable[[JSONDict], JSONDict]], int, JSONDict]:
    """Migration functions for versions 1..n-1, a start version, and a checkpoint at it."""
    kinds = draw(st.lists(st.sampled_from(FAMILY), max_size=6))
    functions = [kind(version) for version, kind in enumerate(kinds, start=1)]
    start = draw(st.integers(1, len(functions) + 1))
    data = checkpoint(
        start,
        step=draw(st.integers(0, 50)),
        messages=draw(messages),
        state=draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4)),
    )
    return functions, start, data


def _chain(functions: list[Callable[[JSONDict], JSONDict]], first: int = 1, last: int | None = None) -> Any:
    """The chain of ``functions`` (functions[i] lifts version i + 1) from ``first`` to ``last``."""
    last = len(functions) + 1 if last is None else last
    return MigrationChain(
        current=last, oldest=first, migrations={v: functions[v - 1] for v in range(first, last)}
    )


# --- building and validation ---


@given(
    current=st.integers(1, 8),
    oldest=st.integers(1, 9),
    registered=st.lists(st.integers(-1, 10), max_size=10),
)
def test_validation_fails_exactly_when_versions_are_not_oldest_to_current(
    current: int, oldest: int, registered: list[int]
) -> None:
    """Decorator-built chains fail exactly when registrations are not each of oldest..current-1 once."""
    valid = (
        oldest <= current
        and len(set(registered)) == len(registered)
        and set(registered) == set(range(oldest, current))
    )

    def build() -> None:
        chain = MigrationChain(current=current, oldest=oldest)
        for version in registered:
            chain.migration(from_version=version)(_noop)
        chain.validate()

    if valid:
        build()
    else:
        with pytest.raises(InvalidMigrationChain):
            build()


@given(current=st.integers(1, 8), registered=st.sets(st.integers(-1, 10), max_size=10))
def test_mapping_chains_are_checked_whole_at_construction(current: int, registered: set[int]) -> None:
    """A chain given as a mapping raises at construction exactly when it is not the range 1..current-1."""
    mapping = dict.fromkeys(registered, _noop)
    if registered == set(range(1, current)):
        MigrationChain(current, mapping).validate()
    else:
        with pytest.raises(InvalidMigrationChain):
            MigrationChain(current, mapping)


def test_gaps_are_named_each() -> None:
    """The gap error names every missing step, including a missing first one."""
    with pytest.raises(InvalidMigrationChain) as caught:
        MigrationChain(current=6, migrations={1: _noop, 3: _noop})
    assert str(caught.value) == (
        "no migration from version 2 to 3, 4 to 5, 5 to 6: a chain at current version 6 needs one "
        "from every version from 1 to 5"
    )
    chain = MigrationChain(current=3)
    chain.migration(from_version=2)(_noop)
    with pytest.raises(InvalidMigrationChain, match="no migration from version 1 to 2"):
        chain.validate()


def test_each_registration_is_checked_as_it_comes() -> None:
    """Duplicates, out-of-range versions and non-callables raise at the decorator, naming versions."""
    chain = MigrationChain(current=4, oldest=2)

    @chain.migration(from_version=2)
    def first(cp: JSONDict) -> JSONDict:
        return cp

    cases: list[tuple[Any, Any, str]] = [
        (2, _noop, r"^migration from version 2 to 3 is registered twice \(.*first and _noop\)$"),
        (4, _noop, r"^migration from version 4 to 5 goes beyond the current version 4"),
        (9, _noop, r"^migration from version 9 to 10 goes beyond the current version 4"),
        (1, _noop, r"^migration from version 1 is below the oldest supported version 2"),
        (0, _noop, r"^migration from version 0: versions start at 1$"),
        (3, "not a function", r"^migration from version 3 is a str, not a function$"),
        (True, _noop, r"^migration versions must be ints, not bool$"),
        ("3", _noop, r"^migration versions must be ints, not str$"),
    ]
    for version, function, message in cases:
        with pytest.raises(InvalidMigrationChain, match=message):
            chain.migration(from_version=version)(function)
    assert list(chain.migrations) == [2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"current": 0}, "current must be an int of at least 1, not 0"),
        ({"current": 2.0}, "current must be an int of at least 1, not 2.0"),
        ({"current": 3, "oldest": 4}, r"oldest must be an int from 1 to current \(3\), not 4"),
        ({"current": 3, "oldest": 0}, r"oldest must be an int from 1 to current \(3\), not 0"),
        ({"current": 2, "migrations": [_noop]}, "migrations must be a mapping of version to function"),
    ],
)
def test_bad_construction_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    """current, oldest and the migrations mapping are checked at construction."""
    with pytest.raises(InvalidMigrationChain, match=message):
        MigrationChain(**kwargs)


def test_migrate_validates_the_chain_first() -> None:
    """A chain with a gap refuses to migrate anything, even a checkpoint the gap would not touch."""
    chain = MigrationChain(current=3)
    chain.migration(from_version=1)(_noop)
    with pytest.raises(InvalidMigrationChain):
        chain.migrate(checkpoint(3))


def test_identity_chain() -> None:
    """current=1 with no migrations is valid and returns an equal copy of the checkpoint."""
    chain = MigrationChain(current=1)
    chain.validate()
    data = checkpoint(1, state={"a": [1]})
    result = chain.migrate(data)
    assert result == data
    assert result is not data
    assert result["state"]["a"] is not data["state"]["a"]
    assert not chain.needs_migration(1)
    assert chain.versions == range(1, 2)


def test_introspection() -> None:
    """current, oldest, versions, migrations and needs_migration describe the chain."""
    chain = MigrationChain(current=4, oldest=2, migrations={3: _noop, 2: _count(2)})
    assert (chain.current, chain.oldest, list(chain.versions)) == (4, 2, [2, 3, 4])
    assert list(chain.migrations) == [2, 3]
    assert [chain.needs_migration(v) for v in (1, 2, 3, 4, 5)] == [True, True, True, False, True]
    with pytest.raises(InvalidArgument):
        chain.needs_migration(0)
    assert repr(chain) == ("MigrationChain(current=4, oldest=2, migrations={2: _count.migrate, 3: _noop})")


# --- migrating: properties ---


@given(chains_and_data())
def test_lazy_migration_equals_applying_the_functions_by_hand(
    case: tuple[list[Callable[[JSONDict], JSONDict]], int, JSONDict],
) -> None:
    """Migrating through the chain equals calling each function in order and bumping the version."""
    functions, start, data = case
    by_hand = copy.deepcopy(data)
    for version in range(start, len(functions) + 1):
        by_hand = functions[version - 1](copy.deepcopy(by_hand))
        by_hand["schema_version"] = version + 1
    assert _chain(functions).migrate(data) == by_hand


@given(chains_and_data(), st.data())
def test_migrating_in_two_legs_equals_migrating_at_once(
    case: tuple[list[Callable[[JSONDict], JSONDict]], int, JSONDict], data: st.DataObject
) -> None:
    """Sub-chain start..k followed by sub-chain k..current equals the whole chain start..current."""
    functions, start, stored = case
    current = len(functions) + 1
    split = data.draw(st.integers(start, current))
    first, second = _chain(functions, 1, split), _chain(functions, split, current)
    assert second.migrate(first.migrate(stored)) == _chain(functions).migrate(stored)


@given(chains_and_data())
def test_migrate_never_changes_its_input(
    case: tuple[list[Callable[[JSONDict], JSONDict]], int, JSONDict],
) -> None:
    """The stored checkpoint given to migrate is unchanged and shares nothing mutable with the result."""
    functions, _, data = case
    before = copy.deepcopy(data)
    result = _chain(functions).migrate(data)
    assert data == before
    result["state"]["touched"] = True
    result["messages"].append({"role": "user"})
    assert data == before


def test_migrate_does_not_change_its_input_when_a_migration_fails() -> None:
    """A migration that edits its argument in place and then raises leaves the stored data as it was."""
    chain = MigrationChain(current=2)

    @chain.migration(from_version=1)
    def half_done(cp: JSONDict) -> JSONDict:
        cp["state"]["half"] = True
        cp["messages"].clear()
        raise RuntimeError("stop")

    data = checkpoint(1, messages=[{"role": "user", "content": "hi"}])
    before = copy.deepcopy(data)
    with pytest.raises(MigrationError):
        chain.migrate(data)
    assert data == before


def test_chain_sets_schema_version_whatever_the_function_does() -> None:
    """schema_version is the chain's: a function that removes or mis-sets it still yields current."""
    chain = MigrationChain(current=3)
    chain.migration(from_version=1)(lambda cp: {k: v for k, v in cp.items() if k != "schema_version"})
    chain.migration(from_version=2)(lambda cp: {**cp, "schema_version": 99})
    assert chain.migrate(checkpoint(1))["schema_version"] == 3


def test_run_and_step_arguments_name_partial_data() -> None:
    """Data without run_id and step migrates when they are given as arguments; errors use them."""
    chain = MigrationChain(current=2, migrations={1: _count(1)})
    result = chain.migrate({"schema_version": 1, "counters": {}}, run_id="r", step=4)
    assert result == {"schema_version": 2, "counters": {"lifted": 1}}
    with pytest.raises(SchemaTooNew, match="run 'r' step 4"):
        chain.migrate({"schema_version": 3}, run_id="r", step=4)
    with pytest.raises(InvalidArgument, match="needs a str run_id"):
        chain.migrate({"schema_version": 1})


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ([], InvalidArgument, "migrate needs the checkpoint as a dict, not list"),
        (
            {"run_id": "r", "step": 1},
            InvalidArgument,
            "run 'r' step 1: schema_version must be an int, not NoneType",
        ),
        (
            {"run_id": "r", "step": 1, "schema_version": SECRET},
            InvalidArgument,
            "run 'r' step 1: schema_version must be an int, not str",
        ),
        (
            {"run_id": "r", "step": 1, "schema_version": 0},
            InvalidArgument,
            "schema_version must be at least 1",
        ),
        (
            {"run_id": "r", "step": "1", "schema_version": 1},
            InvalidArgument,
            "needs an int step, in the checkpoint or as step=",
        ),
        (
            {"run_id": "r", "step": 1, "schema_version": 1, "state": {"s": {SECRET}}},
            NotJSONCompatible,
            "state.s: set is not JSON-compatible",
        ),
    ],
)
def test_malformed_stored_data_is_refused(data: Any, error: type[Exception], message: str) -> None:
    """Data that is not a checkpoint's plain JSON is a typed error naming the field, never its value."""
    chain = MigrationChain(current=2, migrations={1: _noop})
    with pytest.raises(error) as caught:
        chain.migrate(data)
    assert str(caught.value).endswith(message)
    assert SECRET not in str(caught.value)


# --- migrating: errors ---


def test_newer_checkpoint_is_schema_too_new() -> None:
    """A checkpoint newer than current raises SchemaTooNew naming run, step and both versions."""
    chain = MigrationChain(current=3, migrations={1: _noop, 2: _noop})
    with pytest.raises(SchemaTooNew) as caught:
        chain.migrate(checkpoint(5, run_id="run-7", step=12, state={"key": SECRET}))
    error = caught.value
    assert (error.run_id, error.step, error.stored_version, error.current_version) == ("run-7", 12, 5, 3)
    assert str(error).startswith("run 'run-7' step 12 has schema_version 5, newer than this code's 3")
    assert SECRET not in str(error)


def test_older_than_oldest_is_a_migration_error() -> None:
    """A checkpoint below oldest raises MigrationError saying its migrations were retired."""
    chain = MigrationChain(current=4, oldest=2, migrations={2: _noop, 3: _noop})
    with pytest.raises(MigrationError) as caught:
        chain.migrate(checkpoint(1, run_id="old", step=3))
    error = caught.value
    assert (error.run_id, error.step, error.from_version, error.to_version) == ("old", 3, 1, 4)
    assert "schema_version 1 is older than the oldest this chain supports (2)" in str(error)
    chain.check_version(2, run_id="old", step=3)  # 2 is fine


def _parse_token(cp: JSONDict) -> JSONDict:
    raise RuntimeError(f"cannot parse {cp['state']['token']}")


@pytest.mark.parametrize(
    ("raise_it", "name"),
    [
        (lambda cp: cp["state"][SECRET], "<lambda>"),  # KeyError carrying the stored key
        (lambda cp: int(cp["state"]["token"]), "<lambda>"),  # ValueError quoting the stored string
        (_parse_token, "_parse_token"),  # the function's own message quotes it
    ],
)
def test_a_raising_migration_is_a_migration_error_without_stored_values(
    raise_it: Callable[[JSONDict], JSONDict], name: str
) -> None:
    """MigrationError names run, step, versions and the exception type, chains the cause, quotes no value."""
    chain = MigrationChain(current=3, migrations={1: _noop, 2: raise_it})
    with pytest.raises(MigrationError) as caught:
        chain.migrate(checkpoint(1, run_id="run-9", step=4, state={"token": SECRET}))
    error = caught.value
    assert (error.run_id, error.step, error.from_version, error.to_version) == ("run-9", 4, 2, 3)
    assert isinstance(error.__cause__, KeyError | ValueError | RuntimeError)
    cause = type(error.__cause__).__name__
    assert re.fullmatch(
        rf"run 'run-9' step 4: migration from schema_version 2 to 3 failed: "
        rf"{re.escape(name)} raised {cause} \(chained as the cause\)",
        str(error),
    )
    assert SECRET in str(error.__cause__)  # the cause keeps it, for a developer's debugger
    assert SECRET not in str(error)
    assert SECRET not in repr(error)


@pytest.mark.parametrize(
    ("function", "detail"),
    [
        (lambda cp: None, "returned NoneType, not a dict (does it end with `return cp`?)"),
        (lambda cp: [cp], "returned list, not a dict"),
        (lambda cp: {**cp, "run_id": "other"}, "changed run_id; a migration must keep"),
        (lambda cp: {**cp, "step": cp["step"] + 1}, "changed step; a migration must keep"),
        (lambda cp: {**cp, "step": True}, "changed step"),
        (lambda cp: {k: v for k, v in cp.items() if k != "run_id"}, "changed run_id"),
        (lambda cp: {k: v for k, v in cp.items() if k != "messages"}, "removed the field 'messages'"),
        (lambda cp: {**cp, "state": [SECRET]}, "made 'state' a list"),
        (lambda cp: {**cp, "messages": [{"role": "user"}, SECRET]}, "made messages[1] a str, not a dict"),
        (
            lambda cp: {**cp, "state": {"when": {1, 2}, "keep": SECRET}},
            "returned data that is not JSON-compatible: state.when: set is not JSON-compatible",
        ),
        (
            lambda cp: {**cp, "cursors": {"at": [0, float("nan")]}},
            "returned data that is not JSON-compatible: cursors.at[1]: float nan is not JSON-compatible",
        ),
    ],
)
def test_bad_results_are_migration_errors(function: Callable[[JSONDict], Any], detail: str) -> None:
    """Results that are not dicts, change run_id/step, drop or retype a field, or are not JSON are refused."""
    chain = MigrationChain(current=2, migrations={1: function})
    with pytest.raises(MigrationError) as caught:
        chain.migrate(checkpoint(1, run_id="r", step=2, state={"token": SECRET}))
    assert str(caught.value).startswith(
        "run 'r' step 2: migration from schema_version 1 to 2 failed: <lambda> "
    )
    assert detail in str(caught.value)
    assert SECRET not in str(caught.value)


# --- fixtures ---


def test_fixture_round_trips(tmp_path: Path) -> None:
    """A checkpoint written as a fixture reads back as its to_dict(), and rewriting gives the same bytes."""
    cp = Checkpoint(
        run_id="run-1",
        step=3,
        schema_version=2,
        messages=[{"role": "user", "content": "héllo"}],
        counters={"tokens_in": 10, "spend": 0.25},
        state={"zeta": [1, {"b": 2, "a": None}], "alpha": "x"},
        labels={"team": "search"},
    )
    path = write_fixture(cp, tmp_path / "fixtures" / "run-1.json")
    assert read_fixture(path) == cp.to_dict()
    text = path.read_text(encoding="utf-8")
    again = write_fixture(read_fixture(path), tmp_path / "again.json")
    assert again.read_bytes() == path.read_bytes()
    assert text.endswith("}\n")
    assert text.startswith('{\n  "checkpoint": {\n    "counters": {\n')
    assert '"safepoint_fixture": 2' in text
    assert "héllo" in text  # UTF-8, not \u escapes: readable in review


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=5))
def test_fixture_text_ignores_key_order(state: JSONDict) -> None:
    """The same checkpoint gives the same fixture text whatever order its keys were built in."""
    data = checkpoint(1, state=state)
    shuffled = {k: data[k] for k in reversed(list(data))}
    shuffled["state"] = dict(reversed(list(state.items())))
    assert fixture_text(data) == fixture_text(shuffled)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a safepoint fixture (not valid JSON)"),
        ('{"run_id": "r"}', "not a safepoint fixture (no 'safepoint_fixture' key)"),
        ('{"safepoint_fixture": 3, "checkpoint": {}}', "format is not one this version reads (1 or 2)"),
        ('{"safepoint_fixture": 1, "checkpoint": []}', "the fixture's 'checkpoint' is not a dict"),
    ],
)
def test_read_fixture_refuses_other_files(tmp_path: Path, content: str, message: str) -> None:
    """read_fixture raises InvalidArgument naming the file for anything but a fixture it can read."""
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidArgument, match=re.escape(message)) as caught:
        read_fixture(path)
    assert str(caught.value).startswith(str(path))


def test_write_fixture_refuses_non_json(tmp_path: Path) -> None:
    """A value that is not JSON data is refused by path before any file is written."""
    with pytest.raises(NotJSONCompatible, match=r"^checkpoint\.state\.when: set is not JSON-compatible$"):
        write_fixture({**checkpoint(1), "state": {"when": {1}}}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


# --- assert_migrates ---


def _rename_chain() -> MigrationChain:
    chain = MigrationChain(current=3)

    @chain.migration(from_version=1)
    def add_budget(cp: JSONDict) -> JSONDict:
        cp["counters"]["budget_usd"] = 5
        return cp

    @chain.migration(from_version=2)
    def rename_plan(cp: JSONDict) -> JSONDict:
        cp["state"]["steps"] = cp["state"].pop("plan")
        return cp

    return chain


def test_assert_migrates_passes_on_a_fixture_file(tmp_path: Path) -> None:
    """A fixture that migrates and matches the expected keys passes; other keys are not compared."""
    path = write_fixture(checkpoint(1, state={"plan": ["a"]}, labels={"x": "y"}), tmp_path / "v1.json")
    result = assert_migrates(path, _rename_chain(), {"state": {"steps": ["a"]}, "schema_version": 3})
    assert result["counters"] == {"budget_usd": 5}
    assert_migrates(str(path), _rename_chain())
    assert_migrates(read_fixture(path), _rename_chain(), lambda cp: None)
    assert_migrates({"safepoint_fixture": 1, "checkpoint": read_fixture(path)}, _rename_chain())


def test_assert_migrates_shows_a_diff_on_mismatch() -> None:
    """A mismatch fails with the differing keys and a unified diff of expected against migrated."""
    data = checkpoint(1, state={"plan": ["a", "b"]})
    with pytest.raises(AssertionError) as caught:
        assert_migrates(data, _rename_chain(), {"state": {"steps": ["a", "c"]}, "labels": {}, "missing": 1})
    message = str(caught.value)
    assert message.startswith(
        "checkpoint 'run-1' step 0 migrated, but differs from expected in state, missing:"
    )
    assert "--- expected\n+++ migrated" in message
    assert '-      "c"' in message
    assert '+      "b"' in message
    assert '-  "missing": 1' in message
    assert "labels" not in message.split("\n", 1)[1]  # equal keys are not in the diff


def test_assert_migrates_fails_when_the_chain_does() -> None:
    """A fixture the chain cannot migrate fails the assertion, with the typed error chained."""
    with pytest.raises(
        AssertionError, match=r"does not migrate: MigrationError: .*rename_plan raised KeyError"
    ) as caught:
        assert_migrates(checkpoint(1, state={}), _rename_chain())
    assert isinstance(caught.value.__cause__, MigrationError)
    with pytest.raises(AssertionError, match="does not migrate: SchemaTooNew"):
        assert_migrates(checkpoint(4, state={}), _rename_chain())


def test_assert_migrates_runs_a_callable_check() -> None:
    """A callable expected fails the assertion by asserting or by returning False."""
    data = checkpoint(1, state={"plan": []})

    def has_budget(cp: JSONDict) -> bool:
        return "budget_usd" in cp["counters"]

    def no_budget(cp: JSONDict) -> bool:
        return "budget_usd" not in cp["counters"]

    def strict(cp: JSONDict) -> None:
        assert cp["state"]["steps"] == ["x"], "steps not carried over"

    assert_migrates(data, _rename_chain(), has_budget)
    with pytest.raises(AssertionError, match="no_budget returned False"):
        assert_migrates(data, _rename_chain(), no_budget)
    with pytest.raises(AssertionError, match="steps not carried over"):
        assert_migrates(data, _rename_chain(), strict)


# --- check_all and assert_all_loadable ---


def _poison_chain() -> MigrationChain:
    """current=3; the 1 -> 2 migration raises on checkpoints whose state holds "poison"."""
    chain = MigrationChain(current=3)

    @chain.migration(from_version=1)
    def refuse_poison(cp: JSONDict) -> JSONDict:
        if "poison" in cp["state"]:
            raise ValueError(f"poisoned: {cp['state']['poison']}")
        return cp

    chain.migration(from_version=2)(_count(2))
    return chain


def test_check_all_reports_every_failure_and_counts() -> None:
    """check_all lists each failing (run, step) with its typed error, and counts the rest."""
    items = [
        ("a", 0, checkpoint(1, run_id="a", step=0)),
        ("a", 1, checkpoint(1, run_id="a", step=1, state={"poison": SECRET})),
        ("b", 0, checkpoint(3, run_id="b", step=0)),
        ("b", 1, checkpoint(4, run_id="b", step=1)),
        ("c", 5, {"run_id": "c", "step": 5}),
        ("d", 2, checkpoint(2, run_id="d", step=2)),
    ]
    report = check_all(iter(items), _poison_chain())
    assert isinstance(report, CheckReport)
    assert [(f.run_id, f.step, type(f.error)) for f in report.failures] == [
        ("a", 1, MigrationError),
        ("b", 1, SchemaTooNew),
        ("c", 5, InvalidArgument),
    ]
    assert (report.checked, report.up_to_date, report.migrated, report.ok) == (6, 1, 2, False)
    assert dict(report.versions) == {1: 2, 2: 1, 3: 1, 4: 1}
    summary = report.summary()
    assert summary.splitlines()[0] == "checked 6 checkpoints: 1 at the current version, 2 migrate, 3 fail"
    assert "  run 'a' step 1: MigrationError: run 'a' step 1: migration" not in summary  # named once
    assert "  MigrationError: run 'a' step 1: migration from schema_version 1 to 2 failed" in summary
    assert "  run 'c' step 5: InvalidArgument: run 'c' step 5: schema_version" not in summary
    assert SECRET not in summary
    failure = report.failures[0].error
    assert failure.__traceback__ is None
    assert failure.__cause__ is not None
    assert failure.__cause__.__traceback__ is None  # no frames (holding the data) kept alive


def test_check_all_refuses_a_broken_chain_up_front() -> None:
    """A chain with a gap raises InvalidMigrationChain before any checkpoint is tried."""
    chain = MigrationChain(current=3)
    chain.migration(from_version=2)(_noop)
    with pytest.raises(InvalidMigrationChain):
        check_all([("a", 0, checkpoint(3))], chain)


def _save_run(store: Store, run_id: str, versions: list[int], poison_at: int | None = None) -> None:
    """Save one checkpoint per entry of ``versions``, as steps 0, 1, …"""
    cp = Checkpoint(run_id=run_id)
    for step, version in enumerate(versions):
        if step:
            cp = cp.next()
        cp.schema_version = version
        cp.messages.append({"role": "user", "content": f"turn {step}"})
        cp.state = {"poison": SECRET} if step == poison_at else {"ok": step}
        store.save(cp)


def _everything(store: Store) -> list[JSONDict]:
    out = []
    page = store.runs(limit=1000)
    for run in page:
        out.extend(store.load(run.run_id, info.step).to_dict() for info in store.history(run.run_id))
    return out


@pytest.fixture
def mixed_store() -> Iterator[Store]:
    """Five runs, 13 checkpoints: versions 1 to 3, one too new, one poisoned."""
    store = safepoint.open_store("memory://", schema_version=4)  # written by code up to version 4
    _save_run(store, "r0", [1, 1, 2])
    _save_run(store, "r1", [1, 1, 1], poison_at=1)
    _save_run(store, "r2", [2, 3])
    _save_run(store, "r3", [3, 4])
    _save_run(store, "r4", [1, 2, 2])
    yield store
    store.close()


def test_assert_all_loadable_lists_every_failing_checkpoint(mixed_store: Store) -> None:
    """Every failing (run, step) of the store is listed with its error; nothing is written; no value leaks."""
    before = _everything(mixed_store)
    with pytest.raises(AssertionError) as caught:
        assert_all_loadable(mixed_store, _poison_chain())
    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0] == "checked 13 checkpoints: 2 at the current version, 9 migrate, 2 fail"
    assert len(lines) == 3
    assert (
        "run 'r1' step 1: migration from schema_version 1 to 2 failed: _poison_chain.refuse_poison raised"
        in message
    )
    assert "SchemaTooNew: run 'r3' step 1 has schema_version 4, newer than this code's 3" in message
    assert SECRET not in message
    assert _everything(mixed_store) == before


def test_assert_all_loadable_passes_and_pages(mixed_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a chain every checkpoint fits, it returns the report, paging through runs two at a time."""
    monkeypatch.setattr(migration_check, "_PAGE_SIZE", 2)  # stored_keys pages there
    chain = MigrationChain(current=4, migrations={1: _noop, 2: _noop, 3: _noop})
    report = assert_all_loadable(mixed_store, chain)
    assert (report.checked, report.up_to_date, report.migrated, report.ok) == (13, 1, 12, True)
    assert dict(report.versions) == {1: 6, 2: 4, 3: 2, 4: 1}


def _sampled_keys(store: Store, chain: MigrationChain, *, sample: int, seed: int) -> list[tuple[str, int]]:
    """The (run, step) keys assert_all_loadable loads for this sample and seed."""
    loaded: list[tuple[str, int]] = []
    real = testing_migrations._load_stored

    def spy(store: Store, run_id: str, step: int) -> JSONDict:
        loaded.append((run_id, step))
        return real(store, run_id, step)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(testing_migrations, "_load_stored", spy)
        assert_all_loadable(store, chain, sample=sample, seed=seed)
    return loaded


def test_assert_all_loadable_samples_reproducibly(mixed_store: Store) -> None:
    """sample=N checks N checkpoints, the same ones for the same seed; a larger sample checks all."""
    chain = MigrationChain(current=4, migrations={1: _noop, 2: _noop, 3: _noop})
    assert assert_all_loadable(mixed_store, chain, sample=4).checked == 4
    assert assert_all_loadable(mixed_store, chain, sample=0).checked == 0
    assert assert_all_loadable(mixed_store, chain, sample=100).checked == 13
    keys = set(testing_migrations.stored_keys(mixed_store))
    first = _sampled_keys(mixed_store, chain, sample=5, seed=7)
    assert first == _sampled_keys(mixed_store, chain, sample=5, seed=7)
    assert len(set(first)) == 5
    assert set(first) <= keys
    with pytest.raises(InvalidArgument, match="sample must be a non-negative int"):
        assert_all_loadable(mixed_store, chain, sample=-1)


# --- docs ---


def test_docs_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python code block in docs/migrations.md runs, in order, in one namespace."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "docs_migrations"}
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), namespace)
