"""The page in headless Chromium: one detail request per episode in flight however slow the server,
a map fitted to the points that are not outliers, user text isolated, nothing refused by the CSP."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import UiServer, page_errors

from robotmem import Memory

WAIT_S = 30
RLO = "\u202e"


def _chunk(mem: Memory, sid: str, xs: list[float], ys: list[float], at: float, frame: str = "map") -> None:
    mem.save_perceptions([{"description": "pose chunk", "perception_type": "proprioceptive", "session_id": sid,
                           "embed": False, "occurred_at": at,
                           "data": {"t0_ns": int(at * 1e9), "t": [0.1 * i for i in range(len(xs))], "x": xs, "y": ys},
                           "metadata": {"source": {"topic": "/odom"},
                                        "spatial": {"start_position": [xs[0], ys[0]], "end_position": [xs[-1], ys[-1]],
                                                    "frame": frame}}}])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("ui-limits")
    os.environ["ROBOTMEM_HOME"] = str(path)
    ids: dict[str, Any] = {"home": path}
    now = time.time()
    with Memory(embedder=None) as mem:
        for i in range(9):  # older episodes with nothing to draw: more episodes than the page ticks
            mem.start_session(context={"robot": {"id": f"old-{i}"}})
        for name, xs, ys in (("normal", [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 0.0, 1.0]),
                             ("huge", [1e15, 1e15 + 1, 1e15 + 2], [1e15, 1e15, 1e15 + 1])):
            ids[name] = mem.start_session(context={"robot": {"id": name}})["session_id"]
            _chunk(mem, ids[name], xs, ys, now)
        ids["rlo"] = mem.start_session(context={"robot": {"id": "arm-1"}, "task": {"name": "pick " + RLO}})["session_id"]
        _chunk(mem, ids["rlo"], [0.0, 1.0], [0.0, 1.0], now)
        ids["live"] = mem.start_session(context={"robot": {"id": "live"}})["session_id"]
        _chunk(mem, ids["live"], [0.0, 0.5], [0.0, 0.5], now)
    return ids


@pytest.fixture(scope="module")
def ui(home: dict[str, Any]) -> Iterator[UiServer]:
    server = UiServer(home["home"])
    yield server
    server.stop()


def _rows_loaded(browser: Any, ui: UiServer) -> None:
    browser.get(ui.url)
    WebDriverWait(browser, WAIT_S).until(lambda d: len(d.find_elements("css selector", "#episodes tbody tr")) == 13)


def test_the_map_fits_the_normal_paths_and_names_the_episode_out_of_range(browser: Any, ui: UiServer,
                                                                          home: dict[str, Any]) -> None:
    _rows_loaded(browser, ui)
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements("css selector", f'#map path[data-session="{home["normal"]}"]'))
    box = browser.execute_script(f"return document.querySelector('#map path[data-session=\"{home['normal']}\"]')"
                                 ".getBoundingClientRect().toJSON()")
    assert box["width"] > 50 and box["height"] > 20, box  # every path was 0x0 px with the 1e15 pose in the fit
    note = browser.find_element("id", "range-note")
    assert home["huge"] in note.text and "outside" in note.text
    assert not browser.find_elements("css selector", f'#map path[data-session="{home["huge"]}"]')
    # newest 10 ticked, the older ones only listed
    ticked = browser.execute_script("return [...document.querySelectorAll('#episodes tbody input')].filter(b => b.checked).length")
    assert ticked == 10
    assert page_errors(browser) == []


def test_a_right_to_left_override_in_a_task_name_stays_inside_it(browser: Any, ui: UiServer, home: dict[str, Any]) -> None:
    _rows_loaded(browser, ui)
    browser.find_element("css selector", f'tr[data-session="{home["rlo"]}"]').click()
    WebDriverWait(browser, WAIT_S).until(lambda d: home["rlo"] in d.find_element("id", "episode-title").text
                                         and "loading" not in d.find_element("id", "episode-title").text)
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements("css selector", f'#map path[data-session="{home["rlo"]}"]'))
    parts = browser.execute_script("return [...document.querySelectorAll('#episode-title bdi')].map(b => b.textContent)")
    assert parts == ["arm-1", "pick " + RLO, home["rlo"]]
    label = browser.execute_script(f"return document.querySelector('#map path[data-session=\"{home['rlo']}\"] title').textContent")
    assert RLO not in label and "\u2068pick \u2069" in label  # the tooltip's user text isolated, the override dropped


def test_one_detail_request_per_episode_in_flight_while_the_server_is_slow_and_the_episode_grows(
        browser: Any, ui: UiServer, home: dict[str, Any]) -> None:
    _rows_loaded(browser, ui)
    live = home["live"]
    browser.find_element("css selector", f'tr[data-session="{live}"]').click()
    WebDriverWait(browser, WAIT_S).until(lambda d: live in d.find_element("id", "episode-title").text)
    # every episode answer now takes 4 s (a long episode's build), longer than the 3 s poll
    browser.execute_script("""
      window.__inflight = {}; window.__max = {}; window.__sent = 0; window.__list = 0; window.__listMax = 0;
      const real = window.fetch;
      window.fetch = async (...args) => {
        const url = String(args[0]);
        const list = url.startsWith('api/episodes') && !url.startsWith('api/episodes/');
        const key = url.startsWith('api/episodes/') ? url.split('?')[0] : null;
        if (list) { window.__list++; window.__listMax = Math.max(window.__listMax, window.__list); }
        if (key) { window.__sent++; window.__inflight[key] = (window.__inflight[key] || 0) + 1;
                   window.__max[key] = Math.max(window.__max[key] || 0, window.__inflight[key]); }
        try {
          const response = await real(...args);
          if (key) await new Promise((r) => setTimeout(r, 4000));
          return response;
        } finally {
          if (key) window.__inflight[key]--;
          if (list) window.__list--;
        }
      };""")
    stop = threading.Event()

    def writer() -> None:  # a bridge writing into the open episode: its row changes at every poll
        os.environ["ROBOTMEM_HOME"] = str(home["home"])
        with Memory(embedder=None) as mem:
            while not stop.is_set():
                _chunk(mem, live, [0.5, 0.6], [0.5, 0.6], time.time())
                stop.wait(0.5)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(20)
    finally:
        stop.set()
        thread.join()
    sent, most, list_most = browser.execute_script("return [window.__sent, window.__max, window.__listMax]")
    assert sent >= 1, "the open live episode was never fetched again"
    assert max(most.values()) == 1, most  # setInterval + a cache filled after completion had several per episode
    assert list_most <= 1
    assert page_errors(browser) == []


def test_the_page_works_under_its_content_security_policy(browser: Any, ui: UiServer, home: dict[str, Any]) -> None:
    browser.get_log("browser")  # drop what earlier tests logged
    _rows_loaded(browser, ui)
    browser.find_element("css selector", f'tr[data-session="{home["normal"]}"]').click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "loading" not in d.find_element("id", "episode-title").text)
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements("css selector", "#map path.episode-path"))
    assert browser.execute_script("return getComputedStyle(document.querySelector('.plot-legend span, #episodes td')).color")
    refused = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == []
