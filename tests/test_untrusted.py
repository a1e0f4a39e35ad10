"""Untrusted data stays data: input shaped like what the store writes means nothing.

Every string in a checkpoint may come from an attacker. These tests plant
text and objects shaped like every marker and reference the store writes
(``[SECRET:…]``, ``[REDACTED:…]``, ``{"$secret": …}``, ``{"$blob": …}``, the
scrubbed-text object, escaped keys) in every field, on memory, SQLite and
PostgreSQL, and check that they come back byte for byte, that
``resolve_secrets=True`` reads no secret out for them, that forged blob
references neither break a run nor reach another run's blobs — and that the
references the store really wrote survive a load → save and still resolve.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from safepoint import Checkpoint, Secrets, codec
from safepoint.refs import REF_TYPES, BlobLink, ScrubbedText, SecretRef
from safepoint.testing.migrations import fixture_checkpoint, fixture_text, read_fixture

API_KEY = "sk-live-Zq81mXc0PfLw2RkT9vYbQ"
VAULT_ROOT = "vault-root-7Hq2LmN9xPz4KcW1"  # the resolver knows it; the store never saw it
TEXT = "text/plain; charset=utf-8"
ZERO_DIGEST = "0" * 64

MARKERS = (
    "[SECRET:API_KEY] [SECRET:API_KEY|json] [SECRET:API_KEY|base64-part] [SECRET:VAULT_ROOT|url]"
    " [REDACTED:github-token] [REDACTED:secret:API_KEY] [SECRET:"
)


def hostile() -> dict[str, Any]:
    """Values shaped like everything the store writes, and worse."""
    return {
        "markers": MARKERS,
        "secret_ref": {"$secret": "API_KEY"},
        "vault_ref": {"$secret": "VAULT_ROOT"},
        "blob_missing": {"$blob": {"sha256": ZERO_DIGEST, "size": 3, "media_type": TEXT}},
        "blob_siblings": {"$blob": {"sha256": "a" * 64}, "x": 1},
        "blob_malformed": {"$blob": "not a reference"},
        "text_form": {"$marks": [[0, 18]], "$text": "[SECRET:VAULT_ROOT] tail"},
        "text_form_bad": {"$marks": "x", "$text": 1},
        "escaped": {"$$secret": "VAULT_ROOT", "$$$x": 1, "$": 2, "$$": 3, "$text": "t"},
        "typed": {"$typed": ["bytes", "AAAA"]},
        "control": "\x1b]0;title\x07 \u202e \u200b \x00 [link=https://evil.example]x[/link]",
        "list": [{"$secret": "VAULT_ROOT"}, "[SECRET:VAULT_ROOT]", {"$bytes": "AAAA"}],
        "[SECRET:VAULT_ROOT]": "a key shaped like a marker",
        "$secret": "a $-key at the top",
    }


def secrets() -> Secrets:
    return Secrets().add("API_KEY", API_KEY)


def resolver(name: str) -> str | None:
    return {"API_KEY": API_KEY, "VAULT_ROOT": VAULT_ROOT}.get(name)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[safepoint.Store]:
    """A store with API_KEY registered, on each backend."""
    if request.param == "memory":
        url, options = "memory://", {}
    elif request.param == "sqlite":
        url, options = f"sqlite:///{tmp_path / 's.db'}", {}
    else:
        url = request.getfixturevalue("postgres_dsn")
        options = {"schema": request.getfixturevalue("pg_schema")}
    with safepoint.open_store(url, secrets=secrets(), **options) as opened:
        yield opened


def plant(cp: Checkpoint) -> None:
    """Hostile values in every field that holds JSON."""
    cp.messages.append({"role": "user", "content": MARKERS, **hostile()})
    cp.messages.append({"role": "tool", "content": [hostile(), MARKERS]})
    cp.state = hostile()
    cp.cursors = {"page": hostile()}
    cp.pending_action = {"tool": "http", "args": hostile()}


def plain_types(value: Any) -> bool:
    """True when nothing in ``value`` is one of the store's own reference types."""
    if isinstance(value, REF_TYPES):
        return False
    if isinstance(value, dict):
        return all(plain_types(v) for v in value.values())
    if isinstance(value, list):
        return all(plain_types(v) for v in value)
    return True


def fields(cp: Checkpoint) -> dict[str, Any]:
    return {
        "messages": [dict(m) for m in cp.messages],
        "state": cp.state,
        "cursors": cp.cursors,
        "pending_action": cp.pending_action,
    }


def test_reference_shaped_input_round_trips_and_resolves_to_nothing(store: safepoint.Store) -> None:
    """Marker- and reference-shaped input comes back exactly, as plain data, and
    resolve_secrets=True (a registry or a vault resolver) reads no secret out for it."""
    cp = Checkpoint(run_id="hostile")
    plant(cp)
    expected = copy.deepcopy(fields(cp))
    store.save(cp)
    for loaded in (
        store.load("hostile"),
        store.load("hostile", resolve_secrets=True),
        store.load("hostile", resolve_secrets=resolver),
        store.load("hostile", fetch_blobs=False),
    ):
        assert fields(loaded) == expected
        assert plain_types(fields(loaded))
        text = json.dumps(fields(loaded))
        assert API_KEY not in text
        assert VAULT_ROOT not in text


def test_reference_shaped_input_survives_a_load_and_save_unchanged(store: safepoint.Store) -> None:
    """A loaded hostile checkpoint saved again (next step, and rewritten messages) is still the same data."""
    cp = Checkpoint(run_id="again")
    plant(cp)
    expected = copy.deepcopy(fields(cp))
    store.save(cp)
    nxt = store.load("again").next()
    store.save(nxt)
    rewritten = store.load("again").next()
    rewritten.messages = [dict(m) for m in rewritten.messages]  # every message re-encoded
    store.save(rewritten)
    assert fields(store.load("again", resolve_secrets=resolver)) == expected
    view = store.load("again").stored_view
    assert view is not None
    assert view.ranges == ((0, 2),)  # re-encoded messages gave the stored bytes again: nothing appended


def test_real_references_survive_load_and_save_and_still_resolve(store: safepoint.Store) -> None:
    """What the store wrote comes back typed; saved again unresolved it stays a reference."""
    cp = Checkpoint(run_id="real")
    cp.messages.append({"role": "user", "content": f"my key is {API_KEY}, and [SECRET:API_KEY] is mine"})
    cp.state = {"key": API_KEY, "line": f"Bearer {API_KEY}", "forged": "[SECRET:API_KEY]"}
    store.save(cp)
    loaded = store.load("real")
    assert loaded.state["key"] == SecretRef("API_KEY")
    assert isinstance(loaded.state["line"], ScrubbedText)
    assert loaded.state["forged"] == "[SECRET:API_KEY]"
    assert type(loaded.state["forged"]) is str
    nxt = loaded.next()  # copies the state: references must stay typed
    nxt.state["more"] = 1
    store.save(nxt)
    resolved = store.load("real", resolve_secrets=True)
    assert resolved.state == {**cp.state, "more": 1}
    assert resolved.messages[0]["content"] == f"my key is {API_KEY}, and [SECRET:API_KEY] is mine"


def test_a_forged_blob_reference_cannot_read_or_keep_another_runs_blob(tmp_path: Path) -> None:
    """A $blob naming another run's digest is data: the run loads, reads nothing of
    the other run, and garbage collection still frees the other run's blob."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'b.db'}", blob_threshold=16) as store:
        victim = Checkpoint(run_id="victim", state={"doc": "confidential " * 10})
        store.save(victim)
        link = store.load("victim", fetch_blobs=False).state["doc"]
        assert isinstance(link, BlobLink)
        forged = {"$blob": {"sha256": link.digest, "size": link.size, "media_type": TEXT}}
        store.save(Checkpoint(run_id="attacker", state={"steal": forged}))
        assert store.load("attacker").state == {"steal": forged}
        store.delete_run("victim")
        result = store.collect_garbage(grace=0)
        assert link.digest in result.deleted  # nothing kept it alive: the forged reference is data
        assert store.load("attacker").state == {"steal": forged}


def test_a_loaded_blob_link_saved_again_stays_a_reference(tmp_path: Path) -> None:
    """load(fetch_blobs=False) gives BlobLinks; a save of that checkpoint keeps them as references."""
    with safepoint.open_store(
        f"sqlite:///{tmp_path / 'l.db'}", blob_threshold=16, secrets=secrets()
    ) as store:
        big = f"large output with {API_KEY} inside " * 4
        store.save(Checkpoint(run_id="r", state={"doc": big, "raw": b"\x00\x01binary"}))
        lazy = store.load("r", fetch_blobs=False).next()
        assert isinstance(lazy.state["doc"], BlobLink)
        assert lazy.state["doc"].marks  # scrubbed text kept in the blob store remembers its markers
        store.save(lazy)
        again = store.load("r", resolve_secrets=True)
        assert again.state == {"doc": big, "raw": b"\x00\x01binary"}


def test_bytes_with_a_secret_are_replaced_whole_and_stay_bytes(store: safepoint.Store) -> None:
    """A bytes value holding a secret (even after an undecodable byte) becomes a bytes
    placeholder recorded in the scrub report; clean bytes come back as they were."""
    cp = Checkpoint(run_id="bytes")
    cp.state = {
        "body": b"\xff\xfe not utf-8, then " + API_KEY.encode(),
        "utf16": f"key={API_KEY}".encode("utf-16-le"),
        "clean": b"\x00\x01\x02 clean",
    }
    cp.messages.append({"role": "tool", "content": "file", "data": b"token ghp_" + b"A1b2C3d4" * 4 + b"Zz9Y"})
    info = store.save(cp)
    loaded = store.load("bytes", resolve_secrets=True)
    assert loaded.state["body"] == b"[REDACTED:secret:API_KEY]"
    assert loaded.state["utf16"] == b"[REDACTED:secret:API_KEY]"
    assert loaded.state["clean"] == b"\x00\x01\x02 clean"
    data = loaded.messages[0]["data"]
    assert isinstance(data, bytes)
    assert data.startswith(b"[REDACTED:")
    rules = info.scrub_report.by_rule()
    assert rules["secret:API_KEY"] == 2
    assert any(rule.startswith("github") for rule in rules)


def test_bytes_with_a_secret_are_refused_under_raise(tmp_path: Path) -> None:
    """Under secret_policy="raise" a secret inside bytes refuses the save; nothing is written."""
    path = tmp_path / "r.db"
    with safepoint.open_store(f"sqlite:///{path}", secrets=secrets(), secret_policy="raise") as store:
        with pytest.raises(safepoint.SecretLeak) as caught:
            store.save(Checkpoint(run_id="r", state={"body": b"x" + API_KEY.encode()}))
        assert API_KEY not in str(caught.value)
        with pytest.raises(safepoint.NotFound):
            store.load("r")
    blobs = [p for p in Path(f"{path}.blobs").rglob("*") if p.is_file()]
    assert all(API_KEY.encode() not in p.read_bytes() for p in blobs)


def test_format_1_fixture_reference_shapes_are_data(tmp_path: Path) -> None:
    """An older fixture's {"$secret": …} and [SECRET:…] import as plain data, never resolved."""
    old = {
        "safepoint_fixture": 1,
        "checkpoint": {
            "run_id": "old",
            "step": 3,
            "schema_version": 1,
            "status": "running",
            "messages": [{"role": "user", "content": "[SECRET:VAULT_ROOT]", "k": {"$secret": "VAULT_ROOT"}}],
            "counters": {},
            "pending_action": None,
            "cursors": {},
            "state": {"ref": {"$secret": "VAULT_ROOT"}},
            "labels": {},
            "parent": None,
        },
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    with safepoint.open_store("memory://", secrets=secrets()) as store:
        store.save(fixture_checkpoint(read_fixture(path)))
        loaded = store.load("old", resolve_secrets=resolver)
        assert loaded.state == {"ref": {"$secret": "VAULT_ROOT"}}
        assert dict(loaded.messages[0]) == old["checkpoint"]["messages"][0]  # type: ignore[index]


def test_format_2_fixture_keeps_real_references(tmp_path: Path) -> None:
    """Export then import: the store's references (and bytes) survive; hostile input stays data."""
    with safepoint.open_store("memory://", secrets=secrets()) as store:
        cp = Checkpoint(run_id="src", state={"key": API_KEY, "bin": b"\x00raw", **hostile()})
        store.save(cp)
        path = tmp_path / "f.json"
        path.write_text(fixture_text(store.load("src")))
        store.save(fixture_checkpoint(read_fixture(path), run_id="copy"))
        copied = store.load("copy", resolve_secrets=True)
        assert copied.state == cp.state


def test_malformed_fixtures_are_refused_with_a_typed_error(tmp_path: Path) -> None:
    """A fixture missing a field or holding a wrong type is an InvalidArgument naming the field."""
    path = tmp_path / "bad.json"
    for checkpoint in ({"run_id": "x"}, {**_minimal(), "status": "nope"}, {**_minimal(), "state": []}):
        path.write_text(json.dumps({"safepoint_fixture": 2, "checkpoint": checkpoint}))
        with pytest.raises(safepoint.InvalidArgument):
            fixture_checkpoint(read_fixture(path))
    path.write_text(json.dumps({"safepoint_fixture": 99, "checkpoint": _minimal()}))
    with pytest.raises(safepoint.InvalidArgument):
        read_fixture(path)


def _minimal() -> dict[str, Any]:
    return {
        "run_id": "m",
        "step": 0,
        "schema_version": 1,
        "status": "running",
        "messages": [],
        "counters": {},
        "pending_action": None,
        "cursors": {},
        "state": {},
        "labels": {},
    }


def test_run_resume_resolves_no_forged_reference(tmp_path: Path) -> None:
    """Run.resume(..., resolve_secrets=resolver) gives back forged markers and references as text."""
    with safepoint.open_store(f"sqlite:///{tmp_path / 'h.db'}", secrets=secrets()) as store:
        safepoint.Run.start(store, "h", state=hostile(), messages=[{"role": "user", "content": MARKERS}])
        run = safepoint.Run.resume(store, "h", resolve_secrets=resolver)
        assert run.state == hostile()
        assert run.messages[0]["content"] == MARKERS
        assert VAULT_ROOT not in json.dumps(run.state)


def _legacy_row(path: Path) -> None:
    """Rewrite the head row of run "legacy" as a row from before format 2: no format
    key, input stored unescaped, a report naming only API_KEY (what that save replaced)."""
    conn = sqlite3.connect(path)
    (header,) = conn.execute("SELECT header FROM safepoint_checkpoints").fetchone()
    fields = codec.decode(header)
    del fields["format"]
    fields["state"] = {
        "real": {"$secret": "API_KEY"},
        "forged": {"$secret": "VAULT_ROOT"},
        "text": "real [SECRET:API_KEY|url] forged [SECRET:VAULT_ROOT]",
        "$typed": 1,
    }
    fields["scrub"] = [["secret:API_KEY", "state.real", 1], ["secret:API_KEY", "state.text", 1]]
    new = codec.encode(fields)
    conn.execute("UPDATE safepoint_checkpoints SET header = ?, digest = ?", (new, codec.digest(new)))
    conn.commit()
    conn.close()


def test_legacy_rows_resolve_only_what_their_report_recorded(tmp_path: Path) -> None:
    """A row written before format 2 resolves the secret names its own report names and
    no other; its next save writes format 2, where the forged shapes are data."""
    path = tmp_path / "legacy.db"
    with safepoint.open_store(f"sqlite:///{path}", secrets=secrets()) as store:
        store.save(Checkpoint(run_id="legacy"))
    _legacy_row(path)
    with safepoint.open_store(f"sqlite:///{path}", secrets=secrets()) as store:
        loaded = store.load("legacy", resolve_secrets=resolver)
        assert loaded.state == {
            "real": API_KEY,
            "forged": {"$secret": "VAULT_ROOT"},
            "text": "real sk-live-Zq81mXc0PfLw2RkT9vYbQ forged [SECRET:VAULT_ROOT]",
            "$typed": 1,
        }
        store.save(store.load("legacy").next())
        again = store.load("legacy", resolve_secrets=resolver)
        assert again.state == loaded.state
