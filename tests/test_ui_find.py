"""Finding runs in the inspector, in real Chromium against a real uvicorn server over SQLite and
PostgreSQL: search by id prefix, label, status and last-update range, sorted columns, queued runs
shown as queued, who holds a run (a worker's lease, an exclusive Run's) with its expiry, attempts,
retry at and last error — hostile text in ids, labels, worker ids, errors and search terms inert."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlencode

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of

import safepoint
import test_ui_browser as ui
from safepoint import Checkpoint, Keyring, Run, Store
from safepoint.ui import pages
from safepoint.ui.paths import run_path

browser = ui.browser  # one Chromium for this module, as test_ui_browser starts it
PAYLOADS = ui.PAYLOADS
HOSTILE_ID = "find-" + ui.HOSTILE_ID
WORKER = PAYLOADS[1]  # a worker id is the worker's own text: shown, never run
ERROR = "RuntimeError: " + PAYLOADS[0]


def seeded(store: Store) -> tuple[dict[str, datetime], Run]:
    """Five plain runs saved one after another (t-0 … t-4, each updated after the one before), a
    hostile one, and three the workers know: queued, held by a worker, back off after a failure;
    and an exclusive Run holding its own. Returns each t- run's last update, and the open Run."""
    updated = {}
    for i in range(5):
        cp = Checkpoint(run_id=f"t-{i}", labels={"team": ["red", "blue", "redwood"][i % 3]})
        cp.counters["tokens_in"] = [30, 10, 50, 20, 40][i]
        for _ in range(i + 1):  # head steps 0..4
            store.save(cp)
            cp = cp.next()
        updated[f"t-{i}"] = store.run(f"t-{i}").updated_at
        time.sleep(0.002)  # distinct last-update times, so that a range can fall between two runs
    hostile = Checkpoint(run_id=HOSTILE_ID, labels={"team": PAYLOADS[0], PAYLOADS[2]: "x"})
    store.save(hostile)
    hostile = hostile.next()
    hostile.messages += [
        {"role": "user", "content": "is the Needle in " + PAYLOADS[0]},
        {"role": "assistant", "content": "only hay here " + PAYLOADS[1]},
        {"role": "user", "content": "x" * 200 + " needle at the end"},
    ]
    store.save(hostile)
    for run_id in ("w-retry", "w-held", "w-queued"):  # "w-queued" is the newest: claims take the oldest
        run = Run.start(store, run_id)
        run.commit()
        run.close()
    store.enqueue("w-retry")
    failed = store.claim("other-worker", lease=60)
    assert failed is not None
    assert failed.run_id == "w-retry"
    store.release(failed, requeue=True, retry_at=datetime.now(UTC) + timedelta(hours=1), error=ERROR)
    store.enqueue("w-held")
    lease = store.claim(WORKER, lease=600)
    assert lease is not None
    assert lease.run_id == "w-held"
    store.enqueue("w-queued")
    exclusive = Run.start(store, "w-exclusive")  # left open: the Run holds its run's lease
    exclusive.commit()
    return updated, exclusive


def ids(driver: Any) -> list[str]:
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "a.run-link")]


def row_of(driver: Any, run_id: str) -> Any:
    for row in driver.find_elements(By.CSS_SELECTOR, "tr.run"):
        if row.find_element(By.CSS_SELECTOR, "a.run-link").text == run_id:
            return row
    raise AssertionError(f"{run_id!r} is not listed")


def every_page(driver: Any) -> list[str]:
    """The ids on this page and on each next page, followed by its link as a user would."""
    found = ids(driver)
    while driver.find_elements(By.ID, "next-page"):
        table = driver.find_element(By.ID, "runs")
        driver.find_element(By.ID, "next-page").click()
        ui.wait_for(driver, staleness_of(table))  # the next page, not this one again
        found += ids(driver)
    ui.no_injection(driver)
    return found


def search(driver: Any, base: str, **query: str) -> list[str]:
    driver.get(base + "/?" + urlencode(query))
    ui.no_injection(driver)
    return ids(driver)


def find_and_filter(
    driver: Any, base: str, store: Store, updated: dict[str, datetime], shots: Path | None = None
) -> None:
    # The search box, typed into as a user would: id prefix, then a label as name=value.
    driver.get(base + "/")
    driver.find_element(By.ID, "search-prefix").send_keys("t-")
    driver.find_element(By.ID, "search-go").click()
    ui.wait_for(driver, lambda d: "prefix=t-" in d.current_url)
    assert sorted(ids(driver)) == [f"t-{i}" for i in range(5)]
    driver.find_element(By.ID, "search-label").send_keys("team=red")
    driver.find_element(By.ID, "search-go").click()
    ui.wait_for(driver, lambda d: "label=team" in d.current_url)
    assert sorted(ids(driver)) == ["t-0", "t-3"]  # exact: not redwood
    assert sorted(search(driver, base, prefix="t-", label_has="red")) == ["t-0", "t-2", "t-3"]
    assert "matched here" in driver.find_element(By.ID, "scanned").text
    assert sorted(search(driver, base, prefix="t-", label_has="team=re")) == ["t-0", "t-2", "t-3"]
    assert search(driver, base, status="waiting") == []
    assert driver.find_element(By.ID, "no-runs").text == "no runs"
    assert sorted(search(driver, base, prefix="w-", status="running")) == [
        "w-exclusive",
        "w-held",
        "w-queued",
        "w-retry",
    ]
    # The last-update range, both ends included: t-1 .. t-3, and the page says what it matched here.
    window = {"since": updated["t-1"].isoformat(), "until": updated["t-3"].isoformat()}
    assert sorted(search(driver, base, prefix="t-", **window)) == ["t-1", "t-2", "t-3"]
    assert search(driver, base, since=(updated["t-4"] + timedelta(days=1)).isoformat()) == []
    assert sorted(search(driver, base, prefix="t-", until=updated["t-0"].isoformat())) == ["t-0"]

    # Sorting: by a column's heading, once each way, over every run that matches, not one page:
    # two runs a page here, so each order is read across three pages.
    with mock.patch.object(pages, "PAGE", 2):
        search(driver, base, prefix="t-")
        assert ids(driver) == ["t-4", "t-3"]  # newest run first by default
        assert every_page(driver) == ["t-4", "t-3", "t-2", "t-1", "t-0"]
        driver.get(base + "/?prefix=t-")
        driver.find_element(By.ID, "sort-id").click()
        ui.wait_for(driver, lambda d: "sort=id" in d.current_url)
        assert "every run that matches" in driver.find_element(By.ID, "sort-note").text
        assert every_page(driver) == ["t-0", "t-1", "t-2", "t-3", "t-4"]
        driver.get(base + "/?" + urlencode({"prefix": "t-", "sort": "id", "order": "asc"}))
        driver.find_element(By.ID, "sort-id").click()  # again: the other way
        ui.wait_for(driver, lambda d: "order=desc" in d.current_url)
        assert every_page(driver) == ["t-4", "t-3", "t-2", "t-1", "t-0"]
        driver.get(base + "/?prefix=t-")
        driver.find_element(By.ID, "sort-step").click()  # numbers: largest first
        ui.wait_for(driver, lambda d: "sort=step" in d.current_url)
        assert every_page(driver) == ["t-4", "t-3", "t-2", "t-1", "t-0"]
        search(driver, base, prefix="t-", label="team=red", sort="step", order="asc")
        assert every_page(driver) == ["t-0", "t-3"]  # the filter stays with the sort
        search(driver, base, prefix="t-", sort="updated", order="asc")
        assert every_page(driver) == ["t-0", "t-1", "t-2", "t-3", "t-4"]
        search(driver, base, prefix="w-", sort="status", order="asc")  # the stored status; ties by creation
        assert every_page(driver) == ["w-retry", "w-held", "w-queued", "w-exclusive"]
        search(driver, base, prefix="t-", label_has="red", sort="id", order="desc")
        assert every_page(driver) == ["t-3", "t-2", "t-0"]  # "label contains" keeps the order too
    if shots is not None:  # the search results docs/ui.md shows: a prefix, a label's text, a sort
        found = search(driver, base, prefix="t-", label_has="red", sort="step", order="desc")
        assert found == ["t-3", "t-2", "t-0"]
        driver.save_screenshot(str(shots / "search.png"))

    # Queued runs as queued; the holder, its lease's expiry, retry at and the error in the list.
    search(driver, base, prefix="w-")
    status = {r: row_of(driver, r).find_element(By.CSS_SELECTOR, ".status").text for r in ids(driver)}
    assert status == {
        "w-exclusive": "running",
        "w-held": "running",
        "w-queued": "queued",
        "w-retry": "queued",
    }
    held = row_of(driver, "w-held").find_element(By.CSS_SELECTOR, ".holder").text
    lease = store.queue_state("w-held")
    assert lease.expires_at is not None
    assert held == f"{WORKER} until {lease.expires_at.strftime('%Y-%m-%d %H:%M:%S')}"
    exclusive_owner = store.queue_state("w-exclusive").owner
    assert exclusive_owner
    assert exclusive_owner in row_of(driver, "w-exclusive").find_element(By.CSS_SELECTOR, ".holder").text
    assert row_of(driver, "w-queued").find_element(By.CSS_SELECTOR, ".holder").text == ""
    retry = store.run("w-retry")
    assert retry.retry_at is not None
    retry_row = row_of(driver, "w-retry")
    assert retry_row.find_element(By.CSS_SELECTOR, ".retry-at").text == retry.retry_at.strftime(
        "%Y-%m-%d %H:%M:%S"
    )
    assert retry_row.find_element(By.CSS_SELECTOR, ".last-error").text == f"{ERROR} (attempts 1)"
    ui.no_injection(driver)

    # Who holds it, on the run page.
    driver.get(base + run_path("w-held"))
    assert driver.find_element(By.CSS_SELECTOR, "#holder .owner").text == WORKER
    assert driver.find_element(By.ID, "lease-expires").text == lease.expires_at.strftime("%Y-%m-%d %H:%M:%S")
    assert driver.find_element(By.ID, "attempts").text == "1"
    ui.no_injection(driver)
    driver.get(base + run_path("w-exclusive"))
    assert driver.find_element(By.CSS_SELECTOR, "#holder .owner").text == exclusive_owner
    driver.get(base + run_path("w-retry"))
    assert driver.find_element(By.ID, "queue").text == "queued: waiting for a worker"
    assert driver.find_element(By.ID, "holder").text == "no one"
    assert driver.find_element(By.ID, "attempts").text == "1"
    assert driver.find_element(By.ID, "retry-at").text == retry.retry_at.strftime("%Y-%m-%d %H:%M:%S")
    assert driver.find_element(By.ID, "last-error").text == ERROR
    ui.no_injection(driver)

    # Hostile ids, labels and search terms: shown as text, echoed as text, never run.
    assert search(driver, base, prefix=HOSTILE_ID) == [HOSTILE_ID]
    assert driver.find_element(By.ID, "search-prefix").get_attribute("value") == HOSTILE_ID
    assert search(driver, base, label=f"team={PAYLOADS[0]}") == [HOSTILE_ID]
    assert search(driver, base, label_has=PAYLOADS[2]) == [HOSTILE_ID]
    assert driver.find_element(By.ID, "search-label-has").get_attribute("value") == PAYLOADS[2]
    for term in PAYLOADS:
        search(driver, base, prefix=term, label=f"{term}={term}", label_has=term, sort=term, order=term)
    assert search(driver, base, since=PAYLOADS[1]) == []  # refused with its error page, as text
    assert "must be a date and time" in driver.find_element(By.TAG_NAME, "body").text
    ui.no_injection(driver)

    # Search within a run's conversation: the messages holding the words, any case, each linked.
    driver.get(base + run_path(HOSTILE_ID))
    driver.find_element(By.ID, "find-text").send_keys("needle")
    driver.find_element(By.ID, "find-go").click()
    ui.wait_for(driver, lambda d: d.find_elements(By.ID, "found"))
    matches = driver.find_elements(By.CSS_SELECTOR, "#found .match")
    assert [m.find_element(By.CSS_SELECTOR, "a").text for m in matches] == ["message 1", "message 3"]
    assert PAYLOADS[0] in matches[0].text  # the excerpt, as text
    assert matches[1].find_element(By.CSS_SELECTOR, ".excerpt").text.startswith("…")
    matches[0].find_element(By.CSS_SELECTOR, "a").click()
    ui.wait_for(driver, lambda d: d.find_elements(By.ID, "conversation"))
    assert "Needle" in driver.find_element(By.ID, "conversation").text
    ui.no_injection(driver)
    for term in PAYLOADS[:4]:
        driver.get(base + run_path(HOSTILE_ID, find=term))
        assert driver.find_element(By.ID, "find-text").get_attribute("value") == term
        ui.no_injection(driver)
    driver.get(base + run_path(HOSTILE_ID, find=PAYLOADS[1]))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#found .match")) == 1
    driver.get(base + run_path(HOSTILE_ID, find="straw"))
    assert driver.find_element(By.ID, "nothing-found").text == "no message holds it"
    ui.no_injection(driver)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_find_filter_sort_and_who_holds_a_run(
    browser: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = ui.store_url(tmp_path, backend, request)
    writer = safepoint.open_store(url)
    updated, exclusive = seeded(writer)
    reader = safepoint.open_store(url, read_only=True)
    served = ui.Served(reader)
    # make screenshots sets SAFEPOINT_SCREENSHOTS to docs/images, as for test_ui_browser's.
    wanted = os.environ.get("SAFEPOINT_SCREENSHOTS")
    shots = Path(wanted) if wanted and backend == "sqlite" else None
    try:
        find_and_filter(browser, served.base, writer, updated, shots)
    finally:
        served.stop()
        exclusive.close()
        reader.close()
        writer.close()


def test_an_encrypted_store_searches_labels_only_whole(browser: Any, tmp_path: Path) -> None:
    keys = Keyring.from_text(f"index:{'A' * 43}= k1:{'B' * 43}=")
    store = safepoint.open_store(f"sqlite:///{tmp_path}/sealed.db", encryption=keys)
    store.save(Checkpoint(run_id="s-1", labels={"team": "red"}))
    store.save(Checkpoint(run_id="s-2", labels={"team": "redwood"}))
    served = ui.Served(store)
    try:
        browser.get(served.base + "/")
        assert "only exactly" in browser.find_element(By.ID, "label-hint").text
        assert not browser.find_elements(By.ID, "search-label-has")  # no substring box to type into
        assert search(browser, served.base, label="team=red") == ["s-1"]  # through the blind index
        search(browser, served.base, label_has="red")  # asked for anyway: refused, not matched
        assert "only exactly" in browser.find_element(By.TAG_NAME, "body").text
        assert not ids(browser)
    finally:
        served.stop()
        store.close()


def test_nothing_searched_is_logged(tmp_path: Path) -> None:
    """``safepoint ui`` as started by a user: search terms reach neither its output nor its errors."""
    import test_ui_cli as cli  # noqa: PLC0415

    url = f"sqlite:///{tmp_path}/state.db"
    with safepoint.open_store(url) as store:
        cp = Checkpoint(run_id="logged-run", labels={"team": "red"})
        cp.messages.append({"role": "user", "content": "a secret-ish question"})
        store.save(cp)
    port = cli.free_port()
    proc = cli.started(["--store", url, "--port", str(port)], tmp_path, port)
    term = "zq7-searched-term"
    try:
        for path in (
            "/?" + urlencode({"prefix": term, "label": f"team={term}", "label_has": term}),
            "/?" + urlencode({"since": term}),
            run_path("logged-run", find=term),
            run_path(term, find=term),
        ):
            status, body = cli.get(port, path)
            assert status in (200, 400, 404), status
            assert term in body or status != 200  # echoed in the page, where the user typed it
    finally:
        code, out, err = cli.stopped(proc)
    assert code == 0, err
    assert term not in out
    assert term not in err
