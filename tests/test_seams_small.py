"""The smaller seams of issue 30, each tried as a new user would and now failing closed.

One test per item: a typed error, a bound, or a fix where a traceback, an
unbounded read or a leak was before. CLI items run the real ``safepoint``
executable; the inspector's guard is driven over HTTP; stores are real
SQLite files and a real PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_framework import WorkflowCheckpoint
from agent_framework._workflows._runner_context import WorkflowMessage
from starlette.testclient import TestClient

import safepoint
import safepoint.blobs.base
import safepoint.fixtures
import safepoint.harness
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint import Checkpoint, Run, Status
from safepoint.adapters.agent_framework import SafepointCheckpointStorage
from safepoint.adapters.agent_framework import layout as af_layout
from safepoint.ui import create_app
from safepoint.ui.guard import same_site
from safepoint_exe import sp


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    empty = tmp_path / "cwd"
    empty.mkdir()
    return empty


def _pending(url: str, run_id: str, pending: dict[str, object], status: Status = Status.WAITING) -> None:
    """A run saved with ``pending`` as its pending action, as a user writing checkpoints by hand would."""
    with safepoint.open_store(url) as store:
        Run.start(store, run_id)
        head = store.load(run_id)
        store.save(dataclasses.replace(head, step=head.step + 1, status=status, pending_action=pending))


def test_answer_on_a_pending_action_without_a_tool_is_a_typed_refusal(tmp_path: Path, folder: Path) -> None:
    """answer on a hand-saved pending action lacking 'tool' exits 6 with RunStatusError naming the field."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    _pending(url, "ticket", {"question": "refund sk-not-quoted?"})
    result = sp(folder, "answer", "ticket", "--skip", "yes", "--store", url, "--json")
    assert result.returncode == 6, result.stderr
    error = json.loads(result.stderr)
    assert error["type"] == "RunStatusError"
    assert error["run_id"] == "ticket"
    assert "'tool' is missing" in error["error"]
    assert "sk-not-quoted" not in result.stderr
    with safepoint.open_store(url) as store, pytest.raises(safepoint.errors.RunStatusError, match="'tool'"):
        Run.resume_with(store, "ticket", "yes")
    # a running run resumed with the README's scrubbing example as its pending action
    _pending(url, "keyless", {"tool": "search", "headers": {}}, Status.RUNNING)
    with safepoint.open_store(url) as store, pytest.raises(safepoint.errors.RunStatusError, match="'key'"):
        Run.resume(store, "keyless")


def test_answer_json_value_nested_past_the_store_bound_is_a_usage_error(tmp_path: Path, folder: Path) -> None:
    """--json-value 5,000 deep exits 2 naming the bound (nothing saved); 150 deep is answered."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with safepoint.open_store(url) as store:
        Run.start(store, "ticket").wait_for_input("Which plan?")
    result = sp(folder, "answer", "ticket", "--json-value", "[" * 5000 + "]" * 5000, "--store", url)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"nests deeper than {safepoint.codec.MAX_DEPTH} dicts and lists" in result.stderr
    # brackets inside strings do not count
    value = ["[" * 300, {"a": '"' + "{" * 300}]
    nested: object = value
    for _ in range(150):
        nested = [nested]
    result = sp(folder, "answer", "ticket", "--json-value", json.dumps(nested), "--store", url)
    assert result.returncode == 0, result.stderr
    with safepoint.open_store(url) as store:
        assert Run.resume(store, "ticket").take_input() == nested


def test_budget_exceeded_is_importable_from_the_harness() -> None:
    """safepoint.harness exports BudgetExceeded, as docs/harness.md says: the class safepoint.errors has."""
    assert "BudgetExceeded" in safepoint.harness.__all__
    assert safepoint.harness.BudgetExceeded is safepoint.errors.BudgetExceeded


def test_an_unknown_url_option_is_named_never_its_value() -> None:
    """An unknown PostgreSQL URL option, or an unreadable blob URL, is InvalidURL never quoting a value."""
    secret = "sk-live-0a1b2c3d4e5f"
    for url, named in (
        (f"postgresql://app@127.0.0.1/test?pasword={secret}", "pasword"),
        (f"postgresql://app@127.0.0.1/test?schema=s&max_size={secret}&sslmode=disable", "max_size"),
        (f"postgresql://app@127.0.0.1/test?bogus%0a={secret}", "bogus\\n"),
    ):
        with pytest.raises(safepoint.errors.InvalidURL) as caught:
            safepoint.open_store(url)
        assert f"unknown option(s) in the PostgreSQL URL: {named} " in str(caught.value)
        assert secret not in str(caught.value)
    with pytest.raises(safepoint.errors.StoreError) as refused:  # a known secret option: masked
        safepoint.open_store(f"postgresql://app@127.0.0.1:1/test?oauth_client_secret={secret}")
    assert secret not in str(refused.value)
    for blobs in (f"file:///tmp/blobs?{secret}", f"s3://bucket:{secret}/prefix"):
        with pytest.raises(safepoint.errors.InvalidURL) as caught:
            safepoint.open_store("memory://", blobs=blobs)
        assert secret not in str(caught.value)
        assert caught.value.__cause__ is None


def test_fork_and_start_refuse_an_empty_run_id() -> None:
    """fork(new_run_id="") and Run.start(store, "") are InvalidArgument; only None makes a fresh id."""
    with safepoint.open_store("memory://") as store:
        Run.start(store, "origin").commit()
        with pytest.raises(safepoint.errors.InvalidArgument, match="new_run_id must be a non-empty str"):
            store.fork("origin", 1, new_run_id="")
        with pytest.raises(safepoint.errors.InvalidArgument, match="run_id must be a non-empty str"):
            Run.start(store, "")
        assert [run.run_id for run in store.runs()] == ["origin"]
        assert store.fork("origin", 1).run_id != ""


def test_import_refuses_a_device_a_fifo_and_an_oversized_file(tmp_path: Path, folder: Path) -> None:
    """import of /dev/zero, a FIFO or a file over MAX_FIXTURE_BYTES exits 2 naming the path, reads nothing."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # nobody writes it: an open without O_NONBLOCK would hang until the 60 s timeout
    big = tmp_path / "big.json"
    with big.open("wb") as file:
        file.truncate(safepoint.fixtures.MAX_FIXTURE_BYTES + 1)  # sparse: no disk, no memory
    irregular = "not a regular file (a fixture is a file safepoint export wrote)"
    for path, why in (
        ("/dev/zero", irregular),
        (str(fifo), irregular),
        (str(big), f"larger than {safepoint.fixtures.MAX_FIXTURE_BYTES} bytes, the most a fixture may hold"),
    ):
        result = sp(folder, "import", path, "--store", url)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == f"error: {path}: {why}"
    assert not (tmp_path / "a.db").exists()


def test_the_inspector_token_exchange_stays_on_site_and_its_cookie_is_per_inspector(tmp_path: Path) -> None:
    """The ?token= redirect is a same-origin path; two inspectors on one host keep their own cookies."""
    token = "s3cret-" + "z" * 20
    with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        Run.start(store, "seen").commit()
        web = TestClient(create_app(store, token=token), base_url="http://127.0.0.1:8765")
        for path in (
            "//evil.example/x",
            "/\\evil.example",
            "/%5C/evil.example",
            "///evil.example",
        ):
            web.cookies.clear()  # signed out: every try trades the token again
            traded = web.get(f"http://127.0.0.1:8765{path}?token={token}", follow_redirects=False)
            assert traded.status_code == 303, path
            location = traded.headers["location"]
            assert location.startswith("/"), location
            assert location[1:2] not in ("/", "\\"), location
            assert not any(char in location for char in "\\\t\n "), location
        # a tab, which browsers drop from a URL (the HTTP client refuses to send one)
        assert same_site("/\t/evil") == "/%09/evil"
        assert same_site("https://evil.example/") == "/https://evil.example/"  # an absolute-form target
        jar: dict[str, str] = {}  # what a browser keeps for the host: one value per cookie name, any port
        inspectors = {
            port: TestClient(
                create_app(store, port=port, token=token + str(port)), base_url=f"http://127.0.0.1:{port}"
            )
            for port in (8765, 8766)
        }
        for port, inspector in inspectors.items():
            signed = inspector.get(f"/?token={token}{port}", follow_redirects=False)
            name, _, value = signed.headers["set-cookie"].partition(";")[0].partition("=")
            jar[name] = value
        assert len(jar) == 2
        cookie = "; ".join(f"{name}={value}" for name, value in jar.items())
        for inspector in inspectors.values():
            inspector.cookies.clear()
            assert inspector.get("/", headers={"Cookie": cookie}).status_code == 200


@pytest.mark.parametrize(
    "damage",
    [
        "journal entry without its step",
        "journal entry with a step that is no number",
        "message without its fields",
        "state without its checkpoint",
        "list reference that is no pair",
        "state with a field the framework does not know",
    ],
)
def test_agent_framework_storage_reads_a_malformed_stored_checkpoint_as_corrupt(
    tmp_path: Path, damage: str
) -> None:
    """A malformed journal entry, message, list reference or field of a stored workflow: CorruptCheckpoint."""
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'af.db'}")
    message = WorkflowMessage(data={"n": 1}, source_id="s", target_id="t")
    asyncio.run(
        SafepointCheckpointStorage(store).save(
            WorkflowCheckpoint(
                workflow_name="w",
                graph_signature_hash="h",
                checkpoint_id="c1",
                timestamp="2025-01-01T00:00:00+00:00",
                messages={"s": [message]},
            )
        )
    )
    run_id = af_layout.workflow_run_id("w")
    cp = store.load(run_id).next()  # what someone editing the store by hand would save next
    packed = json.loads(json.dumps(cp.state["checkpoint"]))
    if damage == "journal entry without its step":
        cp.messages.append({"op": "save", "id": "c1", "ts": "2025-01-01T00:00:00+00:00"})
    elif damage == "journal entry with a step that is no number":
        cp.messages.append({"op": "save", "id": "c1", "step": "sk-not-quoted", "ts": "x"})
    elif damage == "message without its fields":
        packed["messages"]["s"][0]["v"] = {"sk-not-quoted": 1}
    elif damage == "list reference that is no pair":
        packed["state"] = {"$log": 5}
    elif damage == "state with a field the framework does not know":
        packed["sk-not-quoted"] = 1
    if not damage.startswith("journal"):  # the journal points the checkpoint at the damaged step
        cp.messages.append({"op": "save", "id": "c1", "step": cp.step, "ts": "2025-01-01T00:00:00+00:00"})
    cp.state = (
        {"op": "save"} if damage == "state without its checkpoint" else {"op": "save", "checkpoint": packed}
    )
    store.save(cp)
    with pytest.raises(safepoint.errors.CorruptCheckpoint) as caught:
        asyncio.run(SafepointCheckpointStorage(store).list_checkpoints(workflow_name="w"))
    assert caught.value.run_id == run_id
    assert caught.value.step == cp.step
    assert "sk-not-quoted" not in str(caught.value)
    store.close()


def test_postgres_run_and_runs_give_counters_exactly_as_load() -> None:
    """On PostgreSQL run() and runs() give -0.0, 1e16 and 1e-7 counters back exactly as load() does."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema, safepoint.open_store(f"{dsn}?schema={schema}") as store:
        counters = {"tokens_in": 3, "spend": -0.0, "big": 1e16, "tiny": 1e-7, "plain": 0.5}
        store.save(Checkpoint(run_id="exact", counters=counters))
        store.fork("exact", 0, new_run_id="forked")
        for run_id in ("exact", "forked"):
            loaded = store.load(run_id).counters
            for given in (
                store.run(run_id).counters,
                next(r for r in store.runs() if r.run_id == run_id).counters,
            ):
                assert repr(given) == repr(loaded) == repr(dict(sorted(counters.items())))
                assert math.copysign(1.0, given["spend"]) == -1.0
                assert type(given["big"]) is float
        ordinary = raw(dsn, schema, "SELECT counters FROM safepoint_runs WHERE run_id = 'exact'")[0][0]
        assert set(ordinary) == {"$exact"}  # only a float jsonb would change is wrapped
        store.save(Checkpoint(run_id="plain", counters={"b": 2, "a": 0.25}))
        assert raw(dsn, schema, "SELECT counters FROM safepoint_runs WHERE run_id = 'plain'")[0][0] == {
            "a": 0.25,
            "b": 2,
        }


def _zstd_frame(content_size: int | None, blocks: int) -> bytes:
    """A zstd frame of ``blocks`` RLE blocks of 128 KiB zeros, declaring ``content_size`` (None: no size)."""
    header = b"\x28\xb5\x2f\xfd" + (b"\x00" if content_size is None else b"\xc0") + b"\x38"  # 128 KiB window
    if content_size is not None:
        header += content_size.to_bytes(8, "little")
    block = ((128 << 10) << 3 | 1 << 1).to_bytes(3, "little") + b"\x00"  # an RLE block: 4 bytes -> 128 KiB
    last = ((128 << 10) << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"\x00"
    return header + block * (blocks - 1) + last


# Run in a child under a 2 GiB address-space limit: a reader that decompresses a bomb fails there
# (MemoryError) instead of taking the machine's memory, and the test sees it fail.
_LOAD_BOMBS = """
import resource, sqlite3, sys, safepoint
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
db = sys.argv[1]
for path in sys.argv[2:]:
    bomb = open(path, "rb").read()
    with sqlite3.connect(db) as conn:
        assert conn.execute("UPDATE safepoint_blobs SET data = ?", (bomb,)).rowcount == 1
    with safepoint.open_store("sqlite:///" + db, blobs="database", blob_compress=True) as store:
        try:
            store.load("bombed")
        except safepoint.errors.CorruptCheckpoint as caught:
            print(type(caught).__name__, caught.run_id, caught.step)
"""


def test_a_zstd_bomb_in_a_stored_blob_row_is_corrupt_before_it_is_decompressed(tmp_path: Path) -> None:
    """A blob row swapped for a zstd bomb (8 GiB of zeros in 256 KiB) loads as BlobCorrupt, memory bounded."""
    db = tmp_path / "state.db"
    with safepoint.open_store(f"sqlite:///{db}", blobs="database", blob_compress=True) as store:
        store.save(Checkpoint(run_id="bombed", state={"notes": "all work and no play " * 20_000}))
    eight_gib = 8 << 30
    bombs = (
        _zstd_frame(eight_gib, eight_gib >> 17),  # says what it holds: refused from its header
        _zstd_frame(1000, eight_gib >> 17),  # understates it: refused one slice past 1000 bytes
        _zstd_frame(None, eight_gib >> 17),  # says nothing: no frame a store writes
    )
    paths = [tmp_path / f"bomb{i}.zst" for i in range(len(bombs))]
    for path, bomb in zip(paths, bombs, strict=True):
        path.write_bytes(bomb)
    child = subprocess.run(
        [sys.executable, "-c", _LOAD_BOMBS, str(db), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["BlobCorrupt bombed 0"] * 3, child.stdout
    assert eight_gib > safepoint.blobs.base.MAX_FRAME_CONTENT
