"""Go back and try again, in a real browser: the step page's fork form (``safepoint ui --allow-actions``)
forks a run at a step with an edit — the last message rewritten, a state key set — and queues the
fork for workers, on SQLite, PostgreSQL and an encrypted store; an adapter's run forks without
requeue and the page says why; the form is refused without its token, from another site, and read
only. The parent's step is checked unchanged by its digest, the queue by a claim (no worker), and
hostile text in the edit is checked inert on the fork's pages.

One Chromium session for the module (the fixture below); the server, the driver and the helpers are
test_ui_browser's."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

import safepoint
from safepoint import Run, Store
from safepoint.ui.paths import run_path
from test_ui_browser import PAYLOADS, Served, browser, no_injection, store_url, wait_for

__all__ = ["browser"]  # the module's own Chromium session: the fixture, module-scoped, used here

FORK_ID = "fork-<script>window.__pwned=6</script>/../?#x"
EDIT = PAYLOADS[1] + "\nand a second line " + PAYLOADS[0]


def agent(store: Store, run_id: str) -> None:
    """A Run-written run of 3 steps (0..2), still running: its plan in its state, a conversation."""
    run = Run.start(store, run_id, state={"plan": "a"}, messages=[{"role": "user", "content": "refund 42"}])
    for n in range(2):
        run.append({"role": "assistant", "content": f"thinking {n}"})
        run.commit()
    run.close()


def digest(store: Store, run_id: str, step: int) -> str:
    return next(i.digest for i in store.history(run_id) if i.step == step)


def fill_fork_form(driver: Any, *, new_id: str, last_message: str, key: str, value: Any) -> None:
    driver.find_element(By.ID, "fork-new-id").send_keys(new_id)
    driver.find_element(By.ID, "fork-last-message").send_keys(last_message)
    if key:
        driver.find_element(By.ID, "fork-state-key").send_keys(key)
        driver.find_element(By.ID, "fork-state-value").send_keys(json.dumps(value))


def open_store(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Store:
    if backend == "encrypted":
        from test_encryption import keyring  # noqa: PLC0415

        return safepoint.open_store(f"sqlite:///{tmp_path}/sealed.db", encryption=keyring())
    return safepoint.open_store(store_url(tmp_path, backend, request))


@pytest.fixture(params=["sqlite", "postgresql", "encrypted"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path, backend, request) as opened:
        yield opened


def screenshot(driver: Any, backend: str, name: str) -> None:
    """With SAFEPOINT_SCREENSHOTS set (make screenshots: docs/images), the SQLite case's page saved there."""
    wanted = os.environ.get("SAFEPOINT_SCREENSHOTS")
    if wanted and backend == "sqlite":
        driver.save_screenshot(str(Path(wanted) / name))


def test_fork_at_a_step_with_an_edit_and_requeue_leaves_the_parent_untouched(
    browser: Any, backend: str, store: Store
) -> None:
    """Step 1's form: a rewritten last message and a state key (hostile text in both, and in the fork's
    id), requeued: the fork's step 2 holds the edit and shows it inert, the parent's step 1 keeps its
    digest, and a claim with no worker running takes the fork. A second fork, state only, stays out of
    the queue."""
    agent(store, "agent")
    before, parent = digest(store, "agent", 1), store.load("agent", 1)
    served = Served(store, allow_actions=True)
    try:
        browser.get(served.base + run_path("agent", step=1))
        assert browser.find_element(By.ID, "fork-requeue")  # a Run's run: requeue offered
        assert not browser.find_elements(By.ID, "fork-no-requeue")
        fill_fork_form(browser, new_id=FORK_ID, last_message=EDIT, key=PAYLOADS[3], value=PAYLOADS[2])
        browser.find_element(By.ID, "fork-requeue").click()
        screenshot(browser, backend, "fork-form.png")
        browser.find_element(By.ID, "fork").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "run-id").text == FORK_ID)  # the fork's page
        assert browser.find_element(By.ID, "head-step").text == "2"
        assert "agent step 1" in browser.find_element(By.TAG_NAME, "main").text  # forked from
        no_injection(browser)
        browser.find_element(By.CSS_SELECTOR, "a.step-link").click()  # the newest: the edit
        wait_for(browser, lambda d: d.find_element(By.ID, "step").text == "2")
        texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#conversation .text")]
        assert texts[-1] == EDIT  # as typed, as text (the browser's CRLF back to a line break)
        assert texts[:-1] == ["refund 42"]  # step 1 saw two messages: "thinking 0" was the last
        browser.find_element(By.CSS_SELECTOR, "#field-state summary").click()
        state = browser.find_element(By.CSS_SELECTOR, "#field-state pre").text
        assert PAYLOADS[3] in state
        assert "<svg onload=" in state
        assert not browser.find_elements(By.CSS_SELECTOR, "#conversation img, #conversation b, svg[onload]")
        no_injection(browser)
        screenshot(browser, backend, "fork.png")

        browser.get(served.base + run_path("agent", step=1))
        fill_fork_form(browser, new_id="plan-b", last_message="", key="plan", value={"try": 2})
        browser.find_element(By.ID, "fork").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "run-id").text == "plan-b")
        assert "not queued" in browser.find_element(By.ID, "live").text
    finally:
        served.stop()
    assert digest(store, "agent", 1) == before  # by reference: the parent's step untouched
    assert store.load("agent", 1).to_dict() == parent.to_dict()
    assert store.run("agent").head_step == 2
    assert [i.step for i in store.history(FORK_ID)] == [1, 2]
    edited = store.load(FORK_ID)
    assert edited.parent is not None
    assert (edited.parent.run_id, edited.parent.step) == ("agent", 1)
    assert edited.state == {"plan": "a", PAYLOADS[3]: PAYLOADS[2]}
    assert edited.messages == [*parent.messages[:-1], {**parent.messages[-1], "content": EDIT}]
    assert store.load("plan-b").state == {"plan": {"try": 2}}
    assert store.load("plan-b").messages == parent.messages
    assert store.queue_state(FORK_ID).queued
    assert not store.queue_state("plan-b").queued
    lease = store.claim("no-worker")  # what a worker would do first: the fork is the one queued
    assert lease is not None
    assert lease.run_id == FORK_ID
    assert store.claim("no-worker-2") is None


def test_an_adapter_run_forks_without_requeue_and_the_page_says_so(browser: Any, tmp_path: Path) -> None:
    """An OpenAI Agents session (the real adapter): the form offers no requeue and says its framework
    resumes the fork; the fork is made with the rewritten message and is not queued. A Run's done
    step offers no requeue either, and says why."""
    from safepoint.adapters.openai_agents import SafepointSession  # noqa: PLC0415

    with safepoint.open_store(f"sqlite:///{tmp_path}/state.db") as store:
        items = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        asyncio.run(SafepointSession("session-9", store).add_items(items))  # type: ignore[arg-type]
        (session,) = (r.run_id for r in store.runs().items)
        done = Run.start(store, "done-run", messages=[{"role": "user", "content": "go"}])
        done.finish()
        done.close()
        served = Served(store, allow_actions=True)
        try:
            browser.get(served.base + run_path(session, step=0))
            assert not browser.find_elements(By.ID, "fork-requeue")
            note = browser.find_element(By.ID, "fork-no-requeue").text
            assert "openai-agents adapter" in note
            assert "its framework resumes it" in note
            fill_fork_form(browser, new_id="session-fork", last_message=PAYLOADS[2], key="", value=None)
            browser.find_element(By.ID, "fork").click()
            wait_for(browser, lambda d: d.find_element(By.ID, "run-id").text == "session-fork")
            assert "not queued" in browser.find_element(By.ID, "live").text
            no_injection(browser)
            browser.get(served.base + run_path("done-run", step=1))
            assert not browser.find_elements(By.ID, "fork-requeue")
            assert "nothing for a worker to run" in browser.find_element(By.ID, "fork-no-requeue").text
            token = browser.find_element(By.NAME, "form_token").get_attribute("value")
            with httpx.Client(base_url=served.base) as client:  # a form made by hand asks for requeue
                for run_id, step, why in ((session, 0, "framework resumes it"), ("done-run", 1, "is done")):
                    form = {"run_id": run_id, "step": str(step), "requeue": "1", "new_id": "queued-fork"}
                    refused = client.post("/act", data={**form, "action": "fork", "form_token": token})
                    assert refused.status_code == 400
                    assert why in refused.text
        finally:
            served.stop()
        forked = store.load("session-fork")
        assert forked.step == 1
        assert forked.messages == [items[0], {**items[1], "content": PAYLOADS[2]}]
        assert forked.labels["safepoint.adapter"] == "openai-agents"
        assert not store.queue_state("session-fork").queued
        assert store.claim("no-worker") is None
        assert {r.run_id for r in store.runs().items} == {session, "done-run", "session-fork"}


def test_the_fork_form_is_refused_without_its_token_from_another_site_and_when_read_only(
    browser: Any, tmp_path: Path
) -> None:
    """POSTs to /act with no form token or a foreign Origin are refused (403) and fork nothing, where
    the same form with both forks; a read-only inspector shows no fork form and has no /act."""
    with safepoint.open_store(f"sqlite:///{tmp_path}/state.db") as store:
        agent(store, "agent")
        served = Served(store, allow_actions=True)
        try:
            browser.get(served.base + run_path("agent", step=1))
            token = browser.find_element(By.NAME, "form_token").get_attribute("value")
            form = {"run_id": "agent", "action": "fork", "step": "1", "last_message": "x"}
            with httpx.Client(base_url=served.base) as client:
                no_token = client.post("/act", data={**form, "new_id": "f1"})
                foreign = client.post(
                    "/act",
                    data={**form, "new_id": "f2", "form_token": token},
                    headers={"Origin": "http://evil.example"},
                )
                assert (no_token.status_code, foreign.status_code) == (403, 403)
                assert {r.run_id for r in store.runs().items} == {"agent"}
                same = client.post(
                    "/act",
                    data={**form, "new_id": "f3", "form_token": token},
                    headers={"Origin": served.base},
                )
                assert same.status_code == 303  # the same form from this site forks
                bad = {**form, "new_id": "f4", "form_token": token, "state_key": "k", "state_value": "{no"}
                assert "must be JSON" in client.post("/act", data=bad).text  # an error page, no fork
                assert {r.run_id for r in store.runs().items} == {"agent", "f3"}
        finally:
            served.stop()
        reader = Served(store)
        try:
            browser.get(reader.base + run_path("agent", step=1))
            assert browser.find_element(By.ID, "step").text == "1"
            assert not browser.find_elements(By.ID, "fork-form")
            with httpx.Client(base_url=reader.base) as client:
                refused = client.post("/act", data={"run_id": "agent", "action": "fork", "step": "1"})
            assert refused.status_code in (404, 405)
        finally:
            reader.stop()
        assert {r.run_id for r in store.runs().items} == {"agent", "f3"}
