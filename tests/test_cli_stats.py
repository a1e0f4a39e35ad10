"""``safepoint stats`` run as the real executable: totals of each run's head counters, by day of the
run's last update, filtered, on a plain and an encrypted SQLite store; read-only.

Runs are saved through the library on three days (the store's clock is set
in this process, as the store's own tests set it), so the buckets are known.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Keyring, records
from safepoint.cli.output import ExitCode
from safepoint_exe import sp
from test_encryption_cli import key_file

ESC = "\x1b"
DAYS = {"2026-11-30": 1, "2026-12-01": 2, "2026-12-02": 3}  # day -> runs last updated that day


def _fill(url: str, monkeypatch: pytest.MonkeyPatch, **options: object) -> None:
    """Per run: 3 checkpoints whose counters grow; only the head's count. Team a on even runs."""
    n = 0
    for day, runs in DAYS.items():
        moment = datetime.fromisoformat(f"{day}T12:00:00+00:00")
        micros = int(moment.timestamp() * 1_000_000)
        monkeypatch.setattr(records, "now_micros", lambda micros=micros: micros)
        with safepoint.open_store(url, **options) as store:  # type: ignore[arg-type]
            for _ in range(runs):
                team = "a" if n % 2 == 0 else "b" + ESC + "[2J"
                cp = Checkpoint(run_id=f"r{n}", labels={"team": team})
                for step in range(3):
                    cp.counters = {"tokens_in": 100 * (step + 1), "spend": 0.1 * (step + 1), "x" + ESC: 1}
                    store.save(cp)
                    cp = cp.next()
                n += 1
    monkeypatch.undo()


def test_stats_sums_head_counters_by_day_and_filters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """6 runs: tokens_in 6 x 300, spend 6 x 0.3 shown as 1.8 (not 1.7999…); --label and --since narrow."""
    url = f"sqlite:///{tmp_path / 'stats.db'}"
    _fill(url, monkeypatch)
    result = sp(tmp_path, "stats", "--store", url, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["runs"] == 6
    assert data["totals"] == {"tokens_in": 1800, "spend": 1.8, "x\x1b": 6}
    assert [(b["bucket"], b["runs"]) for b in data["buckets"]] == list(DAYS.items())
    assert data["buckets"][2]["counters"]["tokens_in"] == 900
    team_a = json.loads(sp(tmp_path, "stats", "--label", "team=a", "--store", url, "--json").stdout)
    assert (team_a["runs"], team_a["totals"]["tokens_in"]) == (3, 900)
    window = sp(tmp_path, "stats", "--since", "2026-12-01", "--until", "2026-12-02", "--store", url, "--json")
    assert json.loads(window.stdout)["runs"] == 2
    # --until leaves out the runs updated at that very moment (the store's bound is one microsecond
    # before it): the 12:00 runs of 2026-12-01 are out, those of the day before in.
    for until, runs in (("2026-12-01T12:00:00", 1), ("2026-12-01T12:00:00.000001", 3)):
        edge = sp(tmp_path, "stats", "--until", until, "--store", url, "--json")
        assert json.loads(edge.stdout)["runs"] == runs, edge.stderr
    text = sp(tmp_path, "stats", "--by", "month", "--store", url, columns=120)
    assert text.returncode == 0, text.stderr
    assert ESC not in text.stdout
    assert "x\\x1b" in text.stdout  # a counter's name with a control character, escaped
    total = next(line for line in text.stdout.splitlines() if "total" in line)
    assert "1,800" in total
    assert "1.8" in total
    assert "1.79" not in text.stdout
    assert "1800.0" not in text.stdout


def test_stats_opens_an_encrypted_stores_counters_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encrypted: with the keyring the sealed counters are summed; without it exit 2. A missing
    store is exit 3 and no file appears."""
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    keys = key_file(tmp_path, "keys.txt", "k1")
    _fill(url, monkeypatch, encryption=Keyring.from_file(keys))
    sealed = sp(tmp_path, "stats", "--store", url, "--key-file", str(keys), "--json")
    assert sealed.returncode == 0, sealed.stderr
    assert json.loads(sealed.stdout)["totals"]["tokens_in"] == 1800
    keyless = sp(tmp_path, "stats", "--store", url)
    assert keyless.returncode == ExitCode.USAGE
    assert len(keyless.stderr.splitlines()) == 1
    missing = sp(tmp_path, "stats", "--store", f"sqlite:///{tmp_path / 'none.db'}", "--json")
    assert missing.returncode == ExitCode.NOT_FOUND
    assert json.loads(missing.stderr)["type"] == "StoreNotFound"
    assert not (tmp_path / "none.db").exists()
