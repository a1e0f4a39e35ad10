"""The model-based test of the whole store (tests/model_based/, docs/testing.md).

Each row of the pairwise covering array runs the state machine derandomized
(a fixed seed, no example database) for the examples x steps of PROFILE;
every regression script make soak wrote is replayed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hypothesis.internal.conjecture.engine as hypothesis_engine
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from model_based import configurations
from model_based.configurations import ROWS, Config
from model_based.machine import MACHINES
from model_based.repro import replay_file

# The bounded profile of make test: examples x steps per row, by what a step costs there.
# S3 through moto answers in about 25 ms a request, so its rows take fewer examples.
PROFILE: dict[str, tuple[int, int]] = {
    "memory": (4, 15),
    "sqlite": (6, 20),
    "postgres": (4, 20),
    "s3": (2, 15),
}


def profile_of(row: Config) -> tuple[int, int]:
    """(examples, steps) for ``row``."""
    return PROFILE["s3"] if row.blobs == "s3" else PROFILE[row.backend]


# Shrinking replays whole examples (stores opened, children killed): bound it so that a
# failing row reports within make test's budget; make soak shrinks longer (soak.py).
SHRINK_SECONDS = 20

REGRESSIONS = sorted((Path(__file__).parent / "model_based" / "regressions").glob("*.py"))


def bounded(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


@contextmanager
def bounded_shrinking(seconds: int) -> Iterator[None]:
    """Hypothesis's shrink time limit (an engine constant, 300 s) lowered while the block runs."""
    saved = hypothesis_engine.MAX_SHRINKING_SECONDS
    hypothesis_engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        hypothesis_engine.MAX_SHRINKING_SECONDS = saved


def test_covering_array_covers_every_valid_pair() -> None:
    """Every pair of factor values the store accepts is held by at least one row."""
    covered = set().union(*(configurations.pairs_of(row) for row in ROWS))
    assert configurations.valid_pairs() - covered == set()


def test_no_row_holds_an_invalid_pair() -> None:
    """No row asks for a combination the store refuses (each listed with its reason)."""
    for row in ROWS:
        assert configurations.pairs_of(row) & set(configurations.INVALID_PAIRS) == set(), row.name


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_store_agrees_with_the_model(row: Config) -> None:
    """Random operation sequences on this row's store agree with the reference model after every step."""
    if row.backend == "postgres":
        from conftest_postgres import require_postgres  # noqa: PLC0415

        require_postgres()
    with bounded_shrinking(SHRINK_SECONDS):
        run_state_machine_as_test(MACHINES[row.name], settings=bounded(*profile_of(row)))


def test_regression_scripts_replay_clean() -> None:
    """Every disagreement make soak once found (regressions/*.py) replays without one."""
    for script in REGRESSIONS:  # one test, not a parameter each: no regressions yet is no skip
        if "postgres" in script.stem:
            from conftest_postgres import require_postgres  # noqa: PLC0415

            require_postgres()
        replay_file(str(script))
