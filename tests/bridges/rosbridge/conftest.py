"""Fixtures for the rosbridge tests: a loopback rosbridge v2 server and quick reconnects."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from bridges.rosbridge.testing import RosbridgeTestServer
from robotmem import Memory


@pytest.fixture
def fast_reconnect() -> dict[str, float]:
    """Reconnect backoff for tests: fast, but still exponential."""
    return {"reconnect_initial_s": 0.05, "reconnect_max_s": 0.5}


@pytest.fixture
def rosbridge_server() -> Iterator[RosbridgeTestServer]:
    """A ROS 2 flavoured rosbridge server with rosapi, on a free loopback port."""
    with RosbridgeTestServer(ros_version=2, rosapi=True) as server:
        yield server


@pytest.fixture
def ros1_server_without_rosapi() -> Iterator[RosbridgeTestServer]:
    with RosbridgeTestServer(ros_version=1, rosapi=False) as server:
        yield server


@pytest.fixture
def memory(robotmem_home: Path) -> Iterator[Memory]:
    """A real store with the real embedding model, in this test's ROBOTMEM_HOME."""
    with Memory(robotmem_home / "memory.db", collection="robot") as mem:
        yield mem
