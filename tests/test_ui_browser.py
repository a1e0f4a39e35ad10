"""The inspector in a real browser: Debian's headless Chromium, driven by Selenium through Debian's
chromium-driver (never a download), against a real uvicorn server over real SQLite and PostgreSQL
stores. Clicks runs -> run -> step -> diff, verifies, watches a live run, acts — with hostile text in
run ids, labels, messages and state, checked inert in the browser, not only in the HTML."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

import safepoint
from safepoint import Checkpoint, Store
from safepoint.ui import create_app
from safepoint.ui.paths import run_path

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
STATIC = Path(safepoint.__file__).resolve().parent / "ui" / "static"
# Debian's browser and driver, named outright; Selenium Manager is told it is offline besides, so it
# never fetches a driver or a browser whatever its version thinks it needs.
os.environ["SE_OFFLINE"] = "true"
# Each payload sets window.__pwned if it ever runs as markup or script.
PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '"><svg onload="window.__pwned = 3">',
    "</pre></li><b id=injected>bold</b>",
    "\x1b[31mred\x07 \u202eevil",
]
HOSTILE_ID = "<script>window.__pwned=4</script>/../?#x"


def browser_or_fail() -> None:
    if shutil.which(CHROMIUM) and shutil.which(DRIVER):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("Chromium and chromium-driver are missing: make system-deps installs them")
    pytest.skip("no Chromium here (make system-deps installs it)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """A real uvicorn server in a thread, on a free port."""

    def __init__(self, store: Store, **options: Any) -> None:
        self.port = free_port()
        self.app = create_app(store, port=self.port, **options)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    browser_or_fail()
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # the suite runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def filled(store: Store) -> None:
    """Runs as agents leave them: a hostile one, a long conversation, a budgeted run, a plain one."""
    cp = Checkpoint(run_id=HOSTILE_ID, labels={"team": PAYLOADS[0], "x": PAYLOADS[1]})
    cp.state = {"note": PAYLOADS[2], PAYLOADS[3]: 1}
    store.save(cp)
    for i, payload in enumerate(PAYLOADS):
        cp = cp.next()
        cp.messages.append({"role": "user", "content": payload})
        cp.messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"q": i})},
                    }
                ],
            }
        )
        cp.messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": payload})
        cp.counters["tokens_in"] = 10 * (i + 1)
        store.save(cp)
    plain = Checkpoint(run_id="plain-run", counters={"budget_tokens": 100, "tokens_in": 40})
    store.save(plain)
    for i in range(3):
        plain = plain.next()
        plain.messages.append({"role": "user", "content": f"question {i}"})
        store.save(plain)


def no_injection(driver: Any) -> None:
    assert driver.execute_script("return window.__pwned === undefined"), "a stored string ran"
    assert not driver.find_elements(By.ID, "injected"), "stored markup became an element"


def wait_for(driver: Any, condition: Callable[[Any], Any], seconds: float = 20) -> Any:
    # A page may be replaced while it is polled (a form's redirect): look again, as a user would.
    ignored = (StaleElementReferenceException, NoSuchElementException)

    def again_if_replaced(d: Any) -> Any:
        try:
            return condition(d)
        except WebDriverException as exc:
            # chromedriver's other word for an element of a page just replaced (not a stale-element error)
            if "does not belong to the document" in str(exc):
                return False
            raise

    waiting = WebDriverWait(driver, seconds, poll_frequency=0.1, ignored_exceptions=ignored)
    return waiting.until(again_if_replaced)


def click_through(driver: Any, base: str, store: Store, shots: Path) -> None:
    driver.get(base + "/")
    no_injection(driver)
    links = {a.text: a for a in driver.find_elements(By.CSS_SELECTOR, "a.run-link")}
    assert HOSTILE_ID in links, list(links)
    labels = " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".label"))
    assert PAYLOADS[0] in labels  # shown as text
    driver.save_screenshot(str(shots / "runs.png"))
    links[HOSTILE_ID].click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "run-id"))
    assert driver.find_element(By.ID, "run-id").text == HOSTILE_ID
    assert driver.find_element(By.ID, "head-step").text == str(len(PAYLOADS))
    assert driver.find_elements(By.CSS_SELECTOR, ".chart polyline")
    no_injection(driver)
    driver.save_screenshot(str(shots / "run.png"))
    driver.find_element(By.CSS_SELECTOR, "a.step-link").click()  # the newest step
    wait_for(driver, lambda d: d.find_elements(By.ID, "conversation"))
    texts = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#conversation .text")]
    for payload in PAYLOADS[:4]:
        assert any(payload in t for t in texts), payload
    assert any("lookup" in t for t in texts)  # the tool call, shown with its arguments
    assert not driver.find_elements(By.CSS_SELECTOR, "#conversation img, #conversation svg, #conversation b")
    driver.find_element(By.CSS_SELECTOR, "#field-state summary").click()
    state = driver.find_element(By.CSS_SELECTOR, "#field-state pre").text
    assert "<svg onload=" in state  # as JSON text (its quotes escaped), never an element
    assert PAYLOADS[3] in state
    no_injection(driver)
    driver.save_screenshot(str(shots / "step.png"))
    driver.get(base + run_path(HOSTILE_ID))
    driver.find_element(By.CSS_SELECTOR, "a.diff-link").click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "shared"))
    added = driver.find_element(By.ID, "messages-diff").text
    assert PAYLOADS[-1][:5] in added or "red" in added
    no_injection(driver)
    driver.save_screenshot(str(shots / "diff.png"))
    driver.get(base + run_path(HOSTILE_ID))
    driver.find_element(By.ID, "verify-run").click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "verified"))
    assert driver.find_element(By.ID, "verified").text.startswith(
        f"{len(PAYLOADS) + 1} checkpoints checked, 0 failed"
    )
    driver.get(base + "/verify")
    driver.find_element(By.ID, "verify-all").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "verify-done").text == "2")
    assert driver.find_element(By.ID, "verify-failed").text == "0"


def live_update(driver: Any, base: str, store: Store) -> None:
    """A new checkpoint shows on the open run page by itself, no reload.

    Within 2 seconds by construction: the page asks for its head every ``POLL_MS`` (checked below
    to be at most a second) and then fetches itself once. The wait is longer, so a loaded CI
    machine cannot fail the test: no timing assertion."""
    poll = re.search(r"const POLL_MS = (\d+);", (STATIC / "live.js").read_text(encoding="utf-8"))
    assert poll is not None
    assert int(poll.group(1)) <= 1000
    driver.get(base + run_path("plain-run"))
    driver.execute_script("window.__same_page = true")
    cp = store.load("plain-run").next()
    cp.messages.append({"role": "user", "content": "a new step"})
    store.save(cp)
    wait_for(driver, lambda d: d.find_element(By.ID, "head-step").text == str(cp.step), 20)
    assert driver.execute_script("return window.__same_page === true")  # no reload happened


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_click_through_every_page_with_hostile_text(
    browser: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = store_url(tmp_path, backend, request)
    writer = safepoint.open_store(url)
    filled(writer)
    reader = safepoint.open_store(url, read_only=True)
    served = Served(reader)
    # make screenshots sets SAFEPOINT_SCREENSHOTS to docs/images: the pictures docs/ui.md shows.
    wanted = os.environ.get("SAFEPOINT_SCREENSHOTS")
    shots = Path(wanted) if wanted and backend == "sqlite" else tmp_path / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        click_through(browser, served.base, writer, shots)
        live_update(browser, served.base, writer)
    finally:
        served.stop()
        reader.close()
        writer.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_actions_answer_cancel_and_requeue_from_the_page(
    browser: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = store_url(tmp_path, backend, request)
    store = safepoint.open_store(url)
    filled(store)
    asking = safepoint.Run.start(store, "asks")
    asking.wait_for_input(PAYLOADS[1])
    served = Served(store, allow_actions=True)
    try:
        browser.get(served.base + run_path("asks"))
        assert PAYLOADS[1] in browser.find_element(By.ID, "question").text  # the question, as text
        no_injection(browser)
        browser.find_element(By.ID, "answer-value").send_keys("yes, <b>go</b>")
        browser.find_element(By.ID, "answer").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "status").text == "running")
        assert store.run("asks").status.value == "running"
        browser.get(served.base + run_path("plain-run"))
        browser.find_element(By.ID, "cancel").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "confirm-cancel"))  # cancel asks first
        browser.find_element(By.ID, "confirm-cancel").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "status").text == "cancelled")
        assert store.run("plain-run").status.value == "cancelled"
        browser.get(served.base + run_path(HOSTILE_ID))  # its id is hostile: the form carries it back
        before = browser.find_element(By.ID, "run-id")
        browser.find_element(By.ID, "requeue").click()
        wait_for(browser, staleness_of(before))  # the form's answer has replaced the page
        wait_for(browser, lambda d: d.find_element(By.ID, "run-id").text == HOSTILE_ID)
        assert store.queue_state(HOSTILE_ID).queued
        no_injection(browser)
    finally:
        served.stop()
        store.close()


def store_url(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    dsn, schema = request.getfixturevalue("postgres_dsn"), request.getfixturevalue("pg_schema")
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def test_the_token_is_traded_for_a_cookie_and_leaves_the_address(browser: Any, tmp_path: Path) -> None:
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db")
    filled(store)
    token = "t0ken-" + "x" * 20
    served = Served(store, token=token)
    try:
        browser.delete_all_cookies()
        browser.get(served.base + "/")
        assert "needs its token" in browser.find_element(By.TAG_NAME, "body").text
        browser.get(served.base + "/?token=" + token)
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "a.run-link"))
        assert "token" not in browser.current_url
        browser.get(served.base + run_path("plain-run"))
        assert browser.find_element(By.ID, "run-id").text == "plain-run"  # the cookie carries on
    finally:
        browser.delete_all_cookies()
        served.stop()
        store.close()


def adapter_written(store: Store) -> None:
    """A LangGraph thread (SafepointSaver) and an OpenAI Agents session, hostile text in both."""
    import asyncio  # noqa: PLC0415

    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    from safepoint.adapters.langgraph import SafepointSaver  # noqa: PLC0415
    from safepoint.adapters.openai_agents import SafepointSession  # noqa: PLC0415
    from test_adapter_langgraph import build_chat_graph  # noqa: PLC0415

    graph = build_chat_graph(SafepointSaver(store), fan_out=True)
    config = {"configurable": {"thread_id": "thread-<b>1</b>"}}
    graph.invoke({"messages": [HumanMessage(content=PAYLOADS[1])], "notes": [PAYLOADS[0]]}, config)

    async def session() -> None:
        items = [{"role": "user", "content": PAYLOADS[2]}, {"role": "assistant", "content": "hello"}]
        await SafepointSession("session-9", store).add_items(items)  # type: ignore[arg-type]

    asyncio.run(session())


def test_runs_the_adapters_wrote_show_in_their_frameworks_terms(browser: Any, tmp_path: Path) -> None:
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db")
    adapter_written(store)
    served = Served(store)
    try:
        browser.get(served.base + "/")
        links = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.run-link")]
        thread = next(t for t in links if t.startswith("langgraph/") and "1" in t)
        browser.get(served.base + run_path(thread))
        assert "LangGraph thread" in browser.find_element(By.ID, "framework").text
        assert "thread-<b>1</b>" in browser.find_element(By.ID, "framework").text
        browser.find_element(By.CSS_SELECTOR, "a.step-link").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "conversation"))
        channels = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, ".channel"))
        assert "notes" in channels
        assert PAYLOADS[0] in channels  # the notes channel, as text
        conversation = browser.find_element(By.ID, "conversation").text
        assert PAYLOADS[1] in conversation
        assert "reply 0" in conversation
        no_injection(browser)
        session = next(t for t in links if "session-9" in t)
        browser.get(served.base + run_path(session))
        assert "OpenAI Agents SDK session" in browser.find_element(By.ID, "framework").text
        browser.find_element(By.CSS_SELECTOR, "a.step-link").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "conversation"))
        assert PAYLOADS[2] in browser.find_element(By.ID, "conversation").text
        no_injection(browser)
    finally:
        served.stop()
        store.close()
