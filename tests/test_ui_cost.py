"""The inspector's cost page and its polish, in real Chromium against a real uvicorn server: totals
of each run's head counters on SQLite, PostgreSQL and an encrypted SQLite store, equal to the sums
this test computes from what it saved; filters by label and status, buckets by day and month;
hostile labels, counter names and search terms inert; empty charts that say so; cancel that asks
first; and a store outage (a PostgreSQL database of this test's own, dropped under the server)
answered 503 with a page.

One browser for the module (``browser``, imported from test_ui_browser, is module-scoped here).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from selenium.webdriver.common.by import By

import safepoint
from safepoint import Checkpoint, Keyring, records
from safepoint.ui.paths import run_path
from test_encryption_cli import key_file
from test_ui_browser import (  # noqa: F401  (browser: the module's one browser session)
    HOSTILE_ID,
    PAYLOADS,
    Served,
    browser,
    no_injection,
    store_url,
    wait_for,
)

DAYS = {"2026-11-30": 1, "2026-12-01": 2, "2026-12-02": 3}  # day -> runs last updated that day
HOSTILE_COUNTER = "<img src=x onerror=window.__pwned=9>"


def fill(store: safepoint.Store, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """Six runs over three days, three checkpoints each with growing counters (only the head's
    count); one run has a hostile id, odd runs hostile labels. Run 0 is then cancelled, which
    updates it now (the store's clock, not the one set here). Returns the sums of the head
    counters, computed here, and the runs per day."""
    expected: dict[str, float] = {"runs": 0, "tokens_in": 0, "tokens_out": 0.0, "spend": 0.0, "team_a": 0}
    n = 0
    for day, runs in DAYS.items():
        micros = int(datetime.fromisoformat(f"{day}T12:00:00+00:00").timestamp() * 1_000_000)
        monkeypatch.setattr(records, "now_micros", lambda micros=micros: micros)
        for _ in range(runs):
            run_id = HOSTILE_ID if n == 3 else f"r{n}"
            team = "a" if n % 2 == 0 else PAYLOADS[n % len(PAYLOADS)]
            cp = Checkpoint(run_id=run_id, labels={"team": team})
            for step in range(3):
                cp.counters = {
                    "tokens_in": (1000 * (n + 1) + 7) * (step + 1) // 3,
                    "tokens_out": 960.0,
                    "spend": round(0.1 * (n + 1) * (step + 1) / 3, 6),
                    HOSTILE_COUNTER: 1,
                }
                store.save(cp)
                cp = cp.next()
            head = store.run(run_id).counters
            expected["runs"] += 1
            expected["tokens_in"] += head["tokens_in"]
            expected["tokens_out"] += head["tokens_out"]
            expected["spend"] += head["spend"]
            expected["team_a"] += team == "a"
            n += 1
    monkeypatch.undo()
    store.cancel("r0")
    today = store.run("r0").updated_at.strftime("%Y-%m-%d")
    days = {day: runs for day, runs in DAYS.items() if day != "2026-11-30"} | {today: 1}
    expected["days"] = sorted(days.items(), reverse=True)  # type: ignore[assignment]
    return expected


def totals_shown(driver: Any) -> dict[str, str]:
    names = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#totals th")]
    values = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#totals td")]
    return dict(zip(names, values, strict=True))


@pytest.fixture(params=["sqlite", "postgresql", "sqlite-encrypted"])
def cost_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    backend = request.param
    options: dict[str, Any] = {}
    if backend == "sqlite-encrypted":
        options["encryption"] = Keyring.from_file(key_file(tmp_path, "keys.txt", "k1"))
    return store_url(tmp_path, backend.removesuffix("-encrypted"), request), options


def test_cost_page_sums_head_counters_filters_and_stays_inert(
    browser: Any,  # noqa: F811
    cost_store: tuple[str, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, options = cost_store
    store = safepoint.open_store(url, **options)
    expected = fill(store, monkeypatch)
    served = Served(store)
    try:
        browser.get(served.base + "/")
        browser.find_element(By.ID, "nav-cost").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "totals"))
        shown = totals_shown(browser)
        assert shown["runs"] == "6"
        assert shown["tokens_in"] == f"{int(expected['tokens_in']):,}"  # 21,042: no "21042.0"
        assert shown["tokens_out"] == f"{int(expected['tokens_out']):,}"  # 5,760, not 5760.0
        assert float(shown["spend"]) == pytest.approx(expected["spend"])  # 2.1, not 2.1000000000000005
        assert len(shown["spend"]) <= 4
        assert shown[HOSTILE_COUNTER] == "6"  # a counter named like markup, as text
        rows = [r.text.split()[:2] for r in browser.find_elements(By.CSS_SELECTOR, "#buckets tr.bucket")]
        assert rows == [[day, str(runs)] for day, runs in expected["days"]]  # type: ignore[attr-defined]
        assert (
            len(browser.find_elements(By.CSS_SELECTOR, "#cost-charts rect")) == 3 * 5
        )  # 5 charts, 3 days each
        captions = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#cost-charts figcaption")]
        assert "tokens_in (peak 15,021)" in captions, captions
        no_injection(browser)
        if "encryption" not in options and url.startswith("sqlite"):
            # make screenshots sets SAFEPOINT_SCREENSHOTS to docs/images, as for test_ui_browser's.
            shots = Path(os.environ.get("SAFEPOINT_SCREENSHOTS") or tmp_path)
            browser.save_screenshot(str(shots / "cost.png"))
        # The label filter, through the form (on the encrypted store: the blind index's exact match).
        browser.find_element(By.ID, "cost-label").send_keys("team=a")
        browser.find_element(By.ID, "cost-apply").click()
        wait_for(browser, lambda d: "label=team" in d.current_url)
        assert totals_shown(browser)["runs"] == str(expected["team_a"])
        browser.get(served.base + "/cost?status=cancelled&by=month")
        shown = totals_shown(browser)
        assert (shown["runs"], shown["tokens_in"]) == ("1", "1,007")
        assert [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#buckets tr.bucket")] == [
            expected["days"][0][0][:7]  # type: ignore[index]
        ]
        # A hostile search term: no runs, the term shown back as text, every chart saying it is empty.
        browser.get(served.base + "/cost")
        browser.find_element(By.ID, "cost-label").send_keys("team=" + PAYLOADS[2])
        browser.find_element(By.ID, "cost-apply").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "no-runs"))
        assert browser.find_element(By.ID, "cost-label").get_attribute("value") == "team=" + PAYLOADS[2]
        captions = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#cost-charts figcaption")]
        assert captions == ["runs: none recorded"]
        assert not browser.find_elements(By.CSS_SELECTOR, "#cost-charts rect")
        # A label that matches the hostile runs exactly: they are found and their label stays text.
        browser.get(served.base + "/cost?" + urllib.parse.urlencode({"label": "team=" + PAYLOADS[1]}))
        assert totals_shown(browser)["runs"] == "1"
        no_injection(browser)
    finally:
        served.stop()
        store.close()


def test_empty_charts_breakable_ids_and_cancel_that_asks_first(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    store = safepoint.open_store(f"sqlite:///{tmp_path}/state.db")
    long_id = "nightly-eval/" + "-".join(["agent"] * 40)
    cp = Checkpoint(run_id=long_id)  # counts nothing: its charts have nothing to draw
    store.save(cp)
    store.save(cp.next())
    served = Served(store, allow_actions=True)
    try:
        browser.get(served.base + run_path(long_id))
        captions = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#charts figcaption")]
        assert "tokens: none recorded" in captions, captions
        assert "spend: none recorded" in captions
        assert not any("peak 1" in c for c in captions)
        run_id = browser.find_element(By.ID, "run-id")
        assert run_id.value_of_css_property("overflow-wrap") == "anywhere"
        # The long id wraps inside the page (at its hyphens), not off its right edge.
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert run_id.size["height"] > 2 * 20
        # Cancel asks first: the first click only shows a confirmation page.
        browser.find_element(By.ID, "cancel").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "confirm-cancel"))
        assert store.run(long_id).status.value == "running"
        browser.find_element(By.ID, "keep").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "status"))
        assert store.run(long_id).status.value == "running"
        browser.find_element(By.ID, "cancel").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "confirm-cancel"))
        assert browser.find_element(By.ID, "run-id").text == long_id
        browser.find_element(By.ID, "confirm-cancel").click()
        wait_for(
            browser,
            lambda d: (
                d.find_elements(By.ID, "status") and d.find_element(By.ID, "status").text == "cancelled"
            ),
        )
        assert store.run(long_id).status.value == "cancelled"
    finally:
        served.stop()
        store.close()


def test_a_store_outage_answers_503_with_a_page(browser: Any, postgres_dsn: str) -> None:  # noqa: F811
    """A PostgreSQL database of this test's own, dropped (its sessions terminated, WITH FORCE) while
    the inspector serves it: the shared server keeps running for everyone else."""
    name = f"sp_uicost_{uuid.uuid4().hex[:12]}"
    admin = psycopg.connect(postgres_dsn, autocommit=True)
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    # timeout: how long a request waits for a pooled connection before StoreUnavailable (30 s by
    # default: the page answers 503 after that long); short here to keep the test short.
    where = urllib.parse.urlsplit(postgres_dsn)._replace(path="/" + name).geturl()
    store = safepoint.open_store(where, timeout=1.0)
    try:
        store.save(Checkpoint(run_id="gone", counters={"spend": 1.5}))
        served = Served(store)
        try:
            browser.get(served.base + "/cost")
            assert totals_shown(browser)["spend"] == "1.5"
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            for path in ("/cost", "/", run_path("gone")):
                with pytest.raises(urllib.error.HTTPError) as failed:
                    urllib.request.urlopen(served.base + path, timeout=30)
                assert failed.value.code == 503, path
                assert failed.value.headers["Retry-After"] == "5"
            with pytest.raises(urllib.error.HTTPError) as failed:
                urllib.request.urlopen(served.base + "/api/head/" + run_path("gone")[5:], timeout=30)
            assert (failed.value.code, json.loads(failed.value.read())) == (
                503,
                {"error": "the store is unavailable"},
            )
            browser.get(served.base + "/cost")
            assert browser.find_element(By.TAG_NAME, "h1").text == "Store unavailable"
            assert browser.find_elements(By.ID, "unavailable")
        finally:
            served.stop()
    finally:
        store.close()
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()
