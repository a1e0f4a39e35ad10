"""A run reads like a conversation, in a real browser (issue 36, item 1): chat bubbles by role, tool
calls and their results as cards linked by call id, the pending action and the human's question where
they stand, each step's summary (messages, tool calls, tokens, spend, time) on the run page, prev /
next between steps, and a side-by-side coloured diff of any two steps.

A ``Run``-written run on SQLite, PostgreSQL and an encrypted store; a LangGraph run made by a real
``StateGraph`` with a ``ToolNode`` and an offline scripted chat model, its call journal on; a long run
and a long conversation for the pagers; hostile text (scripts, handlers, markup, control characters) in
the run id, the messages, a tool's name, arguments, call id and result, checked inert in the browser.

One Chromium session for the module (the fixture below); the server, the driver and the helpers are
test_ui_browser's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

import safepoint
from safepoint import Checkpoint, Run, Store
from safepoint.ui.paths import run_path
from test_ui_browser import PAYLOADS, Served, browser, no_injection, store_url, wait_for

__all__ = ["browser"]  # the module's own Chromium session: the fixture, module-scoped, used here

RUN_ID = "chat-<script>window.__pwned=7</script>/../?#x"
CALL_ID = 'call-"><img src=x onerror="window.__pwned=8">\x1b[2J'
TOOL = "look<b id=injected>up</b>"


def open_store(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Store:
    if backend == "encrypted":
        from test_encryption import keyring  # noqa: PLC0415

        return safepoint.open_store(f"sqlite:///{tmp_path}/sealed.db", encryption=keyring())
    return safepoint.open_store(store_url(tmp_path, backend, request))


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path, request.param, request) as opened:
        yield opened


def screenshot(driver: Any, backend: str, name: str) -> None:
    """With SAFEPOINT_SCREENSHOTS set (make screenshots: docs/images), the SQLite case's page saved there."""
    wanted = os.environ.get("SAFEPOINT_SCREENSHOTS")
    if wanted and backend == "sqlite":
        driver.save_screenshot(str(Path(wanted) / name))


def run_written(store: Store) -> None:
    """A Run's conversation: a question, a tool call, the action taken (saved pending first), its
    result, usage, and a question for a human (the run waits) — hostile text all through."""
    run = Run.start(store, RUN_ID, messages=[{"role": "user", "content": PAYLOADS[0]}])
    call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": TOOL, "arguments": json.dumps({"q": PAYLOADS[2]})},
    }
    run.append({"role": "assistant", "content": None, "tool_calls": [call]})
    run.add_usage(tokens_in=120, tokens_out=30, spend=0.25)
    run.commit()  # step 1
    found = run.action(TOOL, {"q": PAYLOADS[2]}, lambda key: "found " + PAYLOADS[3])  # step 2, pending
    run.append({"role": "tool", "tool_call_id": CALL_ID, "content": found})
    run.append({"role": "assistant", "content": "shall I go on? " + PAYLOADS[1]})
    run.add_usage(tokens_in=200, tokens_out=50, spend=0.5)
    run.commit()  # step 3
    run.wait_for_input("go on? " + PAYLOADS[4])  # step 4, waiting
    run.close()


def cells(driver: Any, step: int) -> dict[str, str]:
    """The summary row of ``step`` on the open run page: its cells by class."""
    for row in driver.find_elements(By.CSS_SELECTOR, "#steps tr.step"):
        if row.find_element(By.CSS_SELECTOR, "a.step-link").text == str(step):
            names = ("took", "added", "tool-calls", "tokens", "spend", "step-pending")
            return {name: row.find_element(By.CSS_SELECTOR, f"td.{name}").text for name in names}
    raise AssertionError(f"no row for step {step}")


def pairs(driver: Any, list_id: str) -> list[tuple[str, str]]:
    """Every call card in the list, followed to its result through its link: (call id, result text)."""
    found = []
    for card in driver.find_elements(By.CSS_SELECTOR, f"#{list_id} .card-call"):
        call_id = card.find_element(By.CSS_SELECTOR, ".call-id").text
        target = card.find_element(By.CSS_SELECTOR, "a.pair").get_attribute("href").rsplit("#", 1)[1]
        result = driver.find_element(By.ID, target).find_element(By.CSS_SELECTOR, ".card-result")
        assert result.find_element(By.CSS_SELECTOR, ".call-id").text == call_id
        back = result.find_element(By.CSS_SELECTOR, "a.pair").get_attribute("href").rsplit("#", 1)[1]
        assert driver.find_element(By.ID, back).find_element(By.CSS_SELECTOR, ".card-call")  # and back
        found.append((call_id, result.find_element(By.CSS_SELECTOR, ".card-body").text))
    return found


@pytest.mark.parametrize("store", ["sqlite", "postgresql", "encrypted"], indirect=True)
def test_a_runs_conversation_its_steps_and_its_pending_question(
    browser: Any, store: Store, request: Any
) -> None:
    """A Run's run page: each step's summary from the timeline, the head's conversation as bubbles with
    the call card linked to its result by the (hostile) call id, the question where the run stopped; its
    step pages link to each other; all of it inert."""
    backend = request.node.callspec.params["store"]
    run_written(store)
    served = Served(store)
    try:
        browser.get(served.base + run_path(RUN_ID))
        assert browser.find_element(By.ID, "run-id").text == RUN_ID
        one, two, three = cells(browser, 1), cells(browser, 2), cells(browser, 3)
        assert (one["added"], one["tokens"], one["spend"]) == ("+1", "+150", "+0.25")
        assert two["step-pending"].startswith("action " + TOOL)  # saved before the tool ran
        assert two["tool-calls"] == "0"
        assert (three["added"], three["tool-calls"], three["tokens"], three["spend"]) == (
            "+2",
            "+1",
            "+250",
            "+0.5",
        )
        shown = "go on? \\x1b[31mred\\x07 \\u202eevil"  # control and bidi characters as escapes
        assert shown in cells(browser, 4)["step-pending"]  # the question, where it was asked
        assert cells(browser, 0)["took"] == "-"
        assert cells(browser, 4)["took"].endswith(("ms", "s"))
        bubbles = browser.find_elements(By.CSS_SELECTOR, "#chat > li.message")
        assert [b.get_attribute("class").split()[1] for b in bubbles] == [
            "side-user", "side-assistant", "side-tool", "side-assistant",
        ]  # fmt: skip
        assert [b.find_element(By.CSS_SELECTOR, ".role").text for b in bubbles] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert bubbles[0].find_element(By.CSS_SELECTOR, ".said").text == PAYLOADS[0]
        call = browser.find_element(By.CSS_SELECTOR, "#chat .card-call")
        assert call.find_element(By.CSS_SELECTOR, ".tool").text == TOOL
        assert "<svg onload=" in call.find_element(By.CSS_SELECTOR, ".card-body").text  # a quoted argument
        (call_id, result), *more = pairs(browser, "chat")
        assert not more
        assert call_id == CALL_ID.replace("\x1b", "\\x1b")  # the hostile id, as text, its escape shown
        assert result == "found " + PAYLOADS[3]
        asks = browser.find_element(By.ID, "chat-pending")
        assert "waiting for a human" in asks.text.lower()
        assert shown in asks.text
        no_injection(browser)
        steps = browser.find_element(By.ID, "steps")
        browser.execute_script("arguments[0].scrollIntoView()", steps)  # the steps and the conversation
        screenshot(browser, backend, "conversation-run.png")

        browser.find_element(By.CSS_SELECTOR, "#chat .card-call a.pair").click()  # to the result, same page
        assert browser.current_url.endswith("#m-2")
        browser.get(served.base + run_path(RUN_ID, step=3))
        assert browser.find_element(By.ID, "step").text == "3"
        assert len(pairs(browser, "conversation")) == 1
        browser.find_element(By.ID, "next-step").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "step").text == "4")
        assert not browser.find_elements(By.ID, "next-step")  # the head: nothing after it
        assert "waiting for a human" in browser.find_element(By.ID, "conversation-pending").text.lower()
        for step in (3, 2, 1, 0):
            browser.find_element(By.ID, "prev-step").click()
            wait_for(browser, lambda d, step=step: d.find_element(By.ID, "step").text == str(step))
        assert not browser.find_elements(By.ID, "prev-step")
        no_injection(browser)
    finally:
        served.stop()


def langgraph_run(store: Store) -> str:
    """A real LangGraph agent (StateGraph, ToolNode, a scripted offline chat model), journal on: one
    turn asks for two tools, then one, then answers."""
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    from helpers import langgraph_journal_app as app  # noqa: PLC0415

    graph = app.build(app.saver_for(store, journal=True))
    graph.invoke({"messages": [HumanMessage(PAYLOADS[1])]}, {"configurable": {"thread_id": "t<i>"}})
    (thread,) = store.runs(labels={"langgraph.role": "thread"}).items
    return thread.run_id


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_langgraph_agents_tool_calls_pair_with_their_results(
    browser: Any, store: Store, request: Any
) -> None:
    """The adapter's run, read by its decoder: three call cards, each linked to the ToolMessage that
    answers it (the model's own random ids); the summaries count the journal's tool calls and the
    model's tokens; the step page lists the journal's recorded calls."""
    run_id = langgraph_run(store)
    served = Served(store)
    try:
        browser.get(served.base + run_path(run_id))
        found = pairs(browser, "chat")
        assert sorted(text for _, text in found) == [
            "charged 10 for order-1",
            "found item-1",
            "found price-1",
        ]
        assert len({call_id for call_id, _ in found}) == 3
        assert {e.text for e in browser.find_elements(By.CSS_SELECTOR, "#chat .card-call .tool")} == {
            "charge",
            "lookup",
        }
        assert browser.find_elements(By.CSS_SELECTOR, "#chat .side-tool")
        assert PAYLOADS[1] in browser.find_element(By.CSS_SELECTOR, "#chat .side-user").text
        rows = browser.find_elements(By.CSS_SELECTOR, "#steps tr.step")
        tool_calls = [r.find_element(By.CSS_SELECTOR, "td.tool-calls").text for r in rows]
        assert sum(int(t) for t in tool_calls if t not in ("-", "0")) == 3  # the journal's count, by step
        tokens = [r.find_element(By.CSS_SELECTOR, "td.tokens").text for r in rows]
        assert any(t.startswith("+") for t in tokens)
        no_injection(browser)
        head = store.run(run_id).head_step
        browser.get(served.base + run_path(run_id, step=head))
        assert len(pairs(browser, "conversation")) == 3
        browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "conversation"))
        screenshot(browser, request.node.callspec.params["store"], "conversation-step.png")
        entries = store.recorded_calls(run_id)
        assert entries
        step = entries[0].step  # a step the journal's entries belong to: its page lists them
        browser.get(served.base + run_path(run_id, step=step))
        listed = browser.find_elements(By.CSS_SELECTOR, "#calls tr.call")
        assert len(listed) == len([e for e in entries if e.step == step])
        no_injection(browser)
    finally:
        served.stop()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_long_runs_page_their_steps_and_their_conversation(browser: Any, store: Store, request: Any) -> None:
    """250 steps list 100 a page, newest first, with older and newer links; a conversation of 450
    messages shows 200 a page, and a call on one page links to its result on the next."""
    cp = Checkpoint(run_id="long", counters={"tokens_in": 0})
    store.save(cp)
    for i in range(249):
        cp = cp.next()
        cp.counters["tokens_in"] += 5
        cp.messages.append({"role": "user", "content": f"m{i}"})
        store.save(cp)
    talk = [{"role": "user", "content": f"line {i}"} for i in range(450)]
    talk[199] = {
        "role": "assistant",
        "tool_calls": [{"id": "far", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    talk[200] = {"role": "tool", "tool_call_id": "far", "content": "the far answer"}
    talk[0] = {"role": "<b id=injected>r</b>\u202e", "content": "a role of its own"}
    store.save(Checkpoint(run_id="talk", messages=talk))
    served = Served(store)
    try:
        browser.get(served.base + run_path("long"))
        shown = [int(a.text) for a in browser.find_elements(By.CSS_SELECTOR, "#steps a.step-link")]
        assert shown == list(range(249, 149, -1))
        assert {c.text for c in browser.find_elements(By.CSS_SELECTOR, "#steps td.tokens")} == {"+5"}
        assert "page 1 of 3" in browser.find_element(By.ID, "steps-pager").text
        assert not browser.find_elements(By.ID, "newer-steps")
        browser.find_element(By.ID, "older-steps").click()
        wait_for(browser, lambda d: "page 2 of 3" in d.find_element(By.ID, "steps-pager").text)
        shown = [int(a.text) for a in browser.find_elements(By.CSS_SELECTOR, "#steps a.step-link")]
        assert shown == list(range(149, 49, -1))
        browser.find_element(By.ID, "older-steps").click()
        wait_for(browser, lambda d: "page 3 of 3" in d.find_element(By.ID, "steps-pager").text)
        assert [int(a.text) for a in browser.find_elements(By.CSS_SELECTOR, "#steps a.step-link")][-1] == 0
        browser.find_element(By.ID, "newer-steps").click()
        wait_for(browser, lambda d: "page 2 of 3" in d.find_element(By.ID, "steps-pager").text)

        browser.get(served.base + run_path("talk", step=0))
        messages = browser.find_elements(By.CSS_SELECTOR, "#conversation > li.message")
        assert len(messages) == 200
        assert messages[0].get_attribute("id") == "m-0"
        assert messages[0].get_attribute("class") == "message side-other"  # a role the page does not know
        assert messages[0].find_element(By.CSS_SELECTOR, ".role").text == "<b id=injected>r</b>\\u202e"
        no_injection(browser)
        browser.find_element(By.CSS_SELECTOR, "#m-199 a.pair").click()  # its result is on page 2
        wait_for(browser, lambda d: d.find_elements(By.ID, "m-200"))
        assert "the far answer" in browser.find_element(By.ID, "m-200").text
        assert browser.current_url.endswith("page=2#m-200")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#conversation > li.message")) == 200
        browser.find_element(By.CSS_SELECTOR, "#m-200 a.pair").click()  # and back to its call
        wait_for(browser, lambda d: d.find_elements(By.ID, "m-0"))
        assert browser.current_url.endswith("page=1#m-199")
        browser.find_element(By.ID, "next-messages").click()
        browser.find_element(By.ID, "next-messages").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "m-449"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#conversation > li.message")) == 50

        browser.get(served.base + run_path("talk"))  # the run page: too long to open unasked
        assert not browser.find_elements(By.ID, "chat")
        assert "3 pages of messages" in browser.find_element(By.ID, "chat-pager").text
        browser.find_element(By.ID, "last-chat").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "m-449"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#chat > li.message")) == 50
        assert not browser.find_elements(By.ID, "later-chat")
        browser.find_element(By.ID, "earlier-chat").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "m-399"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "#chat > li.message")) == 200
        assert (
            browser.find_element(By.CSS_SELECTOR, "#m-200 .card-result a.pair")
            .get_attribute("href")
            .endswith("chat=1#m-199")
        )  # its call is on the page before: linked there
    finally:
        served.stop()


def colour(driver: Any, selector: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, selector).value_of_css_property("background-color"))


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_two_steps_side_by_side_in_colour(browser: Any, store: Store, request: Any) -> None:
    """Any two steps, chosen on the step page: a rewritten message is a changed row with its lost and
    gained words marked, a new one an added row, a removed state key a removed row — each in its own
    colour from the stylesheet (no inline style); hostile text inert on both sides."""
    backend = request.node.callspec.params["store"]
    first = Checkpoint(run_id=RUN_ID, state={"plan": "the quick brown fox", "gone": PAYLOADS[1]})
    first.messages += [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "the quick brown fox " + PAYLOADS[0]},
    ]
    store.save(first)
    second = first.next()
    second.messages[1] = {"role": "assistant", "content": "the slow brown fox " + PAYLOADS[0]}
    second.messages.append({"role": "user", "content": PAYLOADS[3]})
    second.state = {"plan": "the slow brown fox", "new": PAYLOADS[2]}
    store.save(second)
    served = Served(store)
    try:
        browser.get(served.base + run_path(RUN_ID, step=0))
        browser.find_element(By.ID, "compare-b").send_keys("1")
        browser.find_element(By.ID, "compare-go").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "messages-diff"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#messages-diff tbody tr")
        assert [r.get_attribute("class") for r in rows] == ["row-same", "row-changed", "row-added"]
        assert "messages 1 to 1" in rows[0].text
        assert rows[1].find_element(By.CSS_SELECTOR, "td.left .del").text == "quick"
        assert rows[1].find_element(By.CSS_SELECTOR, "td.right .ins").text == "slow"
        assert PAYLOADS[0] in rows[1].find_element(By.CSS_SELECTOR, "td.right").text
        assert rows[2].find_element(By.CSS_SELECTOR, "td.right pre").text == PAYLOADS[3]
        fields = {
            r.find_element(By.CSS_SELECTOR, ".diff-label").text: r.get_attribute("class")
            for r in browser.find_elements(By.CSS_SELECTOR, "#fields tbody tr")
        }
        assert fields == {"state.gone": "row-removed", "state.new": "row-added", "state.plan": "row-changed"}
        removed, added = "rgba(253, 236, 234, 1)", "rgba(230, 246, 234, 1)"
        changed = ("rgba(255, 248, 219, 1)", "rgb(255, 248, 219)")
        assert colour(browser, "#messages-diff .row-changed td.left") in changed
        assert colour(browser, "#messages-diff .row-changed td.right") in changed
        assert colour(browser, "#messages-diff .row-added td.right") in (added, "rgb(230, 246, 234)")
        assert colour(browser, "#fields .row-removed td.left") in (removed, "rgb(253, 236, 234)")
        assert colour(browser, ".row-changed .del") in ("rgba(248, 196, 192, 1)", "rgb(248, 196, 192)")
        assert colour(browser, ".row-changed .ins") in ("rgba(183, 228, 195, 1)", "rgb(183, 228, 195)")
        assert colour(browser, "#messages-diff .row-added td.left") in ("rgba(0, 0, 0, 0)", "transparent")
        assert not browser.find_elements(By.CSS_SELECTOR, "[style]")  # the colours are the stylesheet's
        no_injection(browser)
        screenshot(browser, backend, "conversation-diff.png")
        browser.find_element(By.ID, "swap").click()  # the other way round: added becomes removed
        wait_for(browser, lambda d: "step 1 → step 0" in d.find_element(By.TAG_NAME, "h1").text)
        kinds = [
            r.get_attribute("class")
            for r in browser.find_elements(By.CSS_SELECTOR, "#messages-diff tbody tr")
        ]
        assert kinds == ["row-same", "row-changed", "row-removed"]
        no_injection(browser)
    finally:
        served.stop()
