"""``store.counter_sums`` (the cost view's and ``safepoint stats``' one query) on every backend, plain
and encrypted: a run whose counters do not read is counted as unreadable and the sums stand; the
store's own upper bound is the one ``safepoint.totals`` uses for ``until`` (excluded)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from helpers.store_targets import CONFIGS, Target, made
from safepoint import Checkpoint
from safepoint.totals import totals

HEADER_OF = "(SELECT id * 4294967296 FROM safepoint_runs WHERE run_id = '{}')"  # a run's step 0 row


@pytest.fixture(params=CONFIGS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with made(request.param, tmp_path) as made_target:
        yield made_target


def damage_counters(target: Target) -> None:
    """run-2's counters no longer read: sealed for run-1 (encrypted), or not an object (plain)."""
    if target.url.startswith("sqlite"):  # counters live in the head checkpoint's header
        if target.encrypted:
            target.execute(
                f"UPDATE safepoint_checkpoints SET header = (SELECT header FROM safepoint_checkpoints"
                f" WHERE id = {HEADER_OF.format('run-1')}) WHERE id = {HEADER_OF.format('run-2')}"
            )
        else:
            target.execute(
                "UPDATE safepoint_checkpoints SET header = CAST('{\"counters\": [1]}' AS BLOB)"
                f" WHERE id = {HEADER_OF.format('run-2')}"
            )
    elif target.encrypted:
        target.execute(
            "UPDATE safepoint_runs SET counters = (SELECT counters FROM safepoint_runs"
            " WHERE run_id = 'run-1') WHERE run_id = 'run-2'"
        )
    else:
        target.execute("UPDATE safepoint_runs SET counters = '[1]'::jsonb WHERE run_id = 'run-2'")


def test_a_run_whose_counters_do_not_read_is_unreadable_and_the_sums_stand(target: Target) -> None:
    """Four runs (tokens 0..3, spend 0.25 each), one damaged: three summed, one unreadable."""
    with target.open() as store:
        for n in range(4):
            cp = Checkpoint(run_id=f"run-{n}", labels={"team": "a"})
            cp.counters = {"tokens_in": n, "spend": 0.25}
            store.save(cp)
    damage_counters(target)
    with target.open(read_only=True) as store:
        found = store.counter_sums()
        assert found.unreadable == 1
        assert sum(runs for _, runs, _ in found.hours) == 3
        assert sum(c["tokens_in"] for _, _, c in found.hours) == 0 + 1 + 3
        summed = totals(store)
        assert (summed.runs, summed.unreadable, summed.totals) == (3, 1, {"tokens_in": 4, "spend": 0.75})
        newest = store.run("run-3").updated_at
        until = totals(store, until=newest)  # excluded: run-3 is left out, the others stay
        assert (until.runs, until.totals["tokens_in"]) == (2, 1)
        assert totals(store, until=newest + timedelta(microseconds=1)).runs == 3
