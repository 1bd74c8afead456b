"""A fleet's store of more episodes than one list page, in headless Chromium: the person pages
back to the oldest episode and opens it (only the newest 500 could be reached before), and a
page stays where it is while the robots start new episodes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import ARTIFACTS, UiServer, page_errors

from robotmem import Memory
from robotmem.view.episodes import MAX_ROWS

WAIT_S = 60  # how long the page may take to show what it fetched (polls back off under load); not a speed target
EPISODES = 2 * MAX_ROWS + 37


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui-pages")
    os.environ["ROBOTMEM_HOME"] = str(path)
    with Memory(embedder=None) as mem:
        for i in range(EPISODES):
            sid = mem.start_session(context={"robot": {"id": f"bot-{i % 7}"}, "task": {"name": f"pick {i}"}})["session_id"]
            if i == 0:
                mem.learn("the oldest episode's fact: the gripper slipped", session_id=sid)
            mem.end_session(sid, outcome_score=0.5)
    return path


@pytest.fixture(scope="module")
def ui(home: Path) -> Iterator[UiServer]:
    server = UiServer(home)
    yield server
    server.stop()


def _store_order(home: Path) -> list[str]:
    """Every episode, newest first (started_at, then id), read from the SQLite file with apsw."""
    connection = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    rows = connection.execute("SELECT id, started_at FROM sessions").fetchall()
    connection.close()
    return [sid for sid, _ in sorted(rows, key=lambda row: (-row[1], row[0]))]


def _listed(browser: Any) -> list[str]:
    return list(browser.execute_script(
        "return [...document.querySelectorAll('#episodes tbody tr')].map((r) => r.dataset.session)"))


def test_every_episode_is_reached_page_by_page_and_the_oldest_opens(browser: Any, ui: UiServer, home: Path) -> None:
    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    order = _store_order(home)
    browser.get(ui.url)
    wait.until(lambda d: _listed(d) == order[:MAX_ROWS])
    assert browser.find_element(By.ID, "episodes-newer").get_property("disabled")
    browser.find_element(By.ID, "episodes-older").click()
    wait.until(lambda d: _listed(d) == order[MAX_ROWS:2 * MAX_ROWS])
    assert f"episodes {MAX_ROWS + 1:,} to {2 * MAX_ROWS:,}" in browser.find_element(By.ID, "episodes-note").text

    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:  # robots start episodes while the person reads the second page
        new = [mem.start_session(context={"robot": {"id": "bot-new"}})["session_id"] for _ in range(3)]
    for _ in range(2):  # two polls answered since: the second was asked after the episodes started
        stamp = browser.find_element(By.ID, "status").text
        wait.until(lambda d: d.find_element(By.ID, "status").text != stamp)
    assert _listed(browser) == order[MAX_ROWS:2 * MAX_ROWS]  # the page stays where it was

    browser.find_element(By.ID, "episodes-older-end").click()  # the button under the list, as the first
    wait.until(lambda d: _listed(d) == order[2 * MAX_ROWS:])
    assert not browser.find_element(By.ID, "episodes-older-end").is_displayed()
    assert browser.find_element(By.ID, "episodes-older").get_property("disabled")
    oldest = order[-1]
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{oldest}'] td:nth-child(3)").click()
    wait.until(lambda d: oldest in d.find_element(By.ID, "episode-title").text
               and "loading" not in d.find_element(By.ID, "episode-title").text)
    wait.until(lambda d: any("the gripper slipped" in line.text
                             for line in d.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")))
    assert "pick 0" in browser.find_element(By.ID, "episode-title").text
    browser.save_screenshot(str(ARTIFACTS / "episode-list-oldest-page.png"))

    browser.find_element(By.ID, "episodes-newer").click()
    wait.until(lambda d: _listed(d) == order[MAX_ROWS:2 * MAX_ROWS])
    browser.find_element(By.ID, "episodes-newest").click()
    wait.until(lambda d: _listed(d)[:3] == new[::-1])
    assert _listed(browser) == _store_order(home)[:MAX_ROWS]
    assert page_errors(browser) == []


def test_one_robots_episodes_are_listed_and_paged_on_their_own(browser: Any, ui: UiServer, home: Path) -> None:
    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    connection = apsw.Connection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    robots = {sid: (json.loads(context).get("robot") or {}).get("id")
              for sid, context in connection.execute("SELECT id, json(context) FROM sessions")}
    connection.close()
    mine = [sid for sid in _store_order(home) if robots[sid] == "bot-3"]
    browser.get(ui.url)
    wait.until(lambda d: len(_listed(d)) == MAX_ROWS)
    field = browser.find_element(By.CSS_SELECTOR, "#episodes-filter input[name=robot]")
    field.send_keys("bot-3")
    field.submit()
    wait.until(lambda d: _listed(d) == mine)
    assert "robot bot-3's episodes" in browser.find_element(By.ID, "episodes-note").text
    field.clear()
    field.send_keys("nobody")
    field.submit()
    wait.until(lambda d: _listed(d) == [] and "no episodes of robot nobody" in d.find_element(By.ID, "episodes-note").text)
    field.clear()
    field.submit()
    wait.until(lambda d: _listed(d) == _store_order(home)[:MAX_ROWS])
    assert page_errors(browser) == []
