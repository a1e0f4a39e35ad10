"""The PostgreSQL backend: conformance (sync and async drivers), setup, errors, concurrency.

Every test works in a schema of its own (``sp_test_<hex>``) in the test
database and drops it afterwards; see ``conftest_postgres.py`` for the DSN and
for what happens when the server is unreachable.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql

import safepoint
from conftest_postgres import fresh_schema, postgres_tamper, raw
from helpers.blocking import BlockingDriver
from safepoint import Checkpoint, Store
from safepoint.errors import (
    Conflict,
    InvalidArgument,
    InvalidURL,
    NotFound,
    NotJSONCompatible,
    StoreClosed,
    StoreError,
    StoreUnavailable,
)
from safepoint.store import calls
from safepoint.store.blob_targets import DatabaseBlobs
from safepoint.store.methods.checkpoints import save_call
from safepoint.store.postgres.async_driver import PostgresAsyncDriver, open_postgres_async_driver
from safepoint.store.postgres.driver import PostgresDriver
from safepoint.store.postgres.schema import REVISIONS
from safepoint.store.postgres.statements import QUERIES, SETUP
from safepoint.store.query import Op, Query
from safepoint.store.query_specs import load_dialect
from safepoint.store.settings import StoreSettings
from safepoint.testing.conformance import StoreConformance, Tamper

PIPELINE = StoreSettings(blobs=DatabaseBlobs())  # what open_store gives a PostgreSQL store, minus scrubbing
T = TypeVar("T")
SMALL_POOL = {"min_size": 1, "max_size": 2}


@pytest.fixture
def pg_factory(postgres_dsn: str, pg_schema: str) -> Iterator[Callable[..., Store]]:
    """Opens stores on the test's schema, closing them all before the schema is dropped."""
    opened: list[Store] = []

    def factory(**options: Any) -> Store:
        store = safepoint.open_store(postgres_dsn, schema=pg_schema, **{**SMALL_POOL, **options})
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def pg_driver(store: Store) -> PostgresDriver:
    driver = store.driver
    assert isinstance(driver, PostgresDriver)
    return driver


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def store(self, pg_factory: Callable[..., Store]) -> Store:
        return pg_factory()

    @pytest.fixture
    def reopen(self, pg_factory: Callable[..., Store]) -> Callable[[], Store]:
        return pg_factory

    @pytest.fixture
    def tamper(self, postgres_dsn: str, pg_schema: str) -> Tamper:
        return postgres_tamper(postgres_dsn, pg_schema)


# -- the async driver ----------------------------------------------------------


class _OpensOnItsLoop:
    """An async driver opened by its first operation, on the loop that will run it.

    psycopg's async pool belongs to the event loop it was opened on, and a
    ``BlockingDriver`` runs its own loop in a thread: opening there is the
    only way to hand it a working pool.
    """

    dialect = "postgresql"
    capabilities = PostgresAsyncDriver.capabilities  # the driver it opens answers them

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self._url, self._options = url, options
        self.inner: PostgresAsyncDriver | None = None

    async def run(self, op: Op[T], *, write: bool) -> T:
        if self.inner is None:
            self.inner = await open_postgres_async_driver(self._url, **self._options)
        return await self.inner.run(op, write=write)

    async def run_joined(self, op: Op[T], rebuild: Callable[[], Op[T]], *, weight: int) -> T:
        return await self.run(op, write=True)

    async def close(self) -> None:
        if self.inner is not None:
            await self.inner.close()


def _nothing() -> Op[None]:
    return None
    yield  # a generator that asks for no query


class TestPostgresAsyncDriver(StoreConformance):
    """The same conformance suite, every transaction run by ``PostgresAsyncDriver``."""

    @pytest.fixture
    def async_factory(self, postgres_dsn: str, pg_schema: str) -> Iterator[Callable[[], Store]]:
        opened: list[Store] = []

        def factory() -> Store:
            inner = _OpensOnItsLoop(postgres_dsn, {"schema": pg_schema, **SMALL_POOL})
            store = Store(BlockingDriver(inner), url="async+postgresql")
            opened.append(store)
            store.driver.run(_nothing(), write=False)  # open now, one store at a time
            return store

        yield factory
        for store in opened:
            store.close()

    @pytest.fixture
    def store(self, async_factory: Callable[[], Store]) -> Store:
        return async_factory()

    @pytest.fixture
    def reopen(self, async_factory: Callable[[], Store]) -> Callable[[], Store]:
        return async_factory

    @pytest.fixture
    def tamper(self, postgres_dsn: str, pg_schema: str) -> Tamper:
        return postgres_tamper(postgres_dsn, pg_schema)


async def _call(driver: PostgresAsyncDriver, call: calls.Call[Any, T]) -> T:
    return call.finish(await driver.run(call.op, write=call.write))


def test_async_driver_runs_the_shared_operations(postgres_dsn: str, pg_schema: str) -> None:
    """The async driver saves, loads, lists and refuses exactly like the sync one, by the same ops."""

    async def main() -> None:
        driver = await open_postgres_async_driver(postgres_dsn, schema=pg_schema, max_size=3)
        try:
            cp = Checkpoint(run_id="async-run", labels={"kind": "async"})
            for step in range(3):
                cp = cp if step == 0 else cp.next()
                cp.messages.append({"role": "user", "content": f"turn {step} \u0000"})
                await _call(driver, save_call(cp, None, PIPELINE))
            loaded = await _call(driver, calls.load("async-run", None, PIPELINE))
            assert (loaded.step, list(loaded.messages)) == (2, list(cp.messages))
            assert [i.step for i in await _call(driver, calls.history("async-run"))] == [0, 1, 2]
            page = await _call(driver, calls.runs(status=None, labels={"kind": "async"}, **_ALL))
            assert [r.run_id for r in page] == ["async-run"]
            with pytest.raises(Conflict):
                await _call(driver, save_call(cp, None, PIPELINE))
            with pytest.raises(NotFound):
                await _call(driver, calls.load("absent", None, PIPELINE))
        finally:
            await driver.close()
        with pytest.raises(StoreClosed):
            await _call(driver, calls.load("async-run", None, PIPELINE))

    asyncio.run(main())


_ALL: dict[str, Any] = {"updated_since": None, "limit": 10, "cursor": None}


def test_async_writers_of_one_step_exactly_one_wins(postgres_dsn: str, pg_schema: str) -> None:
    """Eight concurrent async saves of the same step on one pool: one lands, seven get Conflict."""

    async def main() -> list[str]:
        driver = await open_postgres_async_driver(postgres_dsn, schema=pg_schema, max_size=8)
        try:
            await _call(driver, save_call(Checkpoint(run_id="race"), None, PIPELINE))
            base = await _call(driver, calls.load("race", None, PIPELINE))

            async def writer(n: int) -> str:
                cp = base.next()
                cp.messages.append({"role": "user", "content": f"writer {n}"})
                try:
                    await _call(driver, save_call(cp, None, PIPELINE))
                except Conflict:
                    return "conflict"
                return "saved"

            return sorted(await asyncio.gather(*(writer(n) for n in range(8))))
        finally:
            await driver.close()

    assert asyncio.run(main()) == ["conflict"] * 7 + ["saved"]


# -- durability, sessions, text PostgreSQL cannot hold ------------------------------


def test_commits_with_synchronous_commit_on(pg_factory: Callable[..., Store]) -> None:
    """A save's transaction runs with synchronous_commit on: COMMIT waits for the WAL flush."""
    driver = pg_driver(pg_factory())
    assert driver.execute_raw("SHOW synchronous_commit") == [("on",)]
    assert driver.execute_raw("SHOW transaction_isolation") == [("read committed",)]


@pytest.mark.parametrize("prepare_threshold", [None, 0, 5])
def test_no_session_state_is_left_on_connections(
    pg_factory: Callable[..., Store], prepare_threshold: int | None
) -> None:
    """search_path is set per transaction only, so a PgBouncer-style pooler may share connections."""
    store = pg_factory(min_size=1, max_size=1, prepare_threshold=prepare_threshold)
    for step in range(8):  # past psycopg's prepare threshold
        cp = Checkpoint(run_id="session", step=step)
        store.save(cp)
        assert store.load("session").step == step
    with pg_driver(store).pool.connection() as conn:
        (path,) = conn.execute("SELECT current_setting('search_path')").fetchone() or ("",)
    assert "sp_test_" not in path


def test_nul_in_messages_and_state_round_trips(pg_factory: Callable[..., Store]) -> None:
    """NUL characters in messages and state come back exactly (they are stored in bytea)."""
    store = pg_factory()
    cp = Checkpoint(
        run_id="nul",
        messages=[{"role": "user", "content": "a\u0000b", "\u0000key": ["\u0000"]}],
        state={"blob": "\u0000" * 3, "nested": {"k\u0000": "v\u0000"}},
        cursors={"pos": "\u0000"},
    )
    store.save(cp)
    loaded = pg_factory().load("nul")
    assert list(loaded.messages) == list(cp.messages)
    assert (loaded.state, loaded.cursors) == (cp.state, cp.cursors)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("labels", {"team": "a\u0000b"}),
        ("labels", {"te\u0000am": "a"}),
        ("counters", {"to\u0000kens": 1}),
    ],
)
def test_nul_in_labels_and_counters_is_refused(
    pg_factory: Callable[..., Store], field: str, value: dict[str, Any]
) -> None:
    """Labels and counter names (jsonb columns, which cannot hold NUL) with NUL are refused unwritten."""
    store = pg_factory()
    cp = Checkpoint(run_id="nul-label")
    setattr(cp, field, value)
    with pytest.raises(NotJSONCompatible, match="NUL characters are not allowed"):
        store.save(cp)
    with pytest.raises(NotFound):
        store.load("nul-label")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("messages", [{"role": "user", "content": "lone \ud800"}]),
        ("state", {"text": "lone \udfff"}),
        ("labels", {"team": "lone \ud800"}),
    ],
)
def test_lone_surrogates_are_refused(pg_factory: Callable[..., Store], field: str, value: Any) -> None:
    """Text with a lone surrogate (not encodable as UTF-8) is refused with a typed error, unwritten."""
    store = pg_factory()
    cp = Checkpoint(run_id="surrogate")
    setattr(cp, field, value)
    with pytest.raises(NotJSONCompatible, match="lone surrogate"):
        store.save(cp)
    assert store.runs().items == []


def test_surrogates_that_reach_the_driver_are_refused_typed(pg_factory: Callable[..., Store]) -> None:
    """A lone surrogate no validation caught (here, in a run id) is InvalidArgument, never a raw error."""
    store = pg_factory()
    with pytest.raises(InvalidArgument, match="surrogate"):
        store.save(Checkpoint(run_id="run \ud800"))
    with pytest.raises(InvalidArgument, match="surrogate"):
        store.load("run \udfff")
    assert store.runs().items == []


# -- options and errors --------------------------------------------------------


def test_unreachable_server_fails_at_once_without_the_password() -> None:
    """An unreachable server raises StoreUnavailable on open (a caller may ride it out), naming
    the host but never the password."""
    url = "postgresql://someone:s3cret-pw@127.0.0.1:1/test"
    masked = re.escape("connecting to postgresql://someone:***@127.0.0.1:1")
    with pytest.raises(StoreUnavailable, match=masked) as caught:
        safepoint.open_store(url, connect_timeout=2)
    assert "s3cret-pw" not in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)

    async def main() -> None:
        await open_postgres_async_driver(url, connect_timeout=2)

    with pytest.raises(StoreError, match="connecting to"):
        asyncio.run(main())


@pytest.mark.parametrize(
    "options",
    [
        {"pool_size": 3},
        {"schema": ""},
        {"schema": "x" * 64},
        {"min_size": 3, "max_size": 2},
        {"timeout": 0},
        {"connect_timeout": "10"},
        {"prepare_threshold": -1},
    ],
)
def test_bad_options_raise_invalid_url(options: dict[str, Any]) -> None:
    """Unknown or out-of-range options are refused before any connection is made."""
    with pytest.raises(InvalidURL):
        safepoint.open_store("postgresql://u:pw@127.0.0.1:1/test", **options)


def test_store_url_masks_the_password(postgres_dsn: str, pg_schema: str) -> None:
    """Store.url (shown in reprs and logs) never carries the password."""
    url = postgres_dsn.replace("postgres@", "postgres:not-checked-by-trust@", 1)
    store = safepoint.open_store(url, schema=pg_schema, **SMALL_POOL)
    try:
        assert "not-checked-by-trust" not in store.url + repr(store)
    finally:
        store.close()


def test_schemas_keep_stores_apart_and_any_name_is_quoted(postgres_dsn: str) -> None:
    """Two schemas hold independent runs; a schema name with quotes and spaces is safely quoted."""
    with fresh_schema(postgres_dsn) as plain, fresh_schema(postgres_dsn) as base:
        odd = base + ' "Odd"; DROP'  # dropped by the raw statement below
        first = safepoint.open_store(postgres_dsn, schema=plain, **SMALL_POOL)
        second = safepoint.open_store(postgres_dsn, schema=odd, **SMALL_POOL)
        try:
            first.save(Checkpoint(run_id="same", state={"in": "plain"}))
            second.save(Checkpoint(run_id="same", state={"in": "odd"}))
            assert first.load("same").state == {"in": "plain"}
            assert second.load("same").state == {"in": "odd"}
        finally:
            first.close()
            second.close()
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(odd)))


def test_pool_exhaustion_raises_store_error(pg_factory: Callable[..., Store]) -> None:
    """With every connection taken, an operation gives up after ``timeout`` with StoreError."""
    store = pg_factory(min_size=1, max_size=1, timeout=0.2)
    store.save(Checkpoint(run_id="busy"))
    with pg_driver(store).pool.connection(), pytest.raises(StoreError, match="max_size or timeout"):
        store.load("busy")
    assert store.load("busy").step == 0  # the connection is back: the store works again


def test_closed_store_raises_store_closed(pg_factory: Callable[..., Store]) -> None:
    """Using a store after close() raises StoreClosed."""
    store = pg_factory()
    store.close()
    with pytest.raises(StoreClosed):
        store.load("anything")


def _insert_run_with(labels: str) -> Op[None]:
    yield Query(
        "insert_run",
        {
            "run_id": "leaky",
            "status": "running",
            "step": 0,
            "schema_version": 1,
            "labels": labels,
            "counters": "{}",
            "parent_run_id": None,
            "parent_step": None,
            "digest": b"",
            "now": 0,
            "next_seq": 0,
        },
    )


def test_database_errors_never_quote_stored_values(pg_factory: Callable[..., Store]) -> None:
    """A failing statement raises StoreError naming the query, not the values PostgreSQL quoted."""
    driver = pg_driver(pg_factory())
    with pytest.raises(StoreError, match=r"'insert_run'.*SQLSTATE 22P02") as caught:
        driver.run(_insert_run_with("TOPSECRETVALUE"), write=True)
    assert "TOPSECRETVALUE" not in str(caught.value)
    assert "TOPSECRETVALUE" in str(caught.value.__cause__)  # the detail stays in the cause


def _save_step_zero_twice(run_id: str) -> Op[None]:
    rows = yield Query("run_head", {"run_id": run_id})
    run_ref = rows[0][1]
    row = {"run_ref": run_ref, "step": 0, "schema_version": 1, "status": "running", "now": 0}
    row |= {"message_count": 0, "ranges": "[]", "header": b"{}", "digest": b""}
    row |= {"first_seq": 0, "added": 0, "messages": None, "blobs": None, "carriers": None, "chains": None}
    yield Query("insert_checkpoint", row)


def test_a_duplicate_checkpoint_row_is_a_conflict(pg_factory: Callable[..., Store]) -> None:
    """Should two writers ever insert the same (run, step), the loser gets Conflict, not a raw error."""
    store = pg_factory()
    store.save(Checkpoint(run_id="dup"))
    with pytest.raises(Conflict, match="'dup' step 0: another writer stored this step first"):
        pg_driver(store).run(_save_step_zero_twice("dup"), write=True)
    assert [i.step for i in store.history("dup")] == [0]


def test_queries_cover_every_sqlite_query() -> None:
    """The PostgreSQL dialect names every query the SQLite one has but the optional ones (the
    file's housekeeping), so ops run unchanged on both; save_next is PostgreSQL's own."""
    shared = {name for name, query in QUERIES.items() if not query.spec.optional}
    sqlite = load_dialect("safepoint.store", ["sqlite/queries.sql"], r"(?<![:\w]):(\w+)")
    assert shared == {name for name, query in sqlite.items() if not query.spec.optional}
    texts = (*(query.sql for query in QUERIES.values()), *SETUP.values())
    assert all("%" not in line for text in texts for line in _comments(text))


def _comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("--")]


# -- DDL setup -------------------------------------------------------------------


def describe(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """The structure of the schema's safepoint tables: columns, their storage, indexes and constraints.

    Names are made schema-independent (PostgreSQL qualifies names from
    another schema in index and constraint definitions).
    """
    queries = {
        "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity,"
        " identity_generation FROM information_schema.columns WHERE table_schema = %(schema)s"
        " ORDER BY table_name, ordinal_position",
        # How each column is stored: TOAST strategy and compression method (revision 4).
        "storage": "SELECT cl.relname, a.attname, a.attstorage, a.attcompression FROM pg_attribute AS a"
        " JOIN pg_class AS cl ON cl.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = cl.relnamespace"
        " WHERE n.nspname = %(schema)s AND cl.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY cl.relname, a.attname",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s"
        " ORDER BY tablename, indexname",
        # Row-level security (revision 12): which tables enforce it, forced or not, and the policies.
        "security": "SELECT cl.relname, cl.relrowsecurity, cl.relforcerowsecurity FROM pg_class AS cl"
        " JOIN pg_namespace AS n ON n.oid = cl.relnamespace WHERE n.nspname = %(schema)s AND cl.relkind = 'r'"
        " ORDER BY cl.relname",
        "policies": "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check"
        " FROM pg_policies"
        " WHERE schemaname = %(schema)s ORDER BY tablename, policyname",
        "constraints": "SELECT cl.relname, co.conname, co.contype, pg_get_constraintdef(co.oid)"
        " FROM pg_constraint AS co JOIN pg_class AS cl ON cl.oid = co.conrelid"
        " JOIN pg_namespace AS n ON n.oid = cl.relnamespace WHERE n.nspname = %(schema)s"
        " ORDER BY cl.relname, co.conname",
    }
    shape: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(dsn) as conn:
        for what, query in queries.items():
            rows = conn.execute(query, {"schema": schema}).fetchall()  # type: ignore[arg-type]
            shape[what] = [
                tuple(v.replace(f"{schema}.", "") if isinstance(v, str) else v for v in row) for row in rows
            ]
    return shape


def build_revisions(dsn: str, schema: str, upto: int) -> None:
    """A schema as an older safepoint left it: revisions 1..upto applied one by one, and recorded."""
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(SETUP["create_revisions_table"])  # type: ignore[arg-type]
        for revision in REVISIONS[:upto]:
            conn.execute(revision.sql)  # type: ignore[arg-type]
            conn.execute(SETUP["record_revision"], {"revision": revision.number, "name": revision.name})  # type: ignore[arg-type]


@pytest.mark.parametrize("start_at", range(1, len(REVISIONS) + 1))
def test_upgraded_schema_equals_fresh_schema(postgres_dsn: str, start_at: int) -> None:
    """A schema upgraded from any revision ends equal to a fresh one (every revision applied in one go)."""
    with fresh_schema(postgres_dsn) as fresh, fresh_schema(postgres_dsn) as old:
        safepoint.open_store(postgres_dsn, schema=fresh, **SMALL_POOL).close()
        build_revisions(postgres_dsn, old, start_at)
        upgraded = safepoint.open_store(postgres_dsn, schema=old, **SMALL_POOL)
        assert pg_driver(upgraded).applied == [r.number for r in REVISIONS[start_at:]]
        upgraded.close()
        fresh_shape = describe(postgres_dsn, fresh)
        assert describe(postgres_dsn, old) == fresh_shape
        assert all(fresh_shape.values())  # not vacuously equal


def test_reopening_applies_nothing(
    pg_factory: Callable[..., Store], postgres_dsn: str, pg_schema: str
) -> None:
    """The first open applies every revision, later opens none; each revision is recorded once."""
    assert pg_driver(pg_factory()).applied == [r.number for r in REVISIONS]
    assert pg_driver(pg_factory()).applied == []
    recorded = raw(postgres_dsn, pg_schema, "SELECT revision FROM safepoint_ddl_revisions ORDER BY revision")
    assert [r[0] for r in recorded] == [r.number for r in REVISIONS]


_OPEN_AT_ONCE = """
import sys
import safepoint
print("ready", flush=True)
sys.stdin.readline()
store = safepoint.open_store(sys.argv[1], schema=sys.argv[2], min_size=0, max_size=1)
print(store.driver.applied, flush=True)
store.close()
"""


def test_six_processes_open_a_fresh_schema_at_once(postgres_dsn: str, pg_schema: str) -> None:
    """Six processes opening one fresh schema together all succeed; one applies each revision, once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT_ONCE, postgres_dsn, pg_schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for proc in procs:  # every child has imported safepoint and waits on stdin
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 6, [err for _, err in results]
    applied = [out.strip() for out, _ in results]
    assert sorted(applied) == sorted(["[]"] * 5 + [str([r.number for r in REVISIONS])])
    counts = raw(
        postgres_dsn,
        pg_schema,
        "SELECT revision, count(*) FROM safepoint_ddl_revisions GROUP BY 1 ORDER BY 1",
    )
    assert counts == [(r.number, 1) for r in REVISIONS]


# -- concurrency -------------------------------------------------------------------


def test_eight_threads_own_runs_and_a_shared_run(pg_factory: Callable[..., Store]) -> None:
    """Eight writers, each with its own store: every step of every run lands exactly once, no gaps."""
    threads, steps = 8, 50
    stores = [pg_factory() for _ in range(threads)]
    failures: list[BaseException] = []

    def add_to_shared(store: Store, label: str) -> None:
        while True:  # optimistic concurrency: reload the head and retry on Conflict
            try:
                cp = store.load("shared").next()
            except NotFound:
                cp = Checkpoint(run_id="shared")
            cp.messages.append({"role": "user", "content": label})
            try:
                store.save(cp)
            except Conflict:
                continue
            return

    def writer(n: int) -> None:
        try:
            store = stores[n]
            cp = Checkpoint(run_id=f"own-{n}")
            for step in range(steps):
                cp = cp if step == 0 else cp.next()
                cp.messages.append({"role": "user", "content": f"{n}:{step}"})
                store.save(cp)
                add_to_shared(store, f"{n}:{step}")
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert failures == []
    check = stores[0]
    expected = sorted(f"{n}:{s}" for n in range(threads) for s in range(steps))
    for n in range(threads):
        assert [i.step for i in check.history(f"own-{n}")] == list(range(steps))
        assert [m["content"] for m in check.load(f"own-{n}").messages] == [f"{n}:{s}" for s in range(steps)]
    assert [i.step for i in check.history("shared")] == list(range(threads * steps))
    shared = [m["content"] for m in check.load("shared").messages]
    assert sorted(shared) == expected  # each thread's every step, exactly once


def test_open_async_store_serves_postgresql_natively(postgres_dsn: str, pg_schema: str) -> None:
    """open_async_store("postgresql://…") gives an AsyncStore on the native async driver."""

    async def scenario() -> None:
        async with await safepoint.open_async_store(postgres_dsn, schema=pg_schema) as store:
            assert isinstance(store.driver, PostgresAsyncDriver)
            cp = Checkpoint(run_id="native")
            cp.messages.append({"role": "user", "content": "hi"})
            await store.save(cp)
            cp = cp.next()
            cp.messages.append({"role": "assistant", "content": "hello"})
            await store.save(cp)
            assert (await store.load("native")).messages == cp.messages
            await store.enqueue("native")
            lease = await store.claim("w1", lease=30)
            assert lease is not None
            await store.release(lease, status="done")
            assert (await store.run("native")).status is safepoint.Status.DONE

    asyncio.run(scenario())
