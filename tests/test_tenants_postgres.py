"""Tenants on PostgreSQL, enforced by the database: row-level security as an unprivileged role.

Sessions and CI run as a superuser, which row-level security never stops; so
each test here makes its own roles — an owner that runs the DDL, an
application role with neither superuser nor BYPASSRLS, an operator with
BYPASSRLS and SELECT only — with unique names, in a schema of their own, and
drops them all at the end, failure or not (roles are cluster-wide objects).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from starlette.testclient import TestClient

import safepoint
from conftest_postgres import fresh_schema, raw, require_postgres
from safepoint.store.postgres import statements
from safepoint.store.postgres.roles import STORE_TABLES, TENANT_TABLES
from safepoint.ui import create_app
from safepoint.ui.paths import run_path
from safepoint_exe import sp
from tenant_probes import VALUE_A, VALUE_B, probe, seed_pair
from tenant_roles import SMALL, Cluster, roles

FILTER = "tenant = current_setting('safepoint.tenant')"


@pytest.fixture(scope="module")
def seeded() -> Iterator[Cluster]:
    """Tenants a and b written through the application role, same run ids, values of their own."""
    with roles() as cluster:
        a, b = cluster.open(cluster.app, "a"), cluster.open(cluster.app, "b")
        try:
            seed_pair(a, b)
        finally:
            a.close()
            b.close()
        yield cluster


def test_the_roles_are_what_the_layout_says(seeded: Cluster) -> None:
    """Neither the owner nor the application role is a superuser or has BYPASSRLS; every tenant
    table forces row-level security; the store-wide table is read-only to the application."""
    rows = seeded.sql(
        "postgres" if "postgres@" in seeded.dsn else seeded.owner,
        "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname LIKE 'sp\\_%' ESCAPE '\\'",
    )
    flags = {name: (superuser, bypass) for name, superuser, bypass in rows}
    assert flags[seeded.owner] == (False, False)
    assert flags[seeded.app] == (False, False)
    assert flags[seeded.operator] == (False, True)
    forced = dict(
        seeded.sql(
            seeded.owner,
            "SELECT relname, relforcerowsecurity AND relrowsecurity FROM pg_class"
            f" WHERE relnamespace = '{seeded.schema}'::regnamespace AND relkind = 'r'",
        )
    )
    assert {name for name, force in forced.items() if force} == set(TENANT_TABLES)
    assert set(forced) == set(TENANT_TABLES) | set(STORE_TABLES)
    with pytest.raises(errors.InsufficientPrivilege):
        seeded.sql(seeded.app, "INSERT INTO safepoint_ddl_revisions (revision, name) VALUES (99, 'x')")
    with pytest.raises(errors.InsufficientPrivilege):
        seeded.sql(seeded.app, "ALTER TABLE safepoint_runs DISABLE ROW LEVEL SECURITY")


@pytest.mark.parametrize("tenant", [None, "", "zz-unknown"])
def test_raw_sql_as_the_app_role_without_its_tenant_sees_no_row(seeded: Cluster, tenant: str | None) -> None:
    """No tenant, an empty one (what a session holds after a local setting ended) or an unknown
    one: every tenant table is empty to the application role, and to the owner."""
    for role in (seeded.app, seeded.owner):
        for table in TENANT_TABLES:
            assert seeded.sql(role, f"SELECT count(*) FROM {table}", tenant) == [(0,)], (role, table)


def test_raw_sql_as_a_tenant_sees_its_rows_only(seeded: Cluster) -> None:
    """Set to a, the application role counts a's rows — what a's handle lists — and none of b's;
    the operator (BYPASSRLS) sees both tenants."""
    a = seeded.open(seeded.app, "a", read_only=True)
    try:
        listed = {info.run_id for info in a.runs(limit=1000)}
    finally:
        a.close()
    tenants = seeded.sql(seeded.app, "SELECT DISTINCT tenant FROM safepoint_runs", "a")
    assert tenants == [("a",)]
    run_ids = {row[0] for row in seeded.sql(seeded.app, "SELECT run_id FROM safepoint_runs", "a")}
    assert run_ids == listed
    both = seeded.sql(seeded.operator, "SELECT DISTINCT tenant FROM safepoint_runs ORDER BY 1")
    assert both == [("a",), ("b",)]
    values = seeded.sql(seeded.app, "SELECT count(*) FROM safepoint_blobs", "a")
    assert values[0][0] > 0


def test_a_row_for_another_tenant_cannot_be_written(seeded: Cluster) -> None:
    """Set to a, an insert naming tenant b, an update moving a row to b, and an insert with no
    tenant set at all are refused; nothing is written."""
    before = seeded.sql(seeded.operator, "SELECT count(*) FROM safepoint_meta")
    with pytest.raises(errors.InsufficientPrivilege):  # new row violates row-level security policy
        seeded.sql(seeded.app, "INSERT INTO safepoint_meta (tenant, name, value) VALUES ('b', 'x', 'y')", "a")
    with pytest.raises(errors.InsufficientPrivilege):
        seeded.sql(seeded.app, "UPDATE safepoint_runs SET tenant = 'b'", "a")
    with pytest.raises(psycopg.Error):  # current_setting('safepoint.tenant') has no value to give
        seeded.sql(seeded.app, "INSERT INTO safepoint_meta (name, value) VALUES ('x', 'y')")
    assert seeded.sql(seeded.operator, "SELECT count(*) FROM safepoint_meta") == before


def test_cross_tenant_probes_through_the_api(seeded: Cluster) -> None:
    """Everything a's handle can do to b's names ends as it would on a name nobody holds, and b
    reads back unchanged — and the other way round."""
    a, b = seeded.open(seeded.app, "a"), seeded.open(seeded.app, "b")
    try:
        assert probe(a, b, *_seeds(a, b), VALUE_B) == []
        assert probe(b, a, *reversed(_seeds(a, b)), VALUE_A) == []
    finally:
        a.close()
        b.close()


def test_queries_without_their_tenant_filter_still_see_nothing_foreign(
    seeded: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every query's tenant filter taken out: the application role still sees only its tenant
    (row-level security, the second lock) — while the superuser, whom it does not bind, now sees
    the other tenant's runs, which shows the filters really were taken out."""
    stripped = 0
    for name, text in statements.SENT.items():
        bare = _without_filter(text)
        if bare != text:
            stripped += 1
            monkeypatch.setitem(statements.SENT, name, bare)
    assert stripped >= 40
    a = seeded.open(seeded.app, "a")
    superuser = seeded.open("postgres", "a", read_only=True) if "postgres@" in seeded.dsn else None
    try:
        assert {i.run_id for i in a.runs(limit=1000)} <= _all_ids(seeded, "a")
        if superuser is not None:
            assert {i.run_id for i in superuser.runs(limit=1000)} - _all_ids(seeded, "a")
        b = seeded.open(seeded.app, "b")
        try:
            assert probe(a, b, *_seeds(a, b), VALUE_B) == []
        finally:
            b.close()
    finally:
        a.close()
        if superuser is not None:
            superuser.close()


def test_the_same_content_is_stored_once_per_tenant(seeded: Cluster) -> None:
    """Blob rows are keyed by tenant: the same large value saved by both tenants is two rows, one
    each, and gc in one leaves the other's."""
    content = "the same large value " * 40
    for tenant in ("a", "b"):
        store = seeded.open(seeded.app, tenant)
        try:
            store.save(safepoint.Checkpoint(run_id="same", messages=[{"role": "user", "content": content}]))
        finally:
            store.close()
    rows = seeded.sql(
        seeded.operator,
        "SELECT digest, array_agg(tenant ORDER BY tenant) FROM safepoint_blobs GROUP BY digest",
    )
    assert [tenants for _, tenants in rows if len(tenants) > 1] == [["a", "b"]]
    a = seeded.open(seeded.app, "a")
    try:
        a.delete_run("same")
        a.collect_garbage()
    finally:
        a.close()
    b = seeded.open(seeded.app, "b", read_only=True)
    try:
        assert b.load("same").messages[0]["content"] == content
    finally:
        b.close()


def _seeds(a: safepoint.Store, b: safepoint.Store) -> tuple[Any, Any]:
    """The seeds' run ids as each tenant holds them now (``Seeded``-like, from the store)."""
    from redact_seed import Seeded  # noqa: PLC0415

    def of(store: safepoint.Store) -> Seeded:
        ids = sorted(
            info.run_id
            for info in store.runs(limit=1000)
            if not info.run_id.startswith(("probe-", "imported-"))
        )
        holding = [run_id for run_id in ids if _holds_blob(store, run_id)]
        return Seeded(run_ids=ids, holding=holding or ids)

    return of(a), of(b)


def _holds_blob(store: safepoint.Store, run_id: str) -> bool:
    return "$blob" in str(store.load(run_id, fetch_blobs=False).to_dict())


def _all_ids(cluster: Cluster, tenant: str) -> set[str]:
    return {row[0] for row in cluster.sql(cluster.app, "SELECT run_id FROM safepoint_runs", tenant)}


def _without_filter(text: str) -> str:
    """``text`` with every ``tenant = current_setting('safepoint.tenant')`` condition taken out."""
    for prefix in ("r.", "", "{schema}."):
        text = text.replace(f"{prefix}{FILTER} AND ", "")
    text = re.sub(r"WHERE (r\.)?" + re.escape(FILTER) + r" (GROUP|ORDER|;|$)", r"\2", text)
    return text.replace(f" WHERE {FILTER}", "")


def test_the_probes_find_a_leak_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes can fail: as the superuser, whom row-level security does not bind, with every
    tenant filter taken out, a's handle reaches b's runs, and the probes say so."""
    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        a = safepoint.open_store(dsn, schema=schema, tenant="a", **SMALL)
        b = safepoint.open_store(dsn, schema=schema, tenant="b", **SMALL)
        try:
            seeded_a, seeded_b = seed_pair(a, b)
        finally:
            a.close()
        for name, text in statements.SENT.items():
            monkeypatch.setitem(statements.SENT, name, _without_filter(text))
        a = safepoint.open_store(dsn, schema=schema, tenant="a", **SMALL)  # its SQL, stripped
        try:
            faults = probe(a, b, seeded_a, seeded_b, VALUE_B)
        finally:
            a.close()
            b.close()
    assert any(fault.startswith("load of B's run") for fault in faults)
    assert "B reads back differently after A's probes" in faults


def test_cross_tenant_probes_through_the_cli_and_the_inspector(seeded: Cluster) -> None:
    """As the application role with --tenant a, every command naming one of b's runs answers as
    for a run nobody holds (exit code, stdout and stderr but for the id), and so does the
    inspector's run page; nothing of b's changes."""
    from test_tenants_cli import COMMANDS, masked  # noqa: PLC0415

    only_b = sorted(
        {row[0] for row in seeded.sql(seeded.app, "SELECT run_id FROM safepoint_runs", "b")}
        - _all_ids(seeded, "a")
    )[0]
    before = seeded.sql(
        seeded.operator, "SELECT tenant, run_id, head_step, status FROM safepoint_runs ORDER BY 1, 2"
    )
    url = seeded.url(seeded.app)
    env = {"SAFEPOINT_TENANT": "a", "SAFEPOINT_SCHEMA": seeded.schema}
    for command in COMMANDS:
        answers = []
        for probed in (only_b, "never-" + uuid.uuid4().hex[:8]):
            args = [part.replace("{id}", probed) for part in command]
            done = sp(Path.cwd(), *args, "--store", url, env=env)
            answers.append((done.returncode, masked(done.stdout, probed), masked(done.stderr, probed)))
        assert answers[0] == answers[1], command
        assert answers[0][0] != 0, command
        assert "Traceback" not in answers[0][2]
    store = seeded.open(seeded.app, "a", read_only=True)
    try:
        web = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        names = (only_b, "never-" + uuid.uuid4().hex[:8])
        pages = [web.get(run_path(name)) for name in names]
        assert [page.status_code for page in pages] == [404, 404]
        assert masked(pages[0].text, names[0]) == masked(pages[1].text, names[1])
    finally:
        store.close()
    after = seeded.sql(
        seeded.operator, "SELECT tenant, run_id, head_step, status FROM safepoint_runs ORDER BY 1, 2"
    )
    assert after == before


def test_a_store_from_before_tenants_is_the_implicit_tenant_after_the_upgrade() -> None:
    """A schema at revision 11 holding a run and a blob, opened by this code (revision 12 applied):
    the implicit tenant lists, loads and claims what was there; a named tenant sees none of it."""
    from test_postgres import build_revisions  # noqa: PLC0415

    dsn = require_postgres()
    with fresh_schema(dsn) as schema:
        build_revisions(dsn, schema, 11)
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
            conn.execute(
                "INSERT INTO safepoint_runs (run_id, status, head_step, head_digest, schema_version, labels,"
                " counters, next_seq, created_at, updated_at, queued_at)"
                " VALUES ('old-run', 'running', 0, '\\x00', 1, '{}', '{}', 0, now(), now(), now())"
            )
            conn.execute(
                "INSERT INTO safepoint_blobs (digest, size, created_at, data) VALUES ('d', 1, now(), '\\x01')"
            )
        implicit = safepoint.open_store(dsn, schema=schema, min_size=0, max_size=2)
        try:
            assert [info.run_id for info in implicit.runs()] == ["old-run"]
            lease = implicit.claim("w", lease=60)
            assert lease is not None
            assert lease.run_id == "old-run"
            named = implicit.for_tenant("acme")
            assert list(named.runs()) == []
            assert named.claim("w", lease=60) is None
        finally:
            implicit.close()
        tenants = raw(
            dsn, schema, "SELECT DISTINCT tenant FROM safepoint_runs UNION SELECT tenant FROM safepoint_blobs"
        )
        assert tenants == [("default",)]
