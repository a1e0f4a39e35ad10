"""Exported fixtures sealed on request: ``safepoint export --encrypt`` and ``safepoint import``, and
``write_fixture``/``read_fixture`` with ``encryption=``, tried as an operator moving a production run
to a laptop would: the file holds nothing readable, opens only with the key, and a damaged one is
refused with nothing imported."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Keyring
from safepoint.errors import InvalidArgument, MissingKey
from safepoint.fixtures import read_fixture, write_fixture
from safepoint_exe import sp
from test_encryption import keyring
from test_encryption_cli import key_file

CANARY = "canary-7f3a"  # in every field a fixture carries


def production_run(url: str, ring: Keyring) -> Checkpoint:
    store = safepoint.open_store(url, encryption=ring)
    cp = Checkpoint(run_id="prod-1", labels={"customer": CANARY})
    cp.messages.append({"role": "user", "content": f"my account is {CANARY}"})
    cp.state = {"note": CANARY}
    cp.cursors = {"page": CANARY}
    cp.pending_action = {"tool": "refund", "args": {"who": CANARY}}
    store.save(cp)
    cp = cp.next()
    cp.messages.append({"role": "assistant", "content": f"looking up {CANARY}"})
    store.save(cp)
    store.close()
    return cp


def exported_sealed(folder: Path, store_url: str, keys: Path, fixture: Path, run_id: str = "prod-1") -> None:
    """``safepoint export RUN --encrypt`` as an operator types it; it must succeed."""
    args = ("export", run_id, "--store", store_url, "--key-file", str(keys), "--encrypt", "-o", str(fixture))
    done = sp(folder, *args)
    assert done.returncode == 0, done.stderr


def run_ids(url: str, ring: Keyring | None = None) -> list[str]:
    options = {} if ring is None else {"encryption": ring}
    with safepoint.open_store(url, read_only=True, **options) as store:  # type: ignore[arg-type]
        return sorted(info.run_id for info in store.runs())


def test_export_encrypt_then_import_with_and_without_the_key(tmp_path: Path) -> None:
    prod, laptop = f"sqlite:///{tmp_path}/prod.db", f"sqlite:///{tmp_path}/laptop.db"
    saved = production_run(prod, keyring())
    keys = key_file(tmp_path, "keys.txt", "k1")
    fixture = tmp_path / "prod-1.sealed.json"
    exported_sealed(tmp_path, prod, keys, fixture)
    raw = fixture.read_bytes()
    assert CANARY.encode() not in raw
    assert base64.b64encode(CANARY.encode())[:8] not in raw
    document = json.loads(raw)
    assert sorted(document) == ["data_key", "data_key_id", "holds", "kek_id", "safepoint_sealed", "sealed"]
    assert document["kek_id"] == "k1"

    refused = sp(tmp_path, "import", str(fixture), "--store", laptop)
    assert refused.returncode == 2
    assert "'k1'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "laptop.db").exists() or run_ids(laptop) == []

    imported = sp(tmp_path, "import", str(fixture), "--store", laptop, "--key-file", str(keys))
    assert imported.returncode == 0, imported.stderr
    with safepoint.open_store(laptop, encryption=keyring(), read_only=True) as store:
        loaded = store.load("prod-1")
    assert loaded.messages == saved.messages
    assert loaded.state == saved.state
    assert loaded.pending_action == saved.pending_action
    assert loaded.labels["customer"] == CANARY


def test_a_sealed_fixture_imports_into_a_plaintext_store(tmp_path: Path) -> None:
    """The keyring opens the file; a plaintext store with runs takes the run as plain as its others."""
    prod, local = f"sqlite:///{tmp_path}/prod.db", f"sqlite:///{tmp_path}/local.db"
    production_run(prod, keyring())
    with safepoint.open_store(local) as store:
        store.save(Checkpoint(run_id="mine"))
    keys = key_file(tmp_path, "keys.txt", "k1")
    fixture = tmp_path / "f.json"
    exported_sealed(tmp_path, prod, keys, fixture)
    imported = sp(
        tmp_path, "import", str(fixture), "--store", local, "--key-file", str(keys), "--run-id", "copy"
    )
    assert imported.returncode == 0, imported.stderr
    assert run_ids(local) == ["copy", "mine"]


def test_a_plaintext_store_exports_sealed_and_encrypt_needs_a_key(tmp_path: Path) -> None:
    local = f"sqlite:///{tmp_path}/local.db"
    with safepoint.open_store(local) as store:
        store.save(Checkpoint(run_id="r", messages=[{"role": "user", "content": CANARY}]))
    keys = key_file(tmp_path, "keys.txt", "k1")
    fixture = tmp_path / "f.json"
    exported_sealed(tmp_path, local, keys, fixture, run_id="r")
    assert CANARY.encode() not in fixture.read_bytes()
    assert read_fixture(fixture, encryption=keyring())["messages"][0]["content"] == CANARY
    keyless = sp(tmp_path, "export", "r", "--store", local, "--encrypt")
    assert keyless.returncode == 2
    assert "--key-file" in keyless.stderr
    assert "Traceback" not in keyless.stderr


@pytest.mark.parametrize("damage", ["sealed", "data_key", "holds", "kek_id", "truncate"])
def test_a_damaged_sealed_fixture_is_refused_and_nothing_is_imported(tmp_path: Path, damage: str) -> None:
    local = f"sqlite:///{tmp_path}/local.db"
    with safepoint.open_store(local) as store:
        store.save(Checkpoint(run_id="mine"))
    fixture = write_fixture(
        Checkpoint(run_id="x", messages=[{"c": CANARY}]), tmp_path / "f.json", encryption=keyring()
    )
    document = json.loads(fixture.read_text())
    if damage in ("sealed", "data_key"):
        value = bytearray(base64.b64decode(document[damage]))
        value[-1] ^= 1
        document[damage] = base64.b64encode(bytes(value)).decode()
    elif damage == "holds":
        document["holds"] = "store"
    elif damage == "kek_id":
        document["kek_id"] = "k2"
    if damage == "truncate":
        fixture.write_text(fixture.read_text()[:-40])
    else:
        fixture.write_text(json.dumps(document))
    keys = key_file(tmp_path, "keys.txt", "k1", "k2")
    refused = sp(tmp_path, "import", str(fixture), "--store", local, "--key-file", str(keys))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert CANARY not in refused.stderr
    assert run_ids(local) == ["mine"]


def test_read_fixture_needs_the_key_that_sealed_it(tmp_path: Path) -> None:
    cp = Checkpoint(run_id="r", messages=[{"role": "user", "content": CANARY}])
    folder = tmp_path
    path = write_fixture(cp, folder / "f.json", encryption=keyring("k1"))
    with pytest.raises(MissingKey, match="'k1'"):
        read_fixture(path)
    with pytest.raises(MissingKey, match="'k1'"):
        read_fixture(path, encryption=keyring("k2"))
    rotated = read_fixture(path, encryption=keyring("k1", "k2"))  # a later keyring still holding k1
    assert rotated["messages"][0]["content"] == CANARY
    sealed_again = write_fixture(cp, folder / "g.json", encryption=keyring("k1", "k2"))
    assert json.loads(sealed_again.read_text())["kek_id"] == "k2"  # the writing key: the last one
    with pytest.raises(InvalidArgument):
        read_fixture(sealed_again, encryption=Keyring({"k2": b"\x33" * 32}, index_key=bytes(32)))
