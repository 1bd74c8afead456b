"""Reaching the API from a browser: a dashboard on an allowed origin, a token added to the address later."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from ui_helpers import UiServer

from robotmem import Memory

WAIT_S = 20  # how long the page may take to show what it fetched; not a speed target
TOKEN = "s3cret"
DASHBOARD_PAGE = """<!doctype html><title>waiting</title><script>
const api = new URLSearchParams(location.search).get("api");
fetch(api + "api/episodes", { headers: { Authorization: "Bearer s3cret" } })
  .then((r) => r.json()).then((body) => { document.title = "read " + body.episodes[0].robot; })
  .catch((error) => { document.title = "blocked: " + error; });
</script>"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ui-access")
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        episode = mem.start_session(context={"robot": {"id": "dash-bot"}})
        mem.learn("the charger is behind the blue door", session_id=episode["session_id"])
    return home


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Another origin: a page served on another port of this machine, as a team's dashboard would be."""
    folder = tmp_path_factory.mktemp("dashboard")
    (folder / "index.html").write_text(DASHBOARD_PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _dashboard_reads(browser: Any, dashboard: str, ui: UiServer) -> str:
    browser.get(f"{dashboard}/index.html?api={ui.url}")
    WebDriverWait(browser, WAIT_S).until(lambda d: d.title != "waiting")
    return str(browser.title)


def test_a_dashboard_on_an_allowed_origin_reads_the_api(browser: Any, home: Path, dashboard: str) -> None:
    allowed = UiServer(home, "--allow-origin", dashboard, env={"ROBOTMEM_TOKEN": TOKEN})
    try:
        assert _dashboard_reads(browser, dashboard, allowed) == "read dash-bot"
    finally:
        allowed.stop()
    not_named = UiServer(home, env={"ROBOTMEM_TOKEN": TOKEN})
    try:
        assert _dashboard_reads(browser, dashboard, not_named).startswith("blocked")
    finally:
        not_named.stop()


def test_a_token_added_to_the_address_later_is_used_without_a_reload(browser: Any, home: Path) -> None:
    guarded = UiServer(home, env={"ROBOTMEM_TOKEN": TOKEN})
    try:
        browser.get(guarded.url)
        WebDriverWait(browser, WAIT_S).until(
            lambda d: "token" in d.find_element(By.ID, "status").text)  # refused: no token yet
        browser.execute_script("window.__loaded_once = true")  # gone if the page reloads
        browser.get(guarded.url + "#token=" + TOKEN)  # the user adds it to the address
        WebDriverWait(browser, WAIT_S).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr[data-session]"))
        assert browser.execute_script("return window.__loaded_once") is True
        assert browser.find_element(By.ID, "status").text.startswith("live")
    finally:
        guarded.stop()
