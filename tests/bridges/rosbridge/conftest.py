"""Fixtures for the rosbridge tests: a loopback rosbridge v2 server and quick reconnects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridges.pipeline.config import BridgeConfig
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.testing import RosbridgeTestServer
from robotmem import Memory
from robotmem.config import Config


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


class BridgeFactory:
    """Starts bridges against the test server; stops (flushes) whatever is left at teardown."""

    def __init__(self, memory: Memory, fast_reconnect: dict[str, float]) -> None:
        self.memory = memory
        self.fast_reconnect = fast_reconnect
        self.status_lines: list[str] = []
        self._bridges: list[RosBridge] = []

    def __call__(self, server: RosbridgeTestServer, config: BridgeConfig | None = None,
                 **options: Any) -> RosBridge:
        settings: dict[str, Any] = {"url": server.url, "collection": "robot", "robot_id": "tb3",
                                    "status_interval_s": 60.0, **self.fast_reconnect, **options}
        bridge = RosBridge(self.memory, config or BridgeConfig(), BridgeOptions(**settings),
                           status_sink=self.status_lines.append)
        self._bridges.append(bridge)
        bridge.start()
        assert bridge.wait_connected(10), "bridge did not connect to the test server"
        return bridge

    def stop_all(self) -> None:
        for bridge in self._bridges:
            bridge.stop()


@pytest.fixture
def start_bridge(memory: Memory, fast_reconnect: dict[str, float]) -> Iterator[BridgeFactory]:
    factory = BridgeFactory(memory, fast_reconnect)
    yield factory
    factory.stop_all()


@pytest.fixture
def busy_memory(robotmem_home: Path) -> Iterator[Memory]:
    """A real store whose writers give up after 100 ms when another connection holds the write lock."""
    config = Config.load(busy_timeout_ms=100)
    with Memory(robotmem_home / "busy.db", collection="robot", config=config) as mem:
        yield mem


@pytest.fixture
def start_bridge_on_busy_store(busy_memory: Memory, fast_reconnect: dict[str, float]) -> Iterator[BridgeFactory]:
    factory = BridgeFactory(busy_memory, fast_reconnect)
    yield factory
    factory.stop_all()
