"""export/import carry a run's recorded calls with its checkpoint (issue 32, item 1).

A fixture holds the entries up to the step after its checkpoint, results in
stored form (secret references, rule markers, escaped ``$`` keys, bytes and
large values inline), usage, times and request digests; import writes them
back at steps counted from the checkpoint's (it becomes step 0), sealed and
scrubbed by the receiving store, put if absent. An encrypted store's request
digests are keyed: they travel as unknown, and such a copy is never replayed.
The round trip runs the real executable from SQLite to PostgreSQL.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import safepoint
import safepoint_exe
from conftest_postgres import fresh_schema, require_postgres
from safepoint import Checkpoint, Keyring, Secrets, Store
from safepoint.cli.output import ExitCode
from safepoint.errors import InvalidArgument
from safepoint.fixtures import fixture_text, read_fixture_run
from safepoint.records import CallCopy, CallUsage, Recorded

INDEX = base64.b64encode(bytes(range(32))).decode()
K1 = base64.b64encode(b"3" * 32).decode()
KEYS = f"index:{INDEX} k1:{K1}"
SECRET = "sk-test-0123456789abcdef"
TOKEN = "sk-proj-" + "A1b2C3d4" * 6  # matched by a default rule: stored as a marker
BIG = bytes(range(256)) * 800  # past the inline threshold: a blob
HOSTILE = "tool:\x1b[31mpay\u202e|1"


def secrets() -> Secrets:
    return Secrets().add("API_KEY", SECRET)


def journal_run(store: Store, run_id: str = "r") -> None:
    """Checkpoints 0..2; entries at steps 1 and 2, and at 3 (recorded after the head)."""
    cp = Checkpoint(run_id=run_id)
    store.save(cp)
    result = {"text": f"key {SECRET}", "token": TOKEN, "$secret": "plain data", "blob": BIG}
    store.record_call(run_id, "model#1", result, request={"q": 1}, usage=CallUsage(10, 5, 0.25))
    cp = cp.next()
    store.save(cp)
    store.record_call(run_id, HOSTILE, {"receipt": 1}, request={"amount": 5})
    store.call_intent(run_id, "tool:charge", request={"amount": 7})
    store.save(cp.next())
    store.record_call(run_id, "model#3", ["after"])


def shape(entries: list[Recorded]) -> list[tuple[str, int, str]]:
    return [(e.key, e.step, e.state) for e in entries]


def same_values(a: Recorded, b: Recorded) -> bool:
    fields = ("key", "state", "result", "usage", "redacted", "created_at", "done_at")
    return all(getattr(a, name) == getattr(b, name) for name in fields)


def cli(cwd: Path, *args: str) -> dict[str, object]:
    result = safepoint_exe.sp(cwd, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout) if result.stdout.startswith("{") else {}


def test_export_and_import_carry_the_journal_from_sqlite_to_postgresql(tmp_path: Path) -> None:
    """The real executable exports a SQLite run with its calls and imports it into PostgreSQL: the
    same entries at steps counted from the checkpoint's, replayable for the same request only."""
    dsn = require_postgres()
    source = f"sqlite:///{tmp_path / 'state.db'}"
    with safepoint.open_store(source, secrets=secrets()) as store:
        journal_run(store)
        before = store.recorded_calls("r")
    fixture = tmp_path / "r.json"
    cli(tmp_path, "export", "r", "--store", source, "-o", str(fixture))
    text = fixture.read_text(encoding="utf-8")
    assert SECRET not in text  # a reference travels, never the value
    assert TOKEN not in text
    assert [(c["key"], c["step"]) for c in json.loads(text)["calls"]] == [
        ("model#1", 1),
        (HOSTILE, 2),
        ("tool:charge", 2),
        ("model#3", 3),
    ]
    early = tmp_path / "early.json"
    cli(tmp_path, "export", "r", "--step", "1", "--store", source, "-o", str(early))
    with fresh_schema(dsn) as schema:
        target = f"{dsn}?schema={schema}"
        out = cli(tmp_path, "import", str(fixture), "--run-id", "copy", "--store", target, "--json")
        assert out["calls"] == 4
        cli(tmp_path, "import", str(early), "--run-id", "early", "--store", target, "--json")
        with safepoint.open_store(target, secrets=secrets()) as store:
            copied = store.recorded_calls("copy")
            assert shape(copied) == [
                ("model#1", 0, "done"),  # covered by the checkpoint step 0 stands for
                (HOSTILE, 0, "done"),
                ("tool:charge", 0, "intent"),
                ("model#3", 1, "done"),  # recorded after it: replayed by a resume from it
            ]
            assert all(same_values(a, b) for a, b in zip(before, copied, strict=True))
            assert copied[0].redacted == 1
            assert copied[0].result["blob"] == BIG
            assert copied[0].result["$secret"] == "plain data"
            assert store.recorded_call("copy", "model#1", request={"q": 1}).same_request is True
            assert store.recorded_call("copy", "model#1", request={"q": 2}).same_request is False
            resolved = store.recorded_call("copy", "model#1", resolve_secrets=True)
            assert resolved.result["text"] == f"key {SECRET}"
            assert "[REDACTED" in resolved.result["token"]  # a rule's marker replays redacted
            assert shape(store.recorded_calls("early")) == [
                ("model#1", 0, "done"),
                (HOSTILE, 1, "done"),
                ("tool:charge", 1, "intent"),
            ]
        verified = safepoint_exe.sp(tmp_path, "verify", "--store", target, "--json")
        assert verified.returncode == 0, verified.stdout
        assert json.loads(verified.stdout)["calls"] == 7


def test_an_encrypted_stores_requests_travel_unknown_and_never_replay(tmp_path: Path) -> None:
    """Exported from an encrypted store, a request digest is keyed: the copy says so, and imported
    it is shown but never replayed; the receiving encrypted store seals it for its own place."""
    keyring = Keyring.from_text(KEYS)
    with safepoint.open_store(f"sqlite:///{tmp_path / 'a.db'}", encryption=keyring) as store:
        journal_run(store)
        cp = store.load("r")
        copies = store.export_calls("r", step=cp.step)
    assert [(c.entry.key, c.request_known, c.request_digest) for c in copies] == [
        ("model#1", False, None),
        (HOSTILE, False, None),
        ("tool:charge", False, None),
        ("model#3", True, None),  # recorded without a request
    ]
    path = tmp_path / "r.json"
    path.write_text(fixture_text(cp, calls=copies), encoding="utf-8")
    started, carried = read_fixture_run(path, "copy")
    assert started.step == 0
    assert [c.entry.step for c in carried] == [0, 0, 0, 1]
    with safepoint.open_store(f"sqlite:///{tmp_path / 'b.db'}", encryption=keyring) as store:
        store.save(started)
        assert store.import_calls("copy", carried) == 4
        assert store.import_calls("copy", carried) == 0  # put if absent: the entries stay
        assert store.recorded_call("copy", "model#1", request={"q": 1}).same_request is False
        assert store.recorded_call("copy", "model#3", request={"q": 1}).same_request is None
        assert store.recorded_call("copy", "model#1").result["blob"] == BIG
        assert store.verify_calls("copy").damaged == []


def test_import_refuses_what_no_export_writes(tmp_path: Path) -> None:
    """A call past the run's next step, a malformed fixture entry, a copy that is not one: refused,
    naming what is wrong and no value; nothing is written."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        store.save(Checkpoint(run_id="r"))
        late = CallCopy(Recorded(run_id="r", key="k", step=2, state="done", result={"v": 1}))
        with pytest.raises(InvalidArgument, match="past the run's next step"):
            store.import_calls("r", [late])
        with pytest.raises(InvalidArgument, match="CallCopy"):
            store.import_calls("r", [{"key": "k"}])  # type: ignore[list-item]
        assert store.recorded_calls("r") == []
        cp = store.load("r")
    for entry, why in [
        ({"key": "k", "step": 9, "state": "done"}, "neither covers nor precedes"),
        ({"key": "k", "step": 0, "state": "maybe"}, "state of intent or done"),
        ({"key": "k", "step": 0, "state": "done", "request": "zz"}, "request is not a digest"),
        ({"key": "k", "step": 0, "state": "done", "created_at": "yesterday"}, "ISO 8601"),
    ]:
        document = json.loads(fixture_text(cp))
        document["calls"] = [entry]
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        with pytest.raises(InvalidArgument, match=why):
            read_fixture_run(path)
        refused = safepoint_exe.sp(
            tmp_path, "import", str(path), "--store", f"sqlite:///{tmp_path / 'new.db'}"
        )
        assert refused.returncode == ExitCode.USAGE, refused.stderr
        assert "calls[0]" in refused.stderr
    assert not (tmp_path / "new.db").exists()  # the fixture is read before any store is opened
