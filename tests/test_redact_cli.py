"""``safepoint redact`` and the audit trail as an operator meets them, through the real executable:
values from the environment or a file (never the command line, never echoed back), rules, PII
kinds, runs and labels chosen, dry runs, usage errors in one line, hostile ids rendered inert;
``show`` and ``verify`` display each run's record, and an edit of a redacted row or of its
record is still reported. The store-level proof is in ``test_redact.py``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import safepoint
from redact_seed import VALUE, occurrences, seed
from safepoint import Checkpoint
from safepoint_exe import sp

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
EMAIL = "ada.lovelace@example.org"
HOSTILE = "evil\x1b[2J\u202erun\n[ok]"  # a terminal escape, a bidi override, a line break


def quiet(*streams: str) -> None:
    """No form of the value in what the command printed."""
    found = occurrences(VALUE, [stream.encode() for stream in streams])
    assert sum(found.values()) == 0, dict(found)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    db = tmp_path / "runs.db"
    with safepoint.open_store(f"sqlite:///{db}", blob_threshold=256) as store:
        seed(store, 4, forks=1)
    with safepoint.open_store(f"sqlite:///{db}", scrubber=False) as raw:  # found only by --rule, --pii
        raw.save(Checkpoint(run_id="tokens", messages=[{"role": "user", "content": f"{JWT} {EMAIL}"}]))
    return f"sqlite:///{db}"


def run_json(tmp_path: Path, *args: str) -> dict:
    result = sp(tmp_path, *args, "--json")
    assert result.returncode == 0, result.stderr
    quiet(result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_redact_then_show_and_verify_display_the_record(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    done = run_json(tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN")
    assert done["runs_changed"] == 5
    assert done["failed"] == []
    assert set(done["found"]) == {"secret:value-1"}
    assert done["forks"] == []  # forks are listed when runs are chosen
    run_id = done["runs"][0]["run_id"]
    shown = run_json(tmp_path, "show", run_id, "--store", store_url)
    (record,) = shown["redactions"]
    assert record["intact"]
    assert record["named"]["values"] == 1
    assert record["counts"] == done["runs"][0]["found"]
    verified = run_json(tmp_path, "verify", "--store", store_url)
    assert verified["failures"] == []
    assert sorted(r["run_id"] for r in verified["redactions"]) == sorted(r["run_id"] for r in done["runs"])
    human = sp(tmp_path, "show", run_id, "--store", store_url, columns=200)
    assert "audited redactions" in human.stdout
    again = run_json(tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN")
    assert again["runs_changed"] == 0
    assert len(run_json(tmp_path, "show", run_id, "--store", store_url)["redactions"]) == 1

    db = store_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:  # the record's text edited: its check value no longer holds
        conn.execute(
            "UPDATE safepoint_redactions SET record = replace(record, '\"values\":1', '\"values\":2')"
        )
    conn.close()
    result = sp(tmp_path, "verify", "--store", store_url, "--json")
    assert result.returncode == 1
    failed = json.loads(result.stdout)["failures"]
    assert {failure["run_id"] for failure in failed} == {r["run_id"] for r in done["runs"]}
    assert all("redaction record" in failure["message"] for failure in failed)
    assert run_json(tmp_path, "show", run_id, "--store", store_url)["redactions"][0]["intact"] is False


def test_an_edit_of_a_redacted_row_is_reported_beside_its_record(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    done = run_json(tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN")
    run_id = done["runs"][0]["run_id"]
    with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
        ((run_ref,),) = conn.execute("SELECT id FROM safepoint_runs WHERE run_id = ?", (run_id,))
        ((body,),) = conn.execute("SELECT messages FROM safepoint_checkpoints WHERE id = ?", (run_ref << 32,))
        edited = bytes(body).replace(b"[REDACTED:value-1]", b"[REDACTED:value-9]", 1)
        conn.execute("UPDATE safepoint_checkpoints SET messages = ? WHERE id = ?", (edited, run_ref << 32))
    conn.close()
    result = sp(tmp_path, "verify", "--store", store_url, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert {(f["run_id"], f["error"]) for f in report["failures"]} == {(run_id, "CorruptCheckpoint")}
    assert run_id in {record["run_id"] for record in report["redactions"]}  # a record does not excuse it


def test_rules_pii_a_value_file_a_label_and_a_dry_run(tmp_path: Path, store_url: str) -> None:
    values = tmp_path / "values.txt"
    values.write_text(f"{VALUE}\n\nanother-value-never-stored\n", encoding="utf-8")
    db = Path(store_url.removeprefix("sqlite:///"))
    before = db.read_bytes()
    common = ("--store", store_url, "--value-file", str(values), "--rule", "jwt", "--pii", "email")
    dry = run_json(tmp_path, "redact", *common, "--dry-run")
    assert dry["dry_run"]
    assert dry["found"] == {
        "secret:value-1": dry["found"]["secret:value-1"],
        "jwt": 1,
        "email": 1,
    }
    assert db.read_bytes() == before  # nothing written
    tokens = run_json(tmp_path, "redact", *common, "--label", "tier=gold")
    assert "tokens" not in {run["run_id"] for run in tokens["runs"]}  # not labelled: not chosen
    assert tokens["found"]["secret:value-1"] == dry["found"]["secret:value-1"]
    chosen = run_json(tmp_path, "redact", *common, "--run", "tokens")
    assert chosen["found"] == {"jwt": 1, "email": 1}
    assert chosen["runs_scanned"] == 1
    with safepoint.open_store(store_url, read_only=True) as store:
        assert str(store.load("tokens").messages[0]["content"]) == "[REDACTED:jwt] [REDACTED:email]"
        assert all(record.intact for record in store.redactions("tokens"))


def test_the_forks_of_a_chosen_run_are_listed(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    parent = "run-37-00000"
    human = sp(
        tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN", "--run", parent, columns=200
    )
    assert human.returncode == 0, human.stderr
    quiet(human.stdout, human.stderr)
    assert "forks of the chosen runs, redacted too: fork-of-run-37-00000" in human.stdout
    assert "replaced" in human.stdout
    assert "in 2 of 2 runs" in human.stdout


BAD = {
    "nothing to redact": (),
    "runs and labels": ("--value-env", "SP_HIDDEN", "--run", "a", "--label", "k=v"),
    "an unset variable": (
        "--value-env",
        "SP_UNSET_FOR_TEST",
    ),
    "a short value": ("--value-env", "SP_SHORT"),
    "a label without =": ("--value-env", "SP_HIDDEN", "--label", "novalue"),
    "an unknown rule": ("--value-env", "SP_HIDDEN", "--rule", "no-such-rule"),
    "an unknown PII kind": ("--value-env", "SP_HIDDEN", "--pii", "blood-type"),
    "a missing value file": ("--value-file", "absent.txt"),
}


@pytest.mark.parametrize("args", BAD.values(), ids=list(BAD))
def test_usage_errors_are_one_clean_line(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    monkeypatch.setenv("SP_SHORT", 'sh"ört')
    monkeypatch.delenv("SP_UNSET_FOR_TEST", raising=False)
    db = Path(store_url.removeprefix("sqlite:///"))
    before = db.read_bytes()
    result = sp(tmp_path, "redact", "--store", store_url, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr
    assert len([line for line in lines if line.startswith("Error") or line.startswith("error")]) == 1, lines
    quiet(result.stdout, result.stderr)
    assert 'sh"ört' not in result.stdout + result.stderr
    assert db.read_bytes() == before


def test_hostile_run_ids_and_labels_are_rendered_inert(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with safepoint.open_store(store_url) as store:
        store.save(
            Checkpoint(
                run_id=HOSTILE,
                messages=[{"role": "user", "content": VALUE}],
                labels={"k\x1b]8;;": f"v {VALUE}", "safepoint.thread": f"t {VALUE}\u202e"},
            )
        )
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    result = sp(
        tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN", "--run", HOSTILE, columns=200
    )
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "\x1b" not in shown
    assert "\u202e" not in shown
    assert "left as it is (cannot be rewritten): 1 in a adapter label" in result.stdout.replace("\n  ", " ")
    quiet(result.stdout, result.stderr)
    done = run_json(tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN", "--dry-run")
    assert done["left"] == {"adapter label": 1}
    with safepoint.open_store(store_url, read_only=True) as store:
        assert store.load(HOSTILE).labels["k\x1b]8;;"] == "v [REDACTED:value-1]"


def test_a_run_id_holding_the_value_is_named_with_the_value_masked(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with safepoint.open_store(store_url) as store:
        store.save(Checkpoint(run_id=f"id {VALUE}", messages=[{"role": "user", "content": VALUE}]))
    monkeypatch.setenv("SP_HIDDEN", VALUE)
    for extra in ((), ("--json",)):
        result = sp(tmp_path, "redact", "--store", store_url, "--value-env", "SP_HIDDEN", *extra, columns=200)
        assert result.returncode == 0, result.stderr
        quiet(result.stdout, result.stderr)  # the id cannot be rewritten, and is not printed either
    assert json.loads(result.stdout)["left"] == {"run id": 1}
    assert "id [REDACTED:value-1]" in json.loads(result.stdout)["runs"][0]["run_id"]
