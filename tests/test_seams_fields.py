"""Every value field flows through every path from the one field table (model.VALUE_TYPES), and the
add-a-field recipe in docs/architecture.md is true: the field list is read when the tests are collected,
so a field added by the recipe (tests/seams/notes_field.patch) is tested here without a line changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import safepoint
from conftest_postgres import fresh_schema, require_postgres
from safepoint import (
    Checkpoint,
    CorruptCheckpoint,
    Keyring,
    MigrationChain,
    NotFound,
    NotJSONCompatible,
    Secrets,
    Store,
    codec,
)
from safepoint.fixtures import fixture_checkpoint, fixture_text, unwrap_fixture
from safepoint.model import VALUE_FIELDS, VALUE_TYPES
from safepoint.refs import BlobLink, SecretRef
from safepoint.store.admin import migrate_store
from safepoint.store.stored import StoredFields, decode_checkpoint, header_bytes

ROOT = Path(__file__).resolve().parent.parent
PATCH = Path(__file__).resolve().parent / "seams" / "notes_field.patch"
SECRET = "sk-live-Zq81mXc0PfLw2RkT9vYb"  # registered as API_KEY; shaped like no scrubber rule's token
BIG = "0123456789abcdef" * 4_400  # 70,400 bytes: over the default blob threshold (64 KiB)
INDEX_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
DATA_KEY = "ERERERERERERERERERERERERERERERERERERERERERE="


def value() -> dict[str, Any]:
    """What every value field holds here: `$` keys (one input `$`, and two), a registered
    secret, a string over the blob threshold, and bytes (offloaded whatever their size)."""
    return {"$key": "one", "$$key": "two", "token": SECRET, "big": BIG, "raw": b"\x00bytes", "n": [1]}


def secrets() -> Secrets:
    return Secrets().add("API_KEY", SECRET)


def keyring() -> Keyring:
    return Keyring.from_text(f"index:{INDEX_KEY} k1:{DATA_KEY}")


Opener = Callable[..., Store]


@pytest.fixture(params=["memory", "sqlite", "sqlite-encrypted", "postgresql", "postgresql-encrypted"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens one store of the backend (the same one each call but for memory), with the secret registered."""
    kind: str = request.param
    extra: dict[str, Any] = {"encryption": keyring()} if kind.endswith("-encrypted") else {}
    if kind == "memory":
        yield lambda **options: safepoint.open_store("memory://", secrets=secrets(), **options)
    elif kind.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'store' / 'state.db'}"
        yield lambda **options: safepoint.open_store(url, secrets=secrets(), **extra, **options)
    else:
        dsn = require_postgres()
        with fresh_schema(dsn) as schema:
            yield lambda **options: safepoint.open_store(
                dsn, schema=schema, max_size=2, secrets=secrets(), **extra, **options
            )


def check_typed(got: Any) -> None:
    """A value field as the store's references are read back: `$` keys as given, the secret a reference."""
    assert set(got) == set(value())  # no `$$key` for `$key`, no `$$$key` for `$$key`
    assert (got["$key"], got["$$key"], got["n"]) == ("one", "two", [1])
    assert type(got["token"]) is SecretRef
    assert got["token"].name == "API_KEY"


def check_loaded(got: Any) -> None:
    """A loaded value field: typed as above, and its large values back in place."""
    check_typed(got)
    assert type(got["big"]) is str
    assert got["big"] == BIG
    assert got["raw"] == b"\x00bytes"


@pytest.mark.parametrize("name", VALUE_FIELDS)
def test_a_value_field_round_trips_on_every_backend(name: str, opener: Opener, tmp_path: Path) -> None:
    """A value field holding `$` keys, a secret and large values saves scrubbed and offloaded and
    loads back equal — secret resolvable, blobs inlined, `$` keys single — also after a fork and a save."""
    with opener() as store:
        store.save(Checkpoint(run_id="r", **{name: value()}))
        check_loaded(getattr(store.load("r"), name))
        linked = getattr(store.load("r", fetch_blobs=False), name)
        assert isinstance(linked["big"], BlobLink)
        assert isinstance(linked["raw"], BlobLink)
        assert getattr(store.load("r", resolve_secrets=True), name) == value()
        # fork returns the copy it stored (typed, blobs left as links, for any field); a load inlines them.
        check_typed(getattr(store.fork("r", new_run_id="f"), name))
        check_loaded(getattr(store.load("f"), name))
        resumed = store.load("r").next()  # what was loaded saves again as it came back
        store.save(resumed)
        assert getattr(store.load("r", 1, resolve_secrets=True), name) == value()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET.encode() not in on_disk


@pytest.mark.parametrize("name", VALUE_FIELDS)
def test_a_value_field_migrates_on_load_and_eagerly(name: str, tmp_path: Path) -> None:
    """Through the migration chain (on load, and rewritten in place by migrate_store) a value
    field is handed to the migration, kept, and comes back typed, inlined and resolvable."""
    seen: list[Any] = []

    def lift(cp: dict[str, Any]) -> dict[str, Any]:
        seen.append(cp[name])
        return cp

    url = f"sqlite:///{tmp_path / 'state.db'}"
    with safepoint.open_store(url, secrets=secrets()) as store:
        store.save(Checkpoint(run_id="r", **{name: value()}))
    with safepoint.open_store(url, secrets=secrets(), migrations=MigrationChain(2, {1: lift})) as store:
        check_loaded(getattr(store.load("r"), name))
        assert seen
        assert set(seen[0]) == set(value())
        migrate_store(store)
        head = store.load("r", migrate=False)
        assert head.schema_version == 2
        check_loaded(getattr(head, name))
        assert getattr(store.load("r", resolve_secrets=True), name) == value()


@pytest.mark.parametrize("name", VALUE_FIELDS)
def test_a_value_field_survives_export_and_import(name: str) -> None:
    """A fixture carries a value field's references and `$` keys explicitly; importing it gives them back."""
    with safepoint.open_store("memory://", secrets=secrets()) as store:
        store.save(Checkpoint(run_id="r", **{name: value()}))
        text = fixture_text(store.load("r"))
        assert SECRET not in text
        store.save(fixture_checkpoint(unwrap_fixture(json.loads(text), "text"), run_id="copy"))
        check_loaded(getattr(store.load("copy"), name))
        assert getattr(store.load("copy", resolve_secrets=True), name) == value()


@pytest.mark.parametrize("name", VALUE_FIELDS)
def test_data_written_before_a_value_field_existed_gets_its_default(name: str) -> None:
    """A stored header or a fixture without a value field (written before it was added) gives the
    field its default; a header holding it with a type no save writes is corrupt."""
    cp = Checkpoint(run_id="r", **{name: {"a": 1}})
    fields = StoredFields.of(cp)
    header = codec.decode(header_bytes(cp, fields, created_at=0, count=0, chain=codec.EMPTY_CHAIN))

    def decoded(header: dict[str, Any]) -> Checkpoint:
        data = codec.encode(header)
        row = {"run_id": "r", "step": 0, "ranges_json": "[]", "bodies": []}
        return decode_checkpoint(header=data, stored_digest=codec.digest(data), **row)[0]

    assert getattr(decoded(header), name) == {"a": 1}
    older = {key: value for key, value in header.items() if key != name}
    assert getattr(decoded(older), name) == getattr(Checkpoint(), name)
    with pytest.raises(CorruptCheckpoint, match="not what a save writes"):
        decoded({**header, name: [1]})
    exported = cp.to_dict()
    del exported[name]
    assert getattr(fixture_checkpoint(exported), name) == getattr(Checkpoint(), name)


@pytest.mark.parametrize("name", VALUE_FIELDS)
def test_a_value_field_is_validated_from_its_types(name: str) -> None:
    """A value field of a type its row does not accept, or holding a non-JSON value, is refused naming it."""
    with safepoint.open_store("memory://") as store:
        with pytest.raises(NotJSONCompatible, match=rf"^{name}: list is not a dict"):
            store.save(Checkpoint(run_id="r", **{name: []}))
        with pytest.raises(NotJSONCompatible, match=rf"^{name}\.s\[0\]: set"):
            store.save(Checkpoint(run_id="r", **{name: {"s": [{1}]}}))
        with pytest.raises(NotFound):
            store.load("r")


def recipe() -> list[str]:
    """The files the add-a-field recipe in docs/architecture.md names, in its numbered steps."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### Recipe: add a checkpoint field\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, re.MULTILINE)


def test_the_recipe_names_four_files_and_the_patch_edits_exactly_them() -> None:
    """The recipe names four files (the model and three pages); the scratch patch edits exactly those."""
    files = recipe()
    assert files == ["src/safepoint/model.py", "README.md", "docs/migrations.md", "docs/secrets.md"]
    patched = re.findall(r"^diff --git a/(\S+) b/", PATCH.read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(patched) == sorted(files)


@pytest.mark.parametrize("name", VALUE_FIELDS)
@pytest.mark.parametrize("page", [page for page in recipe() if not page.startswith("src/")])
def test_every_value_field_is_named_on_each_page_of_the_recipe(name: str, page: str) -> None:
    """Each page the recipe names lists every value field (the recipe's steps 2-4 were not skipped)."""
    assert f"`{name}`" in (ROOT / page).read_text(encoding="utf-8")


# Run in a fresh interpreter on the patched copy: a field the recipe added, end to end.
ROUND_TRIP = textwrap.dedent(
    """
    import sys, safepoint
    from safepoint import Checkpoint, Secrets
    from safepoint.model import VALUE_FIELDS
    from safepoint.refs import BlobLink, SecretRef

    assert VALUE_FIELDS[-1] == "notes", VALUE_FIELDS
    secret, big = "sk-live-Zq81mXc0PfLw2RkT9vYb", "x" * 70_000
    notes = {"$key": 1, "token": secret, "big": big}
    for url in ("memory://", "sqlite:///" + sys.argv[1]):
        with safepoint.open_store(url, secrets=Secrets().add("API_KEY", secret)) as store:
            store.save(Checkpoint(run_id="r", notes=notes))
            got = store.load("r").notes
            assert set(got) == {"$key", "token", "big"}, sorted(got)
            assert type(got["token"]) is SecretRef and got["big"] == big, url
            assert isinstance(store.load("r", fetch_blobs=False).notes["big"], BlobLink), url
            assert store.load("r", resolve_secrets=True).notes == notes, url
            assert Checkpoint.from_dict(store.load("r").to_dict()).notes == got, url
    print("notes round-tripped")
    """
)


def git_apply(folder: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``git apply`` of the scratch patch in ``folder`` as patch(1) would: outside any repository."""
    return subprocess.run(
        ["git", "apply", *flags, str(PATCH)],
        cwd=folder,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_field_added_by_the_recipe_round_trips(tmp_path: Path) -> None:
    """The recipe applied to a copy of the package (the scratch patch: a `notes` field) gives a field
    that loads back with single `$` keys, a resolvable secret and its large value inlined."""
    shutil.copytree(
        ROOT / "src" / "safepoint",
        tmp_path / "src" / "safepoint",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for page in recipe()[1:]:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    # A tree the patch was applied to for a scratch run already holds the field: its copy is tested as is.
    if git_apply(tmp_path, "--reverse", "--check").returncode != 0:
        applied = git_apply(tmp_path)
        assert applied.returncode == 0, f"tests/seams/notes_field.patch no longer applies: {applied.stderr}"
    for page in recipe()[1:]:
        assert "`notes`" in (tmp_path / page).read_text(encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    done = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, str(tmp_path / "state.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "notes round-tripped"


def test_the_table_is_what_the_checkpoint_has() -> None:
    """VALUE_TYPES names dataclass fields whose defaults it accepts, in the dataclass's order."""
    defaults = Checkpoint()
    for name, kinds in VALUE_TYPES.items():
        assert isinstance(getattr(defaults, name), kinds)
    order = [f for f in Checkpoint.__dataclass_fields__ if f in VALUE_TYPES]
    assert order == list(VALUE_FIELDS)
