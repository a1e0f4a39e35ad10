"""Tenants on SQLite (issue 38): a file per tenant, probed across tenants through the API.

Two tenants, ``a`` and ``b``, in one store URL, each with runs — one run id in both with
different content, hostile ids, a large value offloaded to a blob, a queued run. Then, as
``a``: list, load, history, fork, delete, enqueue, requeue, cancel and revoke ``b``'s run
ids, claim, gc, verify, redact, back up, fetch a blob by ``b``'s digest, import a fixture
naming it, save a run id ``b`` holds. Nothing succeeds against ``b``, and nothing tells:
each probe of one of ``b``'s ids answers exactly as it does for an id no tenant ever held.
``b``'s files are byte-identical afterwards. Also: the implicit tenant is today's store, the
names a tenant may have, and a named tenant's namespace in a shared blob store
(filesystem, memory, S3) — with a blob store that has none refused.

``seed`` and the snapshots are shared with ``test_tenants_cli.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import safepoint
from blob_server import CREDENTIALS, REGION, start_s3_server
from safepoint import Checkpoint, Redaction, Store
from safepoint.blobs import FileSystemBlobStore, MemoryBlobStore, S3BlobStore
from safepoint.blobs.base import BlobInfo
from safepoint.errors import InvalidArgument, InvalidURL, SafepointError, StoreNotFound
from safepoint.fixtures import read_fixture_run, write_fixture
from safepoint.store.admin import backup_store, verify_store
from safepoint.store.tenants import tenant_path
from safepoint.visible import visible

# Run ids only tenant b holds: hostile text a probe must neither run nor reveal.
HOSTILE = [
    "b-\x1b[31mred\x07 \u202eevil",
    "<script>window.__pwned=4</script>/../?#x",
    "' OR tenant IS NOT NULL --",
    "../../default",
]
B_ONLY = ["b-only", "b-queued", "b-big", *HOSTILE]
SHARED = "shared-run"  # held by both tenants, with different content
B_SECRET = "bravo-secret-value-0042"  # a value only b's runs hold
BIG_B = "bravo big value " * 8_000  # offloaded to a blob (over the default threshold)
MEDIA = "text/plain; charset=utf-8"


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Seeded:
    url: str
    path: Path  # the store's file (the implicit tenant's)
    b_digest: str  # the blob of b's large value


def seed(path: Path) -> Seeded:
    """The implicit tenant with one run; tenant a with its runs; tenant b with its runs."""
    url = url_of(path)
    with safepoint.open_store(url) as default:
        default.save(Checkpoint(run_id="default-run", state={"who": "default"}))
    with safepoint.open_store(url, tenant="a") as a:
        a.save(
            Checkpoint(
                run_id=SHARED, state={"who": "alpha"}, messages=[{"role": "user", "content": "alpha asks"}]
            )
        )
        a.save(Checkpoint(run_id="a-only"))
        a.save(Checkpoint(run_id="a-queued"))
        a.enqueue("a-queued")
    with safepoint.open_store(url, tenant="b") as b:
        cp = Checkpoint(run_id=SHARED, state={"who": "bravo", "secret": B_SECRET})
        cp.messages.append({"role": "user", "content": f"bravo asks about {B_SECRET}"})
        b.save(cp)
        b.save(cp.next())
        for run_id in HOSTILE:
            b.save(Checkpoint(run_id=run_id, labels={"team": run_id}, state={"note": run_id}))
        b.save(Checkpoint(run_id="b-only", state={"secret": B_SECRET}))
        b.save(Checkpoint(run_id="b-big", state={"v": BIG_B}))
        b.save(Checkpoint(run_id="b-queued"))
        b.enqueue("b-queued")
        b.fork(SHARED, 0, new_run_id="b-fork")
    digest = hashlib.sha256(BIG_B.encode()).hexdigest()
    assert (Path(tenant_path(str(path), "b") + ".blobs") / digest[:2] / digest[2:4] / digest).is_file()
    return Seeded(url, path, digest)


def files_of(path: Path, tenant: str) -> dict[str, bytes]:
    """Every file of ``tenant`` (its database file and its blob folder), by path: their bytes."""
    base = Path(tenant_path(str(path), tenant))
    found = {str(p): p.read_bytes() for p in base.parent.glob(base.name + "*") if p.is_file()}
    blobs = Path(str(base) + ".blobs")
    if blobs.is_dir():
        found |= {str(p): p.read_bytes() for p in blobs.rglob("*") if p.is_file()}
    return found


def view_of(url: str, tenant: str) -> dict[str, Any]:
    """What ``tenant`` sees: every run's row and every checkpoint of it, loaded."""
    with safepoint.open_store(url, tenant=tenant, read_only=True) as store:
        seen: dict[str, Any] = {}
        for info in store.runs(limit=1000):
            steps = [h.step for h in store.history(info.run_id)]
            loaded = [store.load(info.run_id, step) for step in steps]
            seen[info.run_id] = (info, [_fields(cp) for cp in loaded])
        return seen


def _fields(cp: Checkpoint) -> dict[str, Any]:
    """A checkpoint's fields, to compare by value (a ``Checkpoint`` compares by identity)."""
    return {name: getattr(cp, name) for name in cp.__dataclass_fields__}


@pytest.fixture
def seeded(tmp_path: Path) -> Seeded:
    return seed(tmp_path / "state.db")


@pytest.fixture
def tenant_a(seeded: Seeded) -> Iterator[Store]:
    with safepoint.open_store(seeded.url, tenant="a") as store:
        yield store


def outcome(call: Callable[[], Any], *secrets: str) -> tuple[str, ...]:
    """What a probe answered, with the probed id (or digest) taken out of it: ``("ok", repr)``
    or ``("error", class, message)``; anything but a safepoint error fails the test."""

    def masked(text: str) -> str:
        for secret in secrets:
            for form in (repr(secret), visible(repr(secret)), visible(secret, max_len=500), secret):
                text = text.replace(form, "<probed>")
        return text

    try:
        result = call()
    except SafepointError as exc:
        return ("error", type(exc).__name__, masked(str(exc)))
    return ("ok", masked(repr(result)))


# Every store call that names a run: as tenant a, on b's run ids and on ids no tenant holds.
PROBES: dict[str, Callable[[Store, str], Any]] = {
    "load": lambda s, r: s.load(r),
    "load step 0": lambda s, r: s.load(r, 0),
    "run": lambda s, r: s.run(r),
    "history": lambda s, r: s.history(r),
    "forks": lambda s, r: s.forks(r),
    "timeline": lambda s, r: s.timeline(r),
    "fork": lambda s, r: s.fork(r, new_run_id="a-forked"),
    "fork step 0": lambda s, r: s.fork(r, 0, new_run_id="a-forked-0"),
    "delete_run": lambda s, r: s.delete_run(r),
    "enqueue": lambda s, r: s.enqueue(r),
    "requeue": lambda s, r: s.requeue(r),
    "cancel": lambda s, r: s.cancel(r),
    "queue_state": lambda s, r: s.queue_state(r),
    "revoke_lease": lambda s, r: s.revoke_lease(r),
    "hidden_steps": lambda s, r: s.hidden_steps(r),
    "status_origin": lambda s, r: s.status_origin(r),
    "redactions": lambda s, r: s.redactions(r),
    "export_calls": lambda s, r: s.export_calls(r),
    "prune_run": lambda s, r: s.prune_run(r),
    "set_retention": lambda s, r: s.set_retention(r, None),
    "verify run": verify_store,
    "redact run": lambda s, r: _redacted(s.redact(Redaction(values=[B_SECRET]), run_ids=[r])),
}


def _redacted(done: Any) -> tuple[Any, ...]:
    """A redaction's outcome without its id (which names the request, not what it found)."""
    return (done.runs_scanned, done.runs, done.forks, done.failed, done.blobs_deleted, done.counts)


def test_a_sees_only_its_runs_and_its_own_content_under_a_shared_id(seeded: Seeded, tenant_a: Store) -> None:
    assert tenant_a.tenant == "a"
    assert tenant_a.url == seeded.url  # the URL given: with store.tenant it opens this handle again
    assert {run.run_id for run in tenant_a.runs(limit=100)} == {SHARED, "a-only", "a-queued"}
    assert tenant_a.load(SHARED).state == {"who": "alpha"}
    assert [h.step for h in tenant_a.history(SHARED)] == [0]
    assert sum(tenant_a.run_counts().by_status.values()) == 3
    assert tenant_a.queue_depth() == 1
    assert tenant_a.forks(SHARED) == []  # b forked its own shared-run, not a's


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_probing_b_run_ids_as_a_succeeds_never_and_tells_nothing(seeded: Seeded, probe: str) -> None:
    view = view_of(seeded.url, "b")  # first: a read-only open may make b's -wal and -shm files
    before = files_of(seeded.path, "b"), files_of(seeded.path, "default")
    call = PROBES[probe]
    for n, run_id in enumerate(B_ONLY):
        never = f"never-{n}-" + run_id[::-1]  # an id no tenant ever held, of the same kind
        with safepoint.open_store(seeded.url, tenant="a") as a:
            got = outcome(partial(call, a, run_id), run_id)
        with safepoint.open_store(seeded.url, tenant="a") as a:
            expected = outcome(partial(call, a, never), never)
        assert got == expected, (probe, run_id)
        # a NotFound names only the id the caller gave
        if got[0] == "error":
            assert got[1] in ("NotFound", "InvalidArgument"), got
    assert (files_of(seeded.path, "b"), files_of(seeded.path, "default")) == before
    assert view_of(seeded.url, "b") == view


def test_claims_gc_verify_redact_and_backup_as_a_touch_nothing_of_b(
    seeded: Seeded, tenant_a: Store, tmp_path: Path
) -> None:
    view = view_of(seeded.url, "b")  # first: a read-only open may make b's -wal and -shm files
    before = files_of(seeded.path, "b"), files_of(seeded.path, "default")
    claimed = []
    while (lease := tenant_a.claim("worker-a", lease=60)) is not None:
        claimed.append(lease.run_id)
        tenant_a.release(lease, requeue=False)
    assert claimed == ["a-queued"]  # never b-queued
    gc = tenant_a.collect_garbage(grace=0)
    assert seeded.b_digest not in gc.deleted
    report = verify_store(tenant_a)
    assert report.ok
    assert report.runs == 3
    done = tenant_a.redact(Redaction(values=[B_SECRET]))
    assert (done.runs_scanned, done.runs, done.forks) == (3, [], [])
    copy = backup_store(tenant_a, tmp_path / "copy.db")
    assert copy.complete
    with safepoint.open_store(url_of(tmp_path / "copy.db"), read_only=True) as restored:
        assert {run.run_id for run in restored.runs(limit=100)} == {SHARED, "a-only", "a-queued"}
    assert (files_of(seeded.path, "b"), files_of(seeded.path, "default")) == before
    assert view_of(seeded.url, "b") == view
    with safepoint.open_store(seeded.url, tenant="b") as b:  # b's queue as it was
        assert b.claim("worker-b", lease=60).run_id == "b-queued"  # type: ignore[union-attr]


def test_a_blob_by_b_digest_is_missing_exactly_as_one_never_stored(seeded: Seeded, tenant_a: Store) -> None:
    never = hashlib.sha256(b"never stored by anyone").hexdigest()

    def fetch(digest: str) -> Callable[[], Any]:
        return lambda: tenant_a.fetch_blob(
            {"$blob": {"sha256": digest, "size": len(BIG_B), "media_type": MEDIA}}
        )

    got = outcome(fetch(seeded.b_digest), seeded.b_digest)
    assert got[:2] == ("error", "BlobNotFound")
    assert got == outcome(fetch(never), never)


def test_importing_a_fixture_naming_b_blob_gives_a_nothing_of_b(seeded: Seeded, tmp_path: Path) -> None:
    with safepoint.open_store(seeded.url, tenant="b", read_only=True) as b:
        exported = b.load("b-big", fetch_blobs=False)  # as `safepoint export` gives it to b's people
    before = files_of(seeded.path, "b")
    never = hashlib.sha256(b"never stored by anyone").hexdigest()
    naming_b = tmp_path / "naming-b.json"
    write_fixture(exported, naming_b)
    naming_never = tmp_path / "naming-never.json"
    naming_never.write_text(naming_b.read_text().replace(seeded.b_digest, never))
    outcomes = []
    for fixture, digest, run_id in ((naming_b, seeded.b_digest, "imp-b"), (naming_never, never, "imp-n")):
        cp, _calls = read_fixture_run(fixture, run_id)
        with safepoint.open_store(seeded.url, tenant="a") as a:
            saved = a.save(cp)
            assert (saved.run_id, saved.step) == (run_id, 0)  # a's own new run
            outcomes.append(outcome(lambda a=a, run_id=run_id: a.load(run_id), digest, run_id))
            with pytest.raises(SafepointError):  # the blob is a's to have, and a has none
                a.fetch_blob(a.load(run_id, fetch_blobs=False).state["v"])
    assert outcomes[0][:2] == ("error", "BlobNotFound")
    assert outcomes[0] == outcomes[1]
    assert files_of(seeded.path, "b") == before


def test_saving_a_run_id_b_holds_makes_a_new_run_of_a(seeded: Seeded, tenant_a: Store) -> None:
    view = view_of(seeded.url, "b")
    for run_id in ("b-only", HOSTILE[0]):
        info = tenant_a.save(Checkpoint(run_id=run_id, state={"who": "alpha"}))
        assert info.step == 0
        assert tenant_a.load(run_id).state == {"who": "alpha"}
        nxt = tenant_a.load(run_id).next()
        assert tenant_a.save(nxt).step == 1
    assert view_of(seeded.url, "b") == view
    with safepoint.open_store(seeded.url, tenant="b", read_only=True) as b:
        assert b.load("b-only").state == {"secret": B_SECRET}


def test_tenant_option_on_async_and_memory_stores(seeded: Seeded) -> None:
    async def main() -> set[str]:
        async with await safepoint.open_async_store(seeded.url, tenant="a") as a:
            assert a.tenant == "a"
            page = await a.runs(limit=100)
            return {run.run_id for run in page}

    assert asyncio.run(main()) == {SHARED, "a-only", "a-queued"}
    with safepoint.open_store("memory://", tenant="acme") as memory:
        assert memory.tenant == "acme"
        memory.save(Checkpoint(run_id="m"))
        assert [run.run_id for run in memory.runs()] == ["m"]


def test_the_implicit_tenant_is_the_store_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = url_of(path)
    with safepoint.open_store(url) as made:  # a store as every store before tenants was made
        made.save(Checkpoint(run_id="r", state={"v": BIG_B}))
    files = files_of(path, "default")
    for options in ({}, {"tenant": None}, {"tenant": "default"}):
        with safepoint.open_store(url, read_only=True, **options) as store:
            assert store.tenant == "default"
            assert store.url == url
            assert repr(store) == f"<safepoint.Store {url}>"
            assert store.load("r").state == {"v": BIG_B}
        with safepoint.open_store(url, **options) as store:
            assert [run.run_id for run in store.runs()] == ["r"]
    assert files_of(path, "default").keys() == files.keys()  # the same file and blob folder
    assert not Path(str(path) + ".tenants").exists()  # no tenant was opened
    with safepoint.open_store(url, tenant="acme") as acme:
        assert repr(acme) == f"<safepoint.Store {url} tenant=acme>"
        assert list(acme.runs()) == []


def test_a_tenant_without_a_file_is_not_found_read_only_and_made_read_write(tmp_path: Path) -> None:
    url = url_of(tmp_path / "state.db")
    with pytest.raises(StoreNotFound):
        safepoint.open_store(url, tenant="newcomer", read_only=True)
    assert not (tmp_path / "state.db.tenants").exists()  # a read-only open made nothing
    with safepoint.open_store(url, tenant="newcomer") as store:
        store.save(Checkpoint(run_id="first"))
    assert (tmp_path / "state.db.tenants" / "newcomer.db").is_file()
    assert not (tmp_path / "state.db").exists()  # the implicit tenant's file is not made for it
    with safepoint.open_store(url, tenant="newcomer", read_only=True) as store:
        assert store.run("first").head_step == 0


BAD_NAMES: list[object] = [
    "Acme",
    "..",
    "a/b",
    "",
    "a" * 64,
    "-lead",
    "a b",
    "t\u00e9",
    "a.b",
    "x\x00",
    7,
    b"ab",
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_tenant_names_are_refused_without_quoting_them(tmp_path: Path, name: object) -> None:
    url = url_of(tmp_path / "state.db")
    for opener in (
        lambda: safepoint.open_store(url, tenant=name),
        lambda: asyncio.run(safepoint.open_async_store(url, tenant=name)),
        lambda: safepoint.open_store("memory://", tenant=name),
    ):
        with pytest.raises(InvalidURL) as caught:
            opener()
        if isinstance(name, str) and len(name) > 1:
            assert name not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # refused before anything was made


def test_sixty_three_characters_is_the_longest_name(tmp_path: Path) -> None:
    with safepoint.open_store(url_of(tmp_path / "s.db"), tenant="a" * 63) as store:
        assert store.tenant == "a" * 63


# --- a named tenant's namespace in a blob store given as blobs=


def _shared_blob_stores(tmp_path: Path, kind: str) -> Iterator[tuple[Any, Callable[[str, str], bool]]]:
    """The blob store kind, and how to tell whether a digest is stored under a key prefix in it."""
    if kind == "filesystem":
        root = tmp_path / "shared-blobs"
        yield (
            FileSystemBlobStore(root),
            lambda space, d: (root / space / d[:2] / d[2:4] / d).is_file(),
        )
    elif kind == "memory":
        memory = MemoryBlobStore()
        yield memory, lambda space, d: d in memory._spaces.get(space, {})
    else:
        server = start_s3_server()
        try:
            client_options = {"endpoint_url": server.endpoint_url, "region": REGION, **CREDENTIALS}
            s3 = S3BlobStore("tenant-bucket", prefix="root/", **client_options)
            s3.client.create_bucket(Bucket="tenant-bucket")

            def stored(space: str, d: str) -> bool:
                return s3._head(f"root/{space}{d}")  # type: ignore[no-any-return]

            yield s3, stored
            s3.close()
        finally:
            server.stop()


@pytest.mark.parametrize("kind", ["filesystem", "memory", "s3"])
def test_a_shared_blob_store_keeps_each_named_tenant_in_its_namespace(tmp_path: Path, kind: str) -> None:
    url = url_of(tmp_path / "state.db")
    for shared, stored in _shared_blob_stores(tmp_path, kind):
        digest = hashlib.sha256(BIG_B.encode()).hexdigest()
        with safepoint.open_store(url, tenant="b", blobs=shared) as b:
            b.save(Checkpoint(run_id="big", state={"v": BIG_B}))
        assert stored("tenants/b/", digest)
        assert not stored("", digest)
        with safepoint.open_store(url, tenant="a", blobs=shared) as a:
            ref = {"$blob": {"sha256": digest, "size": len(BIG_B), "media_type": MEDIA}}
            missing = outcome(partial(a.fetch_blob, ref), digest)
            assert missing[:2] == ("error", "BlobNotFound")
            assert a.collect_garbage(grace=0).deleted == []  # a's namespace only: b's blob stays
            assert stored("tenants/b/", digest)
            a.save(Checkpoint(run_id="big", state={"v": BIG_B}))  # the same content: a's own copy
            assert stored("tenants/a/", digest)
            assert a.load("big").state == {"v": BIG_B}
            a.delete_run("big")
            assert a.collect_garbage(grace=0).deleted == [digest]
        assert not stored("tenants/a/", digest)
        assert stored("tenants/b/", digest)
        with safepoint.open_store(url, blobs=shared) as default:  # the implicit tenant: the root
            default.save(Checkpoint(run_id="big", state={"v": BIG_B}))
            assert stored("", digest)
            assert default.collect_garbage(grace=0).deleted == []  # a scan of the root skips tenants/
        with safepoint.open_store(url, tenant="b", blobs=shared) as b:
            assert b.load("big").state == {"v": BIG_B}
        if kind == "filesystem":  # the same folder named by a URL: the same namespaces
            with safepoint.open_store(url, tenant="b", blobs=f"file://{tmp_path}/shared-blobs") as b:
                assert b.load("big").state == {"v": BIG_B}


class PlainBlobs:
    """A blob store of the user's own, with no tenant namespaces (no ``for_tenant``)."""

    def __init__(self) -> None:
        self.inner = MemoryBlobStore()

    def put(self, data: bytes) -> str:
        return self.inner.put(data)

    def get(self, digest: str) -> bytes:
        return self.inner.get(digest)

    def exists(self, digest: str) -> bool:
        return self.inner.exists(digest)

    def delete(self, digest: str) -> bool:
        return self.inner.delete(digest)

    def scan(self) -> Iterator[BlobInfo]:
        return self.inner.scan()

    def close(self) -> None:
        self.inner.close()


def test_a_blob_store_without_tenant_namespaces_is_refused_for_a_named_tenant(tmp_path: Path) -> None:
    url = url_of(tmp_path / "state.db")
    with pytest.raises(InvalidArgument, match="for_tenant"):
        safepoint.open_store(url, tenant="a", blobs=PlainBlobs())
    assert not (tmp_path / "state.db.tenants").exists()
    with safepoint.open_store(url, blobs=PlainBlobs()) as store:  # the implicit tenant: as before
        store.save(Checkpoint(run_id="big", state={"v": BIG_B}))


@pytest.mark.parametrize("store", [MemoryBlobStore, FileSystemBlobStore])
def test_for_tenant_refuses_names_that_would_leave_the_namespace(tmp_path: Path, store: type) -> None:
    blobs = store() if store is MemoryBlobStore else store(tmp_path / "b")
    for name in ("..", "a/b", "", "A", "a" * 64, None):
        with pytest.raises(InvalidArgument):
            blobs.for_tenant(name)
    assert blobs.for_tenant("a").for_tenant("b") is not None  # a view is a blob store like any
