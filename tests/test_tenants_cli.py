"""Tenants through the ``safepoint`` command and the inspector (issue 38), on SQLite: the
cross-tenant probes of ``test_tenants_sqlite`` as a user runs them.

The real executable in subprocesses, ``--tenant a`` (after the command, before it, or
``SAFEPOINT_TENANT``): ``runs`` lists a's runs only; every command naming one of b's run
ids exits and prints exactly as for an id no tenant held; ``gc``, ``verify``, ``stats`` and
``backup`` see a only; an imported fixture naming b's blob gets a nothing of b; a bad name
is the usual one-line error, exit 2, the name never quoted. The inspector over tenant a
(Starlette's test client, and ``safepoint ui --tenant a`` as a server): its header names the
tenant, its list holds a's runs, and a run page of b's id is the 404 of a missing run.
b's files are byte-identical at the end.
"""

from __future__ import annotations

import hashlib
import html
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import safepoint
import test_tenants_sqlite as api
import test_ui_cli as served
from safepoint.fixtures import write_fixture
from safepoint.ui import create_app
from safepoint.ui.paths import run_path
from safepoint.visible import visible
from safepoint_exe import sp

A_RUNS = {api.SHARED, "a-only", "a-queued"}
PROBED = ["b-only", api.HOSTILE[0]]  # b's ids a probe names (the API suite probes them all)


def run(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``safepoint`` in ``folder``, stdin not a terminal (``delete`` without ``--yes`` refuses)."""
    return sp(folder, *args, env=env)


def masked(text: str, *secrets: str) -> str:
    """``text`` with every form a probed id (or digest) can take in output replaced."""
    for secret in secrets:
        forms = {repr(secret), visible(repr(secret)), visible(secret, max_len=500), secret}
        forms |= {html.escape(form) for form in list(forms)}
        forms |= {json.dumps(form)[1:-1] for form in list(forms)}
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, "<probed>")
    return text


@pytest.fixture
def seeded(tmp_path: Path) -> api.Seeded:
    return api.seed(tmp_path / "state.db")


@pytest.fixture
def b_unchanged(seeded: api.Seeded) -> Iterator[None]:
    """b's files, byte for byte, and what b sees: the same after the test as before it."""
    # first: a read-only open may make the -wal and -shm files, and check the file in
    view = api.view_of(seeded.url, "b"), api.view_of(seeded.url, "default")
    before = api.files_of(seeded.path, "b"), api.files_of(seeded.path, "default")
    yield
    assert (api.files_of(seeded.path, "b"), api.files_of(seeded.path, "default")) == before
    assert (api.view_of(seeded.url, "b"), api.view_of(seeded.url, "default")) == view


def listed(result: subprocess.CompletedProcess[str]) -> set[str]:
    assert result.returncode == 0, result.stderr
    return {row["run_id"] for row in json.loads(result.stdout)["runs"]}


def test_runs_lists_the_tenant_given_in_each_way(seeded: api.Seeded, b_unchanged: None) -> None:
    folder, url = seeded.path.parent, seeded.url
    assert listed(run(folder, "--tenant", "a", "runs", "--store", url, "--json", "--all")) == A_RUNS
    assert listed(run(folder, "runs", "--store", url, "--tenant", "a", "--json", "--all")) == A_RUNS
    from_env = run(folder, "runs", "--store", url, "--json", "--all", env={"SAFEPOINT_TENANT": "a"})
    assert listed(from_env) == A_RUNS
    # the command's own --tenant beats the group's, which beats the environment
    beaten = run(folder, "--tenant", "b", "runs", "--store", url, "--tenant", "a", "--json", "--all")
    assert listed(beaten) == A_RUNS
    assert listed(run(folder, "runs", "--store", url, "--json", "--all")) == {"default-run"}
    table = run(folder, "runs", "--store", url, "--tenant", "a", env={"COLUMNS": "200"})
    assert "runs of tenant a in" in table.stdout
    assert "b-only" not in table.stdout
    paged = run(folder, "runs", "--store", url, "--tenant", "a", "--limit", "1", env={"COLUMNS": "400"})
    assert "--tenant=a" in paged.stdout.strip().splitlines()[-1]  # the next page's command keeps it


# Each command naming a run: as tenant a, on b's ids and on ids no tenant ever held.
COMMANDS: list[tuple[str, ...]] = [
    ("show", "{id}", "--step", "0"),
    ("history", "{id}", "--json"),
    ("export", "{id}"),
    ("verify", "{id}"),
    ("fork", "{id}", "--new-id", "a-forked", "--json"),
    ("delete", "{id}", "--yes"),
    ("requeue", "{id}", "--json"),
    ("cancel", "{id}"),
]


def test_commands_on_b_run_ids_answer_as_for_ids_never_held(seeded: api.Seeded, b_unchanged: None) -> None:
    folder, url = seeded.path.parent, seeded.url
    probes = []
    for number, command in enumerate(COMMANDS):
        # every command on b's hostile id, the first two on a plain one of b's too
        for n, run_id in enumerate(PROBED if number < 2 else PROBED[1:]):
            never = f"never-{n}-" + run_id[::-1]
            for probed in (run_id, never):
                args = [part.replace("{id}", probed) for part in command]
                probes.append((command, run_id, probed, args))

    def probe(item: Any) -> tuple[int, str, str]:
        _command, _run_id, probed, args = item
        result = run(folder, "--tenant", "a", *args, "--store", url)
        return result.returncode, masked(result.stdout, probed), masked(result.stderr, probed)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(probe, probes))
    for index in range(0, len(probes), 2):
        command, run_id, _probed, _args = probes[index]
        got, expected = answers[index], answers[index + 1]
        assert got == expected, (command, run_id)
        assert got[0] != 0, (command, got)  # nothing succeeded on b's run
        assert "Traceback" not in got[2]


def test_gc_verify_stats_and_backup_as_a_see_only_a(
    seeded: api.Seeded, b_unchanged: None, tmp_path: Path
) -> None:
    folder, url = seeded.path.parent, seeded.url
    verified = run(folder, "--tenant", "a", "verify", "--store", url, "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["checked"] == len(A_RUNS)  # one checkpoint each
    gc = run(folder, "--tenant", "a", "gc", "--grace", "0s", "--store", url, "--json")
    assert gc.returncode == 0, gc.stderr
    assert seeded.b_digest not in gc.stdout
    stats = run(folder, "--tenant", "a", "stats", "--store", url, "--json")
    assert stats.returncode == 0, stats.stderr
    assert "b-" not in stats.stdout
    dest = tmp_path / "copies" / "a.db"
    backup = run(folder, "--tenant", "a", "backup", "--store", url, str(dest))
    assert backup.returncode == 0, backup.stderr
    with safepoint.open_store(api.url_of(dest), read_only=True) as copy:
        assert {info.run_id for info in copy.runs(limit=100)} == A_RUNS


def test_importing_fixtures_as_a_takes_nothing_of_b(
    seeded: api.Seeded, b_unchanged: None, tmp_path: Path
) -> None:
    folder, url = seeded.path.parent, seeded.url
    # a fixture of b's run naming b's blob (as stored: the blob's digest, not its value)
    with safepoint.open_store(url, tenant="b", read_only=True) as b:
        write_fixture(b.load("b-big", fetch_blobs=False), tmp_path / "b.json")
    never = hashlib.sha256(b"never stored by anyone").hexdigest()
    text = (tmp_path / "b.json").read_text()
    (tmp_path / "never.json").write_text(text.replace(seeded.b_digest, never))
    shown = []
    for name, digest in (("b.json", seeded.b_digest), ("never.json", never)):
        imported = run(folder, "--tenant", "a", "import", str(tmp_path / name), "--store", url, "--json")
        assert imported.returncode == 0, imported.stderr
        assert json.loads(imported.stdout)["run_id"] == "b-big"  # a's own new run, under b's id
        show = run(folder, "--tenant", "a", "show", "b-big", "--store", url)
        shown.append((show.returncode, masked(show.stderr, digest)))
        deleted = run(folder, "--tenant", "a", "delete", "b-big", "--yes", "--store", url)
        assert deleted.returncode == 0, deleted.stderr
    assert shown[0] == shown[1]
    assert shown[0][0] != 0
    assert "BlobNotFound" in shown[0][1] or "missing" in shown[0][1]


@pytest.mark.parametrize(
    ("where", "name"),
    [("group", "Acme"), ("command", "../x"), ("env", "a/b"), ("command", "a" * 64), ("group", "")],
)
def test_a_bad_tenant_name_is_a_one_line_error(seeded: api.Seeded, where: str, name: str) -> None:
    folder, url = seeded.path.parent, seeded.url
    for as_json in ((), ("--json",)):
        if where == "group":
            result = run(folder, "--tenant", name, "runs", "--store", url, *as_json)
        elif where == "command":
            result = run(folder, "runs", "--store", url, "--tenant", name, *as_json)
        else:
            result = run(folder, "runs", "--store", url, *as_json, env={"SAFEPOINT_TENANT": name})
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        if len(name) > 1:
            assert name not in result.stderr
        if as_json:
            assert json.loads(result.stderr)["type"] == "InvalidURL"
    assert sorted(p.name for p in (folder / "state.db.tenants").iterdir()) == [
        "a.db",
        "b.db",
        "b.db.blobs",
    ]


# --- the inspector


def test_the_inspector_of_tenant_a_shows_a_only(seeded: api.Seeded, b_unchanged: None) -> None:
    with safepoint.open_store(seeded.url, tenant="a", read_only=True) as store:
        web = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
        home = web.get("/")
        assert home.status_code == 200
        assert 'id="tenant">tenant a<' in home.text
        for run_id in A_RUNS:
            assert html.escape(run_id) in home.text
        assert "b-only" not in home.text
        assert "b-queued" not in home.text
        for n, run_id in enumerate(PROBED):
            never = f"never-{n}-" + run_id[::-1]
            for suffix in ("", "?step=0", "?a=0&b=1"):
                got = web.get(run_path(run_id) + suffix)
                expected = web.get(run_path(never) + suffix)
                assert got.status_code == expected.status_code == 404
                assert masked(got.text, run_id) == masked(expected.text, never)
            got_head = web.get("/api/head/" + run_path(run_id).removeprefix("/run/"))
            expected_head = web.get("/api/head/" + run_path(never).removeprefix("/run/"))
            assert (got_head.status_code, got_head.json()) == (
                expected_head.status_code,
                expected_head.json(),
            )
        # a run a holds under an id b holds too: a's
        shared = web.get(run_path(api.SHARED))
        assert shared.status_code == 200
        assert "alpha asks" in shared.text
        assert "bravo" not in shared.text
    with safepoint.open_store(seeded.url, read_only=True) as implicit:  # no tenant named
        page = TestClient(create_app(implicit), base_url="http://127.0.0.1:8765").get("/")
        assert 'id="tenant"' not in page.text
        assert "default-run" in page.text


def test_safepoint_ui_with_tenant_serves_that_tenant(seeded: api.Seeded, b_unchanged: None) -> None:
    port = served.free_port()
    proc = served.started(
        ["--store", seeded.url, "--tenant", "a", "--port", str(port)], seeded.path.parent, port
    )
    try:
        status, body = served.get(port, "/")
        assert status == 200
        assert 'id="tenant">tenant a<' in body
        assert "a-only" in body
        assert "b-only" not in body
        missing, page = served.get(port, run_path("b-only"))
        never, never_page = served.get(port, run_path("never-b-only"))
        assert missing == never == 404
        assert masked(page, "b-only") == masked(never_page, "never-b-only")
    finally:
        code, out, err = served.stopped(proc)
    assert code == 0, err
    assert "(tenant a, read-only)" in out
