"""The timeline of a live episode in headless Chromium: lines read after the last one shown while a
writer adds late records (no line twice, none lost, against the store read with apsw), jumps to the
end and to a time, and lines shown before the episode's paths and plots are built."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import UiServer, page_errors

from robotmem import Memory
from robotmem.view.episodes import TIMELINE_PAGE

WAIT_S = 60  # how long the page may take to show what it fetched (polls back off under load); not a speed target
T0 = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC
RECORDS = 2 * TIMELINE_PAGE + 200
LONG_NAME = "R" * 30_000  # a robot id, a task and a topic written by a buggy bridge


def _record(sid: str, at: float, text: str) -> dict[str, Any]:
    return {"description": text, "perception_type": "proprioceptive", "session_id": sid, "embed": False,
            "occurred_at": at}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("ui-timeline-live")
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        sid = mem.start_session(context={"robot": {"id": "patrol-bot"}, "episode": {"t_start_ns": int(T0 * 1e9)}})
        mem.save_perceptions([_record(sid["session_id"], T0 + i, f"odom {i}") for i in range(RECORDS)])
        named = mem.start_session(context={"robot": {"id": LONG_NAME}, "task": {"name": LONG_NAME}})["session_id"]
        mem.save_perception("pose chunk", "proprioceptive", session_id=named, metadata={"source": {"topic": LONG_NAME}})
    (db,) = home.rglob("*.db")
    return {"home": str(home), "sid": sid["session_id"], "db": str(db), "named": named}


@pytest.fixture(scope="module")
def ui(live: dict[str, str]) -> Iterator[UiServer]:
    server = UiServer(Path(live["home"]))
    yield server
    server.stop()


def _wait(browser: Any) -> WebDriverWait[Any]:
    return WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


def _stored(live: dict[str, str]) -> list[tuple[int, float]]:
    """The oracle: the episode's records in time order, read from the SQLite file with apsw."""
    db = apsw.Connection(live["db"], flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [(mid, at) for mid, at in db.execute(
            "SELECT id, occurred_at FROM memories WHERE session_id = ? ORDER BY occurred_at, id", (live["sid"],))]
    finally:
        db.close()


def _shown(browser: Any) -> list[int]:
    """The record ids of the timeline's rows, read in one script (a redraw may replace the rows)."""
    ids = browser.execute_script("return [...document.querySelectorAll('#timeline tbody tr')].map((r) => r.dataset.id)")
    return [int(i) for i in ids if i]


def test_a_robot_id_task_and_topic_of_30000_characters_take_a_line_each(browser: Any, ui: UiServer,
                                                                          live: dict[str, str]) -> None:
    browser.get(ui.url)
    row = f"tr[data-session='{live['named']}']"
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
    browser.find_element(By.CSS_SELECTOR, row).click()
    _wait(browser).until(lambda d: "loading" not in d.find_element(By.ID, "episode-title").text
                         and d.find_elements(By.CSS_SELECTOR, "#timeline tbody tr.timeline-proprioceptive"))
    heights = browser.execute_script(f"""
      const height = (sel) => document.querySelector(sel).getBoundingClientRect().height;
      return [height("{row}"), height("#episode-title"), height("#timeline tbody tr.timeline-proprioceptive")]""")
    # each was many screens tall (the whole 30,000 characters wrapped); a line or two is the point
    assert max(heights) < 100, heights
    full = browser.execute_script(f"return [...document.querySelectorAll(\"{row} td.user-text\")].map((td) => td.title)")
    assert full == [LONG_NAME, LONG_NAME]  # the whole text is in the tooltip
    assert page_errors(browser) == []


def _open(browser: Any, ui: UiServer, sid: str) -> None:
    browser.get(ui.url)
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-session='{sid}']"))
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{sid}']").click()
    _wait(browser).until(lambda d: len(_shown(d)) >= TIMELINE_PAGE - 1)


def test_lines_loaded_while_a_writer_adds_late_records_are_each_shown_once(browser: Any, ui: UiServer,
                                                                           live: dict[str, str]) -> None:
    _open(browser, ui, live["sid"])
    stop = threading.Event()

    def writer() -> None:  # a camera topic behind odometry: records stamped among those already shown
        os.environ["ROBOTMEM_HOME"] = live["home"]
        with Memory(embedder=None) as mem:
            k = 0
            while not stop.is_set():
                mem.save_perceptions([_record(live["sid"], T0 + 10.5 + k * 1e-3, f"late camera {k}"),
                                      _record(live["sid"], T0 + RECORDS + k, f"new odom {k}")])
                k += 1
                stop.wait(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = []
        for _ in range(16):  # the person keeps asking for more lines while the robot writes
            browser.execute_script("document.getElementById('timeline-more').click()")
            shown = _shown(browser)
            seen.append(len(shown))
            assert len(shown) == len(set(shown)), [i for i in shown if shown.count(i) > 1][:5]
            try:  # a click the page did not act on is clicked again, as a person would
                WebDriverWait(browser, 5).until(lambda d, n=len(shown): len(_shown(d)) > n or d.find_element(
                    By.ID, "timeline-more").get_attribute("hidden") is not None)
            except TimeoutException:
                pass
    finally:
        stop.set()
        thread.join()
    assert max(seen) > 2 * TIMELINE_PAGE, seen  # more lines were read than the first two pages
    stored = [mid for mid, _ in _stored(live)]
    # the poll's redraw fetches again as many lines as were shown: then the rows are the store's records
    _wait(browser).until(lambda d: _shown(d) == stored[:len(_shown(d))] and len(_shown(d)) >= max(seen))
    shown = _shown(browser)
    assert len(shown) == len(set(shown))
    assert page_errors(browser) == []


def test_the_timeline_jumps_to_its_end_and_to_a_time(browser: Any, ui: UiServer, live: dict[str, str]) -> None:
    _open(browser, ui, live["sid"])
    stored = _stored(live)
    browser.find_element(By.ID, "timeline-end").click()
    _wait(browser).until(lambda d: _shown(d)[-1:] == [stored[-1][0]])
    assert _shown(browser) == [mid for mid, _ in stored[-TIMELINE_PAGE:]]  # the episode is open: no end marker
    assert "from line" in browser.find_element(By.ID, "timeline-note").text
    at = T0 + 700.25  # between two records: the first line shown is the first at or after it
    form = browser.find_element(By.ID, "timeline-jump")
    form.find_element(By.NAME, "at").send_keys("2026-09-21 14:25:00.25")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    expected = [mid for mid, t in stored if t >= at][:TIMELINE_PAGE]
    _wait(browser).until(lambda d: _shown(d)[:1] == expected[:1])
    assert _shown(browser) == expected
    browser.find_element(By.ID, "timeline-end").click()
    _wait(browser).until(lambda d: _shown(d)[-1:] == [stored[-1][0]])
    os.environ["ROBOTMEM_HOME"] = live["home"]
    with Memory(embedder=None) as mem:  # the robot writes on: the page at the end follows it
        newest = mem.save_perceptions([_record(live["sid"], stored[-1][1] + 1, "the newest odom")])[0]
    _wait(browser).until(lambda d: _shown(d)[-1:] == [newest])
    assert len(_shown(browser)) == TIMELINE_PAGE
    before = _shown(browser)
    form.find_element(By.NAME, "at").clear()
    form.find_element(By.NAME, "at").send_keys("not a time")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser).until(lambda d: "at must be epoch seconds or ISO 8601" in d.find_element(By.ID, "timeline-note").text)
    assert _shown(browser) == before  # a bad time leaves the lines shown
    assert page_errors(browser) == []


def test_the_lines_show_while_the_episodes_paths_and_plots_are_still_being_built(
        browser: Any, ui: UiServer, live: dict[str, str]) -> None:
    # The episode's own request never answers (an episode of 100,000 pose chunks took 9 s to build).
    # Stubbed before the page's own script runs: the map asks for the newest episodes as soon as the
    # list comes, and a stub installed after the page loaded lost that race on a loaded machine.
    stub = f"""
      const real = window.fetch;
      window.fetch = (...args) => String(args[0]).split('?')[0] === 'api/episodes/' + {json.dumps(live["sid"])}
        ? new Promise(() => {{}}) : real(...args);"""
    added = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": stub})
    try:
        browser.get(ui.url)
        _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-session='{live['sid']}']"))
        browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{live['sid']}']").click()
        _wait(browser).until(lambda d: len(_shown(d)) == TIMELINE_PAGE - 1)  # the start marker and 499 records
        assert browser.find_element(By.ID, "episode-facts").text == ""  # still being built
        assert page_errors(browser) == []
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": added["identifier"]})
