"""The inspector's guard and pages over HTTP (Starlette's test client, a real SQLite store): the Host
check against DNS rebinding, the token, cross-site writes, no CORS, read-only unless actions are
allowed, any run id in a URL, hostile text escaped in the HTML, and errors as pages, never tracebacks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import safepoint
from safepoint import Checkpoint, Store
from safepoint.ui import create_app
from safepoint.ui.paths import run_path

BASE = "http://127.0.0.1:8765"
IDS = [
    "a/b",
    "..",
    ".",
    "?x=1",
    "#frag",
    "%2e%2e",
    "~",
    "<script>alert(1)</script>",
    "sp ace/../..",
    "é\u202e",
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with safepoint.open_store(f"sqlite:///{tmp_path}/state.db") as opened:
        for run_id in IDS:
            cp = Checkpoint(run_id=run_id, labels={"l": "<i>x</i>"})
            cp.messages.append({"role": "user", "content": "<script>alert('m')</script>"})
            opened.save(cp)
            opened.save(cp.next())
        yield opened


def client(store: Store, base: str = BASE, **options: object) -> TestClient:
    return TestClient(create_app(store, **options), base_url=base)  # type: ignore[arg-type]


def form_token(page: str) -> str:
    found = re.search(r'name="form_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("run_id", IDS)
def test_every_run_id_has_a_url_that_names_it(store: Store, run_id: str) -> None:
    path = run_path(run_id)
    assert "/" not in path[len("/run/") :]  # one segment, whatever the id holds
    page = client(store).get(path)
    assert page.status_code == 200, page.text
    assert "<script>alert" not in page.text
    step = client(store).get(run_path(run_id, step=1))
    assert step.status_code == 200
    assert "&lt;script&gt;alert(&#39;m&#39;)&lt;/script&gt;" in step.text


def test_another_host_is_refused_so_dns_rebinding_reads_nothing(store: Store) -> None:
    for base in ("http://evil.example:8765", "http://127.0.0.1.evil.example:8765", "http://127.0.0.1:9999"):
        answer = client(store, base).get("/")
        assert answer.status_code == 421
        assert "l=" not in answer.text
    assert client(store, "http://localhost:8765").get("/").status_code == 200
    named = client(store, "http://inspector.internal:8765", allowed_hosts=("inspector.internal",))
    assert named.get("/").status_code == 200


def test_no_cors_and_a_strict_policy_on_every_answer(store: Store) -> None:
    for path in ("/", run_path(IDS[0]), "/verify", "/static/ui.css", "/nowhere"):
        answer = client(store).get(path, headers={"Origin": "http://evil.example"})
        assert not any(name.lower().startswith("access-control-") for name in answer.headers), path
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        assert answer.headers["x-frame-options"] == "DENY"


def test_a_token_is_needed_off_loopback_and_becomes_a_cookie(store: Store) -> None:
    token = "s3cret-" + "y" * 20
    web = client(store, token=token)
    assert web.get("/").status_code == 401
    assert web.get("/?token=wrong").status_code == 401
    traded = web.get(f"{run_path('a/b')}?token={token}&step=1", follow_redirects=False)
    assert traded.status_code == 303
    assert "token" not in traded.headers["location"]
    assert traded.headers["location"].startswith("/run/~a%2Fb")
    assert "HttpOnly" in traded.headers["set-cookie"]
    assert "SameSite=Strict" in traded.headers["set-cookie"]
    assert web.get(traded.headers["location"]).status_code == 200  # the cookie carries on


def test_writes_need_the_form_token_and_this_origin(store: Store) -> None:
    web = client(store, allow_actions=True)
    token = form_token(web.get(run_path("a/b")).text)
    assert web.post("/act", data={"run_id": "a/b", "action": "cancel"}).status_code == 403
    assert web.post("/act", data={"run_id": "a/b", "action": "cancel", "form_token": "x"}).status_code == 403
    refused = web.post(
        "/act",
        data={"run_id": "a/b", "action": "cancel", "form_token": token},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403
    assert store.run("a/b").status.value == "running"
    asked = web.post(
        "/act", data={"run_id": "a/b", "action": "cancel", "form_token": token}, headers={"Origin": BASE}
    )
    assert asked.status_code == 200
    assert 'id="confirm-cancel"' in asked.text  # cancel asks first: nothing done yet
    assert store.run("a/b").status.value == "running"
    confirmed = {"run_id": "a/b", "action": "cancel", "form_token": token, "confirm": "yes"}
    done = web.post("/act", data=confirmed, headers={"Origin": BASE})
    assert done.status_code == 200
    assert store.run("a/b").status.value == "cancelled"


def test_actions_do_not_exist_unless_allowed(store: Store) -> None:
    web = client(store)
    token = form_token(web.get(run_path("a/b")).text)
    answer = web.post("/act", data={"run_id": "a/b", "action": "cancel", "form_token": token})
    assert answer.status_code in (404, 405)
    assert store.run("a/b").status.value == "running"
    assert 'action="/act"' not in web.get(run_path("a/b")).text


def test_errors_are_pages_without_tracebacks(store: Store) -> None:
    web = client(store)
    for path in (run_path("missing"), run_path("a/b", step=99), run_path("a/b", step="x"), "/run/no-mark"):
        answer = web.get(path)
        assert answer.status_code in (400, 404), path
        assert "Traceback" not in answer.text
        assert 'id="error"' in answer.text


def test_a_step_page_of_a_long_conversation_is_paged(store: Store) -> None:
    cp = Checkpoint(run_id="long", messages=[{"role": "user", "content": f"m{i}"} for i in range(450)])
    store.save(cp)
    web = client(store)
    first = web.get(run_path("long", step=0)).text
    assert ">m0<" in first
    assert ">m200<" not in first
    assert "page 1 of 3" in first
    last = web.get(run_path("long", step=0, page=3)).text
    assert ">m449<" in last


def test_a_waiting_run_shows_its_question_and_takes_an_answer(store: Store) -> None:
    run = safepoint.Run.start(store, "asks")
    run.wait_for_input("<b>approve</b> the refund?")
    web = client(store, allow_actions=True)
    page = web.get(run_path("asks")).text
    assert "&lt;b&gt;approve&lt;/b&gt; the refund?" in page
    assert 'id="answer"' in page
    done = web.post(
        "/act",
        data={"run_id": "asks", "action": "answer", "value": "yes", "form_token": form_token(page)},
        headers={"Origin": BASE},
    )
    assert done.status_code == 200
    assert store.run("asks").status.value == "running"
    again = web.post(
        "/act",
        data={"run_id": "asks", "action": "answer", "value": "yes", "form_token": form_token(page)},
        headers={"Origin": BASE},
    )
    assert again.status_code == 400  # only a waiting run takes an answer: said on the page
    assert "Traceback" not in again.text


def test_an_encrypted_store_is_shown_with_its_key(tmp_path: Path) -> None:
    from test_encryption import keyring  # noqa: PLC0415

    url = f"sqlite:///{tmp_path}/sealed.db"
    with safepoint.open_store(url, encryption=keyring()) as sealed:
        cp = Checkpoint(run_id="secret-run", messages=[{"role": "user", "content": "sealed words"}])
        sealed.save(cp)
        sealed.save(cp.next())
    with safepoint.open_store(url, encryption=keyring(), read_only=True) as reader:
        web = client(reader)
        assert "secret-run" in web.get("/").text
        assert "sealed words" in web.get(run_path("secret-run", step=1)).text
        assert web.get(run_path("secret-run")).status_code == 200


def test_the_runs_page_counts_by_status_and_shows_the_queue(store: Store) -> None:
    store.enqueue("a/b")
    lease = store.claim("worker-1", lease=10)
    assert lease is not None
    store.cancel("..")
    page = client(store).get("/").text
    assert re.search(rf'id="count-running">\s*{len(IDS) - 1}<', page)
    assert re.search(r'id="count-cancelled">\s*1<', page)
    assert re.search(r'id="leased">\s*1<', page)
    assert re.search(r'id="expiring">\s*1<', page)  # 10 s left: within the 30 s shown


def test_a_run_page_links_its_forks_and_the_fork_its_parent(store: Store) -> None:
    store.fork("a/b", 0, new_run_id="fork-<1>")
    web = client(store)
    parent = web.get(run_path("a/b")).text
    assert 'id="forks"' in parent
    assert "fork-&lt;1&gt;" in parent
    assert run_path("fork-<1>") in parent
    child = web.get(run_path("fork-<1>")).text
    assert "forked from" in child
    assert store.forks("a/b")[0].step == 0


def test_run_id_prefix_search_covers_the_store_and_wildcards_are_data(store: Store) -> None:
    for run_id in ("job-1", "job_2", "job%3", "jobless"):
        store.save(Checkpoint(run_id=run_id))
    assert [r.run_id for r in store.runs(run_id_prefix="job%").items] == ["job%3"]
    assert {r.run_id for r in store.runs(run_id_prefix="job").items} == {"job-1", "job_2", "job%3", "jobless"}
    page = client(store).get("/?prefix=job_").text
    assert "job_2" in page
    assert "job-1" not in page


def test_a_long_runs_steps_are_paged_newest_first(store: Store) -> None:
    cp = Checkpoint(run_id="many")
    store.save(cp)
    for _ in range(120):
        cp = cp.next()
        store.save(cp)
    web = client(store)
    first = web.get(run_path("many")).text
    assert "steps page 1 of 2" in first  # the newest 100 a page
    assert run_path("many", step=120).replace("&", "&amp;") in first
    assert run_path("many", step=21).replace("&", "&amp;") in first
    assert run_path("many", step=20).replace("&", "&amp;") not in first
    last = web.get(run_path("many", steps=2)).text
    assert run_path("many", step=0).replace("&", "&amp;") in last
