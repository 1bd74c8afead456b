"""What the page says: times labelled UTC, whole episode ids, empty lists and results, the map note."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from ui_helpers import UiServer

from robotmem import Memory
from robotmem.view import store_map

WAIT_S = 20  # how long the page may take to show what it fetched; not a speed target
#: two episodes whose ids agree in their first 28 characters
TWINS = ("ses_replayed_2025_01_01_kitchen_run_a", "ses_replayed_2025_01_01_kitchen_run_b")


def _wait(browser: Any) -> WebDriverWait[Any]:
    return WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ui-text")
    os.environ["ROBOTMEM_HOME"] = str(home)
    (home / "map.pgm").write_bytes(b"P5 20 20 255\n" + bytes([254] * 400))
    (home / "map.yaml").write_text("image: map.pgm\nresolution: 0.1\norigin: [-1.0, -1.0, 0.0]\nframe_id: map\n")
    with Memory(embedder=None) as mem:
        store_map(mem, home / "map.yaml")
        for sid, side in zip(TWINS, ("left", "right")):
            mem.start_session(session_id=sid, context={"robot": {"id": "twin-bot"}})
            mem.learn(f"the kitchen door swings to the {side}", session_id=sid)
            # a pose chunk recorded without a frame name
            mem.save_perception("pose trajectory /odom chunk", "proprioceptive", session_id=sid,
                                data={"t0_ns": 1_800_000_000 * 10**9, "t": [0.0, 1.0], "x": [0.0, 0.5], "y": [0.0, 0.2]},
                                metadata={"source": {"topic": "/odom"},
                                          "spatial": {"start_position": [0, 0, 0], "end_position": [0.5, 0.2, 0],
                                                      "position": [0, 0, 0]}})
            mem.end_session(sid, outcome_score=0.8)
    return home


@pytest.fixture(scope="module")
def ui(home: Path) -> Iterator[UiServer]:
    server = UiServer(home)
    yield server
    server.stop()


def _open(browser: Any, ui: UiServer) -> None:
    browser.get(ui.url)
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr"))


def test_every_time_is_labelled_utc(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    assert browser.find_element(By.ID, "status").text.endswith(" UTC")  # "live, updated 12:00:03 UTC"
    headings = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#episodes th, #timeline th")]
    assert "start (UTC)" in headings
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{TWINS[0]}'] td:nth-child(2)").click()
    _wait(browser).until(lambda d: "kitchen door" in d.find_element(By.ID, "timeline").text)
    assert "time (UTC)" in browser.find_element(By.CSS_SELECTOR, "#timeline thead").text
    assert " UTC, " in browser.find_element(By.ID, "episode-facts").text  # "start 2027-01-15 08:00:00 UTC, ..."


def test_recall_links_name_the_whole_episode_and_no_hits_say_so(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    form = browser.find_element(By.ID, "recall-form")
    form.find_element(By.NAME, "q").send_keys("kitchen door swings")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#recall-results a.episode-link")) == 2)
    links = sorted(a.text for a in browser.find_elements(By.CSS_SELECTOR, "#recall-results a.episode-link"))
    assert tuple(links) == TWINS
    form.find_element(By.NAME, "filter").send_keys('{"robot.id": "nobody"}')
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser).until(lambda d: d.find_element(By.ID, "recall-note").text == "no results")
    assert not browser.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr")


def test_paths_without_a_frame_over_the_map_are_named_once(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    _wait(browser).until(lambda d: "(no frame)" in [o.get_attribute("value") for o in Select(d.find_element(By.ID, "frame")).options])
    Select(browser.find_element(By.ID, "frame")).select_by_value("(no frame)")
    _wait(browser).until(lambda d: d.find_element(By.ID, "frame-note").text)
    note = browser.find_element(By.ID, "frame-note").text
    assert "map map" not in note and "stored occupancy map (frame map, map.yaml)" in note


def test_an_empty_collection_says_it_has_no_episodes(browser: Any, home: Path) -> None:
    server = UiServer(home, "--collection", "empty")
    try:
        browser.get(server.url)
        _wait(browser).until(lambda d: d.find_element(By.ID, "episodes-note").text)
        assert browser.find_element(By.ID, "episodes-note").text == "no episodes in collection empty yet"
    finally:
        server.stop()
