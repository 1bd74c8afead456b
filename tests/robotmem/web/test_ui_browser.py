"""The web view as a person uses it, in a real headless Chromium against a real `robotmem ui`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from ui_helpers import ARTIFACTS, UiServer

from robotmem import Memory

WAIT_S = 20  # how long the page may take to show what it fetched; not a speed target


def _wait(browser: Any) -> WebDriverWait[Any]:
    # The page redraws lists and paths when episodes arrive, so an element read a moment ago may be gone: look again.
    return WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


def _sessions(home: Path) -> list[dict[str, Any]]:
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        return list(mem.list_sessions())


def _open(browser: Any, ui: UiServer) -> None:
    browser.get(ui.url)
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr"))


def _paths(browser: Any) -> list[str]:
    return [p.get_attribute("data-session") for p in browser.find_elements(By.CSS_SELECTOR, "path.episode-path")]


def _choose_frame(browser: Any, frame: str) -> None:
    def chosen(d: Any) -> bool:
        select = Select(d.find_element(By.ID, "frame"))
        if frame not in [o.get_attribute("value") for o in select.options]:
            return False
        if d.find_element(By.ID, "frame").get_attribute("value") != frame:
            select.select_by_value(frame)
        return bool(d.find_element(By.ID, "frame").get_attribute("value") == frame)

    _wait(browser).until(chosen)


def test_the_map_shows_one_path_per_episode_in_its_frame(browser: Any, ui: UiServer, filled_home: Path) -> None:
    sessions = _sessions(filled_home)
    by_robot = {robot: sorted(s["session_id"] for s in sessions if s["context"]["robot"]["id"] == robot)
                for robot in ("demo-bot", "arm-1")}
    assert len(by_robot["demo-bot"]) == 2 and len(by_robot["arm-1"]) == 3  # what the recordings' markers say
    _open(browser, ui)
    _choose_frame(browser, "odom")
    _wait(browser).until(lambda d: sorted(_paths(d)) == by_robot["demo-bot"])
    browser.save_screenshot(str(ARTIFACTS / "map-odom.png"))
    _choose_frame(browser, "base_link")
    _wait(browser).until(lambda d: sorted(_paths(d)) == by_robot["arm-1"])
    # each path is drawn with a start and an end mark, and in its outcome's colour (arm outcomes 0.4, 0.7, 1.0)
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.episode circle.start")) == 3
    classes = sorted(p.get_attribute("class") for p in browser.find_elements(By.CSS_SELECTOR, "path.episode-path"))
    assert classes == ["episode-path outcome-fail", "episode-path outcome-ok", "episode-path outcome-ok"]


def test_the_turtlebot_run_is_drawn_over_its_occupancy_map(browser: Any, ui: UiServer, filled_home: Path) -> None:
    tb3 = [s["session_id"] for s in _sessions(filled_home) if s["context"]["robot"]["id"] == "tb3"]
    if not tb3:
        pytest.skip("the shared TurtleBot 3 recording is not beside the checkout")
    _open(browser, ui)
    _choose_frame(browser, "(no frame)")
    _wait(browser).until(lambda d: _paths(d) == tb3)
    image = browser.find_element(By.CSS_SELECTOR, "#map image.occupancy")
    assert float(image.get_attribute("width")) == pytest.approx(124 * 0.05)  # map.pgm is 124 x 115 cells at 5 cm
    assert "map.yaml" in browser.find_element(By.ID, "frame-note").text
    browser.save_screenshot(str(ARTIFACTS / "map-turtlebot3.png"))


def test_clicking_an_episode_opens_its_timeline_and_plots(browser: Any, ui: UiServer, filled_home: Path) -> None:
    session = next(s for s in _sessions(filled_home) if (s["context"].get("task") or {}).get("name") == "fetch_cup")
    with Memory(embedder=None) as mem:
        memories = mem.session_timeline(session["session_id"])["memories"]
    _open(browser, ui)
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{session['session_id']}']").click()
    panel = browser.find_element(By.ID, "episode-panel")
    _wait(browser).until(lambda d: panel.get_attribute("data-session") == session["session_id"]
                                         and d.find_elements(By.CSS_SELECTOR, "#timeline tbody tr"))
    # Read in one script: a poll may redraw the timeline between two element reads.
    rows = browser.execute_script("return [...document.querySelectorAll('#timeline tbody tr')]"
                                  ".map((r) => [r.className.split(' ')[0], r.textContent])")
    kinds = [kind for kind, _ in rows]
    assert len([k for k in kinds if k not in ("timeline-start", "timeline-end", "timeline-gap")]) == len(memories)
    assert kinds[0] == "timeline-start" and kinds[-1] == "timeline-end"
    assert any("narrow doorway" in text or "doorway between hall and kitchen" in text for _, text in rows)
    # the timeline is drawn when its lines come, the plots when the episode's paths and plots do
    _wait(browser).until(lambda d: {"joint positions", "laser scan", "images"}
                         <= {p.get_attribute("data-plot") for p in d.find_elements(By.CSS_SELECTOR, ".plot")})
    plots = {p.get_attribute("data-plot"): p for p in browser.find_elements(By.CSS_SELECTOR, ".plot")}
    assert plots["joint positions"].find_element(By.TAG_NAME, "svg").get_attribute("data-series") == "2"  # two wheels
    _wait(browser).until(lambda d: len(plots["images"].find_elements(By.TAG_NAME, "canvas")) > 0)
    browser.save_screenshot(str(ARTIFACTS / "episode.png"))


def test_clicking_a_path_opens_that_episode(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    _choose_frame(browser, "odom")
    _wait(browser).until(lambda d: len(_paths(d)) == 2)
    path = browser.find_elements(By.CSS_SELECTOR, "path.episode-path")[0]
    wanted = path.get_attribute("data-session")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", path)
    _wait(browser).until(
        lambda d: d.find_element(By.ID, "episode-panel").get_attribute("data-session") == wanted)


def _recall(browser: Any, **fields: str) -> list[Any]:
    form = browser.find_element(By.ID, "recall-form")
    for name in ("q", "filter", "near", "since", "until"):
        box = form.find_element(By.NAME, name)
        box.clear()
        if fields.get(name):
            box.send_keys(fields[name])
    before = browser.execute_script("window.__recalls = (window.__recalls || 0) + 1; return window.__recalls")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait(browser).until(lambda d: d.execute_script(
        "return document.querySelector('#recall-error').textContent !== '' || "
        "document.querySelectorAll('#recall-results tbody tr').length > 0 || window.__recalls !== arguments[0]",
        before) is not None)
    return browser.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr")


def test_recall_with_a_filter_returns_the_expected_rows(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    _recall(browser, q="narrow doorway between hall and kitchen", filter=json.dumps({"robot.id": "demo-bot"}))
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr")
    assert "doorway between hall and kitchen" in rows[0].text
    assert all('"demo-bot"' in r.find_elements(By.TAG_NAME, "td")[6].text for r in rows)
    assert 0 < float(rows[0].find_element(By.CSS_SELECTOR, "td.relevance").text) <= 1
    browser.save_screenshot(str(ARTIFACTS / "recall.png"))
    _recall(browser, q="narrow doorway between hall and kitchen", filter=json.dumps({"robot.id": "arm-1", "task.name": "fetch_cup"}))
    _wait(browser).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr"))


def test_a_bad_filter_shows_the_error_and_the_page_keeps_working(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    _recall(browser, q="doorway", filter="{not json")
    _wait(browser).until(lambda d: "context_filter" in d.find_element(By.ID, "recall-error").text
                                         or "JSON" in d.find_element(By.ID, "recall-error").text)
    _recall(browser, q="doorway")
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr"))


def test_clicking_the_map_recalls_nearest_first(browser: Any, ui: UiServer) -> None:
    _open(browser, ui)
    _choose_frame(browser, "odom")
    _wait(browser).until(lambda d: len(_paths(d)) == 2)
    svg = browser.find_element(By.ID, "map")
    # near the top-left corner, where no path lies (a click on a path opens its episode instead)
    ActionChains(browser).move_to_element_with_offset(svg, -svg.size["width"] // 2 + 12,
                                                      -svg.size["height"] // 2 + 12).click().perform()
    _wait(browser).until(lambda d: d.find_element(By.NAME, "near").get_attribute("value"))
    _wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr"))
    distances = [float(r.find_elements(By.TAG_NAME, "td")[4].text.split()[0])
                 for r in browser.find_elements(By.CSS_SELECTOR, "#recall-results tbody tr")
                 if r.find_elements(By.TAG_NAME, "td")[4].text]
    assert distances and distances == sorted(distances)
    assert browser.find_elements(By.CSS_SELECTOR, "#map circle.near")


def test_an_episode_written_while_the_page_is_open_appears(browser: Any, ui: UiServer, filled_home: Path) -> None:
    _open(browser, ui)
    before = len(browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr"))
    os.environ["ROBOTMEM_HOME"] = str(filled_home)
    with Memory(embedder=None) as mem:  # another process's writer, as a running bridge would be
        episode = mem.start_session(context={"robot": {"id": "live-bot"}, "task": {"name": "patrol"}})
        # two chunks 10 s apart with an outage recorded between them, as the bridge writes after a disconnection
        for t0_s, xs in ((1_800_000_000, [0.0, 1.0]), (1_800_000_012, [3.0, 4.0])):
            mem.save_perception("pose trajectory /odom live chunk", "proprioceptive",
                                data={"t0_ns": t0_s * 10**9, "t": [0.0, 1.0], "x": xs, "y": [0.0, 0.0]},
                                metadata={"source": {"topic": "/odom"},
                                          "gaps": [{"start": 1_800_000_001.0, "end": 1_800_000_012.0,
                                                    "reason": "disconnected"}],
                                          "spatial": {"start_position": [xs[0], 0, 0], "end_position": [xs[1], 0, 0],
                                                      "position": [xs[0], 0, 0], "frame": "odom"}},
                                session_id=episode["session_id"])
    _wait(browser).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == before + 1)
    assert browser.find_elements(By.CSS_SELECTOR, f"tr[data-session='{episode['session_id']}']")
    _choose_frame(browser, "odom")
    live_path = f"path.episode-path[data-session='{episode['session_id']}']"
    drawn = _wait(browser).until(lambda d: [(p.get_attribute("data-segments"), p.get_attribute("d").count("M"))
                                            for p in d.find_elements(By.CSS_SELECTOR, live_path)])
    assert drawn == [("2", 2)]  # the outage is a break, not a line across it
