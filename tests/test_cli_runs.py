"""``safepoint runs`` at an operator's terminal: who holds each run, queued runs as queued, when a
held-back run comes back, counters nobody has to squint at, and a next page that stays on the store.

The runs are put in each state through the library (enqueue, a worker's
claim, a failed attempt's release), then listed by the real executable.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import safepoint
from safepoint import Run
from safepoint_exe import sp

ESC = "\x1b"
WORKER = "w" + ESC + "[31m1"


def _seed(url: str) -> None:
    """queued (never claimed), held (a worker's live lease), retry (a failed attempt, back in an hour)."""
    with safepoint.open_store(url) as store:
        for run_id in ("retry", "held", "queued"):  # "queued" is the newest: claims take the oldest
            run = Run.start(store, run_id)
            run.add_usage(tokens_in=12_345, tokens_out=678, spend=960.0)
            run.commit()
            run.close()
        store.enqueue("retry")
        failed = store.claim("other-worker", lease=60)
        assert failed is not None
        assert failed.run_id == "retry"
        back = datetime.now(UTC) + timedelta(hours=1)
        store.release(failed, requeue=True, retry_at=back, error="RuntimeError: model timed out")
        store.enqueue("held")
        lease = store.claim(WORKER, lease=600)
        assert lease is not None
        assert lease.run_id == "held"
        store.enqueue("queued")


def test_runs_shows_queued_holder_and_retry_at_at_80_columns_uncut(tmp_path: Path) -> None:
    """80 columns: queued as queued, the holder's id escaped, retry at shown, no counter cut to "…"
    (columns that do not fit are left out and named), counters as 12,345 and 960 (not 960.0);
    --json carries the same facts."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _seed(url)
    table = sp(tmp_path, "runs", "--store", url, columns=80)
    assert table.returncode == 0, table.stderr
    out = table.stdout
    assert ESC not in out
    assert "…" not in out
    assert "queued" in out
    assert "tokens_in=12,345" in out
    assert "spend=960 " in out
    assert "960.0" not in out
    assert "left out at this width:" in out  # what did not fit is named, not cut
    assert "retry at" in out
    assert "holder" in out
    runs = {r["run_id"]: r for r in json.loads(sp(tmp_path, "runs", "--store", url, "--json").stdout)["runs"]}
    assert (runs["queued"]["status"], runs["queued"]["queued"], runs["queued"]["holder"]) == (
        "running", True, None,
    )  # fmt: skip
    assert (runs["held"]["queued"], runs["held"]["holder"]) == (False, WORKER)
    assert runs["held"]["lease_expires_at"] is not None
    assert runs["retry"]["retry_at"] is not None
    assert runs["retry"]["last_error"] == "RuntimeError: model timed out"
    assert runs["retry"]["attempts"] == 1


def test_runs_wide_columns_and_a_next_page_that_keeps_the_store(tmp_path: Path) -> None:
    """--columns picks and orders; --wide is one line per run; the hint repeats --store and the
    layout, and running it lists the next page of the same store."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _seed(url)
    picked = sp(
        tmp_path, "runs", "--columns", "run,holder,counters", "--limit", "1", "--store", url, columns=80
    )
    assert picked.returncode == 0, picked.stderr
    header = next(line for line in picked.stdout.splitlines() if "run" in line and "holder" in line)
    assert header.index("run") < header.index("holder") < header.index("counters")
    assert "status" not in picked.stdout.split("more:")[0]
    hint = next(line for line in picked.stdout.splitlines() if line.startswith("more: "))
    command = shlex.split(hint.removeprefix("more: "))
    assert f"--store={url}" in command
    assert "--columns=run,holder,counters" in command
    other = tmp_path / "elsewhere"
    other.mkdir()
    rest = sp(other, *command[1:], "--json")  # from another folder: the hint alone names the store
    assert rest.returncode == 0, rest.stderr
    assert [r["run_id"] for r in json.loads(rest.stdout)["runs"]] == ["held"]
    wide = sp(tmp_path, "runs", "--wide", "--store", url, columns=80)
    assert wide.returncode == 0, wide.stderr
    rows = [line for line in wide.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 3  # one line per run, however narrow the terminal
    assert "RuntimeError: model timed out" in wide.stdout
    bad = sp(tmp_path, "runs", "--columns", "run,nope", "--store", url)
    assert bad.returncode == 2


def test_runs_sort_orders_every_page_and_the_hint_keeps_the_order(tmp_path: Path) -> None:
    """--sort run_id --ascending lists every run A to Z across pages (each run once), by following
    the hint's command; a cursor under another order is refused (exit 2); a bad key too."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ids = ["b\x1b[2J", "a", "<script>x</script>", "c", "B"]
    with safepoint.open_store(url) as store:
        for run_id in ids:
            store.save(safepoint.Checkpoint(run_id=run_id))
    seen: list[str] = []
    command = ["runs", "--sort", "run_id", "--ascending", "--limit", "2", "--store", url]
    cursor = None
    while True:
        page = sp(tmp_path, *command, "--json")
        assert page.returncode == 0, page.stderr
        data = json.loads(page.stdout)
        seen += [r["run_id"] for r in data["runs"]]
        if data["next_cursor"] is None:
            break
        cursor = data["next_cursor"]
        text = sp(tmp_path, *command, columns=120)
        hint = next(line for line in text.stdout.splitlines() if line.startswith("more: "))
        assert "\x1b" not in text.stdout
        command = shlex.split(hint.removeprefix("more: "))[1:]
        assert [a for a in command if a.startswith("--sort") or a == "--ascending"] == [
            "--sort=run_id",
            "--ascending",
        ]
    assert seen == sorted(ids)
    assert cursor is not None
    other = sp(tmp_path, "runs", "--sort", "status", "--cursor", cursor, "--store", url)
    assert other.returncode == 2, other.stderr
    assert sp(tmp_path, "runs", "--sort", "counters", "--store", url).returncode == 2


def test_runs_sort_choices_are_the_stores() -> None:
    """The CLI's --sort choices (written out: it stays on the public API) are the store's sorts."""
    from safepoint.cli import runs as runs_command  # noqa: PLC0415
    from safepoint.store import sorting  # noqa: PLC0415

    assert runs_command.SORTS == sorting.SORTS
