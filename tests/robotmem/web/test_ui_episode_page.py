"""The episode panel with awkward episodes: very long series, one that cannot be shown."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import ARTIFACTS, UiServer, page_errors

from robotmem import Memory
from robotmem.view.episodes import TIMELINE_PAGE
from robotmem.view.series import MAX_IMAGES

WAIT_S = 60  # how long the page may take to show what it fetched (polls back off under load); not a speed target
SAMPLES = 200_000
MANY = 1_500  # records in one episode: three timeline pages and a line
IMAGES = MAX_IMAGES + 3


def _wait(browser: Any) -> WebDriverWait[Any]:
    return WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A small episode, and one whose tactile payload holds 200,000 samples."""
    home = tmp_path_factory.mktemp("ui-episode-page")
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        small = mem.start_session(context={"robot": {"id": "small-bot"}, "task": {"name": "wave"}})["session_id"]
        mem.save_perception("wrist joint chunk", "proprioceptive",
                            data={"names": ["wrist"], "t": [0.0, 1.0], "positions": [[0.1], [0.2]]}, session_id=small)
        mem.end_session(small, outcome_score=0.9)
        long = mem.start_session(context={"robot": {"id": "press-bot"}, "task": {"name": "press"}})["session_id"]
        mem.save_perception("fingertip force during the long press", "tactile",
                            data={"t": [i * 0.001 for i in range(SAMPLES)], "fz": [float(i % 997) for i in range(SAMPLES)]},
                            session_id=long)
        many = mem.start_session(context={"robot": {"id": "tap-bot"}, "task": {"name": "tap"}})["session_id"]
        mem.save_perceptions([{"description": f"tap {i}", "perception_type": "tactile", "session_id": many,
                               "data": {"t0_ns": (1_800_000_000 + i) * 10**9, "t": [0.0, 0.5], "fz": [0.0, i % 7]},
                               "embed": False} for i in range(MANY)])
        live = mem.start_session(context={"robot": {"id": "live-bot"}, "task": {"name": "watch"}})["session_id"]
        mem.learn("x" * 300, session_id=live)  # one unbroken string, longer than the window is wide
        for i in range(IMAGES):
            mem.save_perception(f"camera frame {i}", "visual", session_id=live,
                                data={"thumbnail": bytes(range(48)), "thumbnail_shape": [4, 4, 3]})
    return {"home": str(home), "small": small, "long": long, "many": many, "live": live}


@pytest.fixture(scope="module")
def ui(episodes: dict[str, str]) -> Iterator[UiServer]:
    server = UiServer(Path(episodes["home"]))
    yield server
    server.stop()


def _open_row(browser: Any, session_id: str) -> None:
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"tr[data-session='{session_id}']"))
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{session_id}'] td:nth-child(2)").click()


def _timeline(browser: Any) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, "#timeline tbody").text)


def test_a_long_series_is_drawn_decimated_after_another_episode(browser: Any, ui: UiServer,
                                                                episodes: dict[str, str]) -> None:
    browser.get(ui.url)
    page_errors(browser)
    _open_row(browser, episodes["small"])
    _wait(browser).until(lambda d: "wrist joint chunk" in _timeline(d))
    _open_row(browser, episodes["long"])
    _wait(browser).until(lambda d: "fingertip force" in _timeline(d))
    assert episodes["long"] in browser.find_element(By.ID, "episode-title").text
    assert "wrist" not in _timeline(browser)
    plots = {p.get_attribute("data-plot"): p for p in browser.find_elements(By.CSS_SELECTOR, "#plots .plot")}
    assert set(plots) == {"forces"}  # the other episode's joint plot is gone
    assert plots["forces"].find_element(By.TAG_NAME, "svg").get_attribute("data-decimated") == "true"
    assert "of 200,000 samples, decimated" in plots["forces"].text
    assert page_errors(browser) == []
    browser.save_screenshot(str(ARTIFACTS / "episode-long-series.png"))


def test_an_episode_that_cannot_be_shown_leaves_nothing_of_the_previous_one(browser: Any, ui: UiServer,
                                                                             episodes: dict[str, str]) -> None:
    browser.get(ui.url)
    _open_row(browser, episodes["small"])
    _wait(browser).until(lambda d: "wrist joint chunk" in _timeline(d))
    browser.execute_script("openEpisode('ses_no_such_episode')")  # e.g. a recall hit whose episode is gone
    _wait(browser).until(lambda d: "cannot show this episode" in d.find_element(By.ID, "episode-error").text)
    assert "ses_no_such_episode" in browser.find_element(By.ID, "episode-title").text
    assert _timeline(browser) == "" and not browser.find_elements(By.CSS_SELECTOR, "#plots .plot")
    assert "facts" not in browser.find_element(By.ID, "episode-facts").text


def _timeline_rows(browser: Any) -> int:
    return len(browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr"))


def test_an_episode_of_many_records_gets_one_curve_and_its_timeline_a_page_at_a_time(
        browser: Any, ui: UiServer, episodes: dict[str, str]) -> None:
    browser.get(ui.url)
    _open_row(browser, episodes["many"])
    _wait(browser).until(lambda d: "tap 0" in _timeline(d))
    (legend,) = browser.find_elements(By.CSS_SELECTOR, "[data-plot='forces'] .plot-legend span")
    assert legend.text.startswith(f"fz ({MANY:,} records; ") and f"of {2 * MANY:,} samples, decimated" in legend.text
    lines = MANY + 1  # the records and the start marker (the episode is open)
    assert _timeline_rows(browser) == TIMELINE_PAGE
    assert f"{TIMELINE_PAGE:,} of {lines:,} lines" in browser.find_element(By.ID, "timeline-note").text
    browser.find_element(By.ID, "timeline-more").click()
    _wait(browser).until(lambda d: _timeline_rows(d) >= 2 * TIMELINE_PAGE)
    while _timeline_rows(browser) < lines:  # the button scrolled into view loads the next page, as a person scrolls
        shown = _timeline_rows(browser)
        browser.execute_script("document.getElementById('timeline-more').scrollIntoView()")
        _wait(browser).until(lambda d: _timeline_rows(d) > shown)
    assert not browser.find_element(By.ID, "timeline-more").is_displayed()
    contents = browser.execute_script(
        "return [...document.querySelectorAll('#timeline tbody td.content')].map((td) => td.textContent)")
    assert contents[1:] == [f"tap {i}" for i in range(MANY)]  # every record once, in order, after the start
    assert browser.find_element(By.ID, "timeline-note").text == ""
    assert page_errors(browser) == []


def test_the_open_episode_follows_its_row_and_long_text_wraps(browser: Any, ui: UiServer,
                                                               episodes: dict[str, str]) -> None:
    browser.get(ui.url)
    _open_row(browser, episodes["live"])
    _wait(browser).until(lambda d: "x" * 50 in _timeline(d))
    # Read through the wait: the panel may be redrawn between finding the heading and reading it.
    _wait(browser).until(lambda d: d.find_element(By.CSS_SELECTOR, "[data-plot='images'] h4").text
                         == f"images ({MAX_IMAGES} of {IMAGES} shown)")
    _wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-plot='images'] canvas")) == MAX_IMAGES)
    widths = browser.execute_script(
        "const panel = document.querySelector('#episode-panel'); const page = document.documentElement;"
        "return [page.scrollWidth, page.clientWidth, panel.scrollWidth, panel.clientWidth]")
    assert widths[0] <= widths[1] and widths[2] <= widths[3], widths  # wrapped, not wider than the window
    os.environ["ROBOTMEM_HOME"] = episodes["home"]
    with Memory(embedder=None) as mem:  # another process writes into the open episode
        mem.learn("the watched shelf is empty now", session_id=episodes["live"])
    _wait(browser).until(lambda d: "the watched shelf is empty now" in _timeline(d))
    assert browser.find_element(By.ID, "episode-panel").get_attribute("data-session") == episodes["live"]
    assert browser.find_element(By.CSS_SELECTOR, f"tr.selected[data-session='{episodes['live']}']")


def test_a_redrawn_episode_keeps_the_timeline_pages_it_had_loaded(browser: Any, ui: UiServer,
                                                                   episodes: dict[str, str]) -> None:
    browser.get(ui.url)
    _open_row(browser, episodes["many"])
    _wait(browser).until(lambda d: _timeline_rows(d) == TIMELINE_PAGE)
    browser.find_element(By.ID, "timeline-more").click()
    _wait(browser).until(lambda d: _timeline_rows(d) >= 2 * TIMELINE_PAGE)
    loaded = _timeline_rows(browser)
    os.environ["ROBOTMEM_HOME"] = episodes["home"]
    with Memory(embedder=None) as mem:  # another process writes into the open episode: its row changes
        mem.save_perception("one more tap", "tactile", data={"t": [0.0], "fz": [1.0]}, session_id=episodes["many"])
    _wait(browser).until(lambda d: f"{MANY + 1} perceptions" in d.find_element(By.ID, "episode-facts").text)
    _wait(browser).until(lambda d: f"of {MANY + 2:,} lines" in d.find_element(By.ID, "timeline-note").text)
    assert _timeline_rows(browser) == loaded  # redrawn with the pages it had, not back to the first
    assert page_errors(browser) == []
