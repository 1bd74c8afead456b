"""A real `robotmem ui` process over a store filled by replaying recordings, and a real headless Chromium.

Chromium comes from Debian's packages (`chromium`, `chromium-driver`; .ci/run installs
them when CI=true); nothing here downloads a browser. Without them these tests skip
locally with that one reason, and fail under CI, where they must run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_helpers import ARTIFACTS, UiServer

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def _need_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        message = f"headless Chromium not installed ({', '.join(missing)} missing: apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)


def _cli(home: Path, *args: str, timeout: float = 300) -> str:
    env = {**os.environ, "ROBOTMEM_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def filled_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five episodes from the sample recordings (odom and base_link frames) + the TurtleBot 3 run and its map."""
    home = tmp_path_factory.mktemp("ui-home")
    split = ("--episode-split", "topic:/robotmem/episode")
    _cli(home, "replay", str(REPO / "datasets" / "nav_demo.mcap"), *split, "--robot-id", "demo-bot")
    _cli(home, "replay", str(REPO / "datasets" / "arm_push_ros2"), *split, "--robot-id", "arm-1")
    tb3 = SHARED / "datasets" / "turtlebot3_nav_ros1_bag"
    if tb3.is_dir():
        _cli(home, "replay", str(tb3 / "rosbag_demo.bag"), "--robot-id", "tb3")
    elif os.environ.get("CI"):
        pytest.fail(f"{tb3} missing; CI must have ../shared")
    return home


@pytest.fixture(scope="module")
def ui(filled_home: Path) -> Iterator[UiServer]:
    tb3_map = SHARED / "datasets" / "turtlebot3_nav_ros1_bag" / "map.yaml"
    server = UiServer(filled_home, *(["--map", str(tb3_map)] if tb3_map.exists() else []))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    _need_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1800", f"--user-data-dir={ARTIFACTS.parent / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # page errors, read by console_errors
    shutil.rmtree(ARTIFACTS.parent / "chromium-profile", ignore_errors=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
