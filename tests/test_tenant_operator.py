"""The operator view across tenants: ``safepoint tenant list`` and ``safepoint ui --all-tenants``.

It lists every tenant only for a role the database lets see them all: on
PostgreSQL the operator role (BYPASSRLS); the application's role is refused,
never shown its own tenant as if it were all. It is read-only: the overview
has no action, and ``--allow-actions`` with it is refused. Real subprocesses
for the CLI, the inspector's app through its test client.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import safepoint
from safepoint import Checkpoint
from safepoint.errors import InvalidArgument
from safepoint.store.admin import tenants_of
from safepoint.ui import create_app
from safepoint_exe import sp
from tenant_roles import roles

BASE = "http://127.0.0.1:8765"  # the address the inspector is bound to: its guard answers nothing else


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return sp(Path.cwd(), *args)


def _seed(store: safepoint.Store, tenants: tuple[str, ...]) -> None:
    for tenant in tenants:
        handle = store.for_tenant(tenant)
        try:
            for index in range(2 if tenant == "b" else 1):
                handle.save(Checkpoint(run_id=f"{tenant}-<script>{index}", messages=[]))
            handle.enqueue(f"{tenant}-<script>0")
        finally:
            if handle is not store:
                handle.close()


def test_sqlite_tenant_list_and_overview(tmp_path: Path) -> None:
    """Every tenant file of the store, each with its runs, in the CLI and the overview page;
    the overview serves no run page and takes no action."""
    url = f"sqlite:///{tmp_path}/s.db"
    store = safepoint.open_store(url)
    try:
        _seed(store, ("default", "a", "b"))
    finally:
        store.close()
    (tmp_path / "s.db.tenants" / "Not-A-Tenant.db").write_bytes(b"")  # a stray file is no tenant
    listed = _cli("tenant", "list", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["tenant"]: row for row in json.loads(listed.stdout)["tenants"]}
    assert sorted(rows) == ["a", "b", "default"]
    assert rows["b"]["runs"] == {"running": 2}
    assert rows["a"]["queued"] == 1
    reader = safepoint.open_store(url, read_only=True, tenant="a")
    try:
        client = TestClient(create_app(reader, all_tenants=True), base_url=BASE)
        page = client.get("/")
        assert page.status_code == 200
        assert page.text.count('class="tenant-row"') == 3
        assert "all tenants" in page.text
        assert client.get("/run/~a-%3Cscript%3E0").status_code == 404
        assert client.post("/act").status_code in (404, 405)
    finally:
        reader.close()
    refused = _cli("ui", "--store", url, "--all-tenants", "--allow-actions")
    assert refused.returncode == 2
    assert "read-only" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_postgres_operator_role_sees_every_tenant_the_app_role_none() -> None:
    """As the operator (BYPASSRLS) the store's tenants are listed; as the application role the
    listing is refused with a typed error (exit 2), and so is the overview, before it serves."""
    with roles() as cluster:
        app = cluster.open(cluster.app, "a")
        try:
            _seed(app, ("a", "b", "c"))
        finally:
            app.close()
        operator = cluster.open(cluster.operator, read_only=True)
        try:
            assert tenants_of(operator) == ["a", "b", "c"]
            page = TestClient(create_app(operator, all_tenants=True), base_url=BASE).get("/")
            assert page.text.count('class="tenant-row"') == 3
        finally:
            operator.close()
        app = cluster.open(cluster.app, "a", read_only=True)
        try:
            with pytest.raises(InvalidArgument, match="BYPASSRLS"):
                tenants_of(app)
        finally:
            app.close()
        schema = ["--schema", cluster.schema]
        listed = _cli("tenant", "list", "--store", cluster.url(cluster.operator), *schema, "--json")
        assert listed.returncode == 0, listed.stderr
        assert [row["tenant"] for row in json.loads(listed.stdout)["tenants"]] == ["a", "b", "c"]
        refused = _cli("tenant", "list", "--store", cluster.url(cluster.app), *schema)
        assert refused.returncode == 2
        assert "BYPASSRLS" in refused.stderr
        assert "Traceback" not in refused.stderr
        overview = _cli("ui", "--store", cluster.url(cluster.app), *schema, "--all-tenants", "--port", "1")
        assert overview.returncode == 2
        assert "BYPASSRLS" in overview.stderr
