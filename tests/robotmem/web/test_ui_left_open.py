"""A page left open in headless Chromium while a robot runs episode after episode: the map keeps
to the newest episodes and what the person ticked, and the page keeps nothing of the others."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import UiServer, page_errors

from robotmem import Memory

WAIT_S = 60  # how long the page may take to show what it fetched (polls back off under load); not a speed target
AUTO_TICK = 10  # app.js: the newest this many are ticked


def _episode(mem: Memory, i: int) -> str:
    sid: str = mem.start_session(context={"robot": {"id": f"r{i}"}})["session_id"]
    at = time.time()
    mem.save_perceptions([{"description": "pose chunk", "perception_type": "proprioceptive", "session_id": sid,
                           "embed": False, "occurred_at": at,
                           "data": {"t0_ns": int(at * 1e9), "t": [0.0, 0.1], "x": [i, i + 1.0], "y": [0.0, 1.0]},
                           "metadata": {"source": {"topic": "/odom"},
                                        "spatial": {"start_position": [i, 0], "end_position": [i + 1, 1], "frame": "map"}}}])
    mem.end_session(sid)
    return sid


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("ui-left-open")
    os.environ["ROBOTMEM_HOME"] = str(path)
    with Memory(embedder=None) as mem:
        ids = [_episode(mem, i) for i in range(AUTO_TICK + 2)]
    return {"home": path, "ids": ids}


@pytest.fixture(scope="module")
def ui(home: dict[str, Any]) -> Iterator[UiServer]:
    server = UiServer(home["home"])
    yield server
    server.stop()


def _ticked(browser: Any) -> list[str]:
    return list(browser.execute_script(
        "return [...document.querySelectorAll('#episodes tbody tr')].filter((r) => r.querySelector('input').checked)"
        ".map((r) => r.dataset.session)"))


def test_episodes_the_page_ticked_are_unticked_when_newer_ones_come(browser: Any, ui: UiServer,
                                                                    home: dict[str, Any]) -> None:
    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    browser.get(ui.url)
    wait.until(lambda d: len(_ticked(d)) == AUTO_TICK)
    oldest = home["ids"][0]
    browser.find_element(By.CSS_SELECTOR, f"tr[data-session='{oldest}'] input").click()  # the person's choice
    os.environ["ROBOTMEM_HOME"] = str(home["home"])
    with Memory(embedder=None) as mem:  # the robot runs more episodes while the page stays open
        newer = [_episode(mem, i) for i in range(100, 100 + AUTO_TICK + 5)]
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == len(home["ids"]) + len(newer))
    wait.until(lambda d: set(_ticked(d)) == {*newer[-AUTO_TICK:], oldest})  # every new one stayed ticked: 26
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#map path.episode-path")) == AUTO_TICK + 1)
    assert browser.execute_script("return state.details.size") <= AUTO_TICK + 1  # only what is drawn is kept
    assert page_errors(browser) == []
