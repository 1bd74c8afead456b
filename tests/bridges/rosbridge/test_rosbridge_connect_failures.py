"""Why the bridge cannot connect is said once (refused, handshake), then only the retries are counted."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from bridges.pipeline import BridgeConfig
from bridges.rosbridge.bridge import BridgeOptions, RosBridge
from bridges.rosbridge.status import format_status
from bridges.rosbridge.testing.real_server import free_port


def _run(url: str, seconds: float) -> tuple[list[str], RosBridge]:
    lines: list[str] = []
    bridge = RosBridge(None, BridgeConfig(), BridgeOptions(url=url, dry_run=True, recall=False,
                                                           follow_control_sessions=False, status_interval_s=60.0,
                                                           reconnect_initial_s=0.05, reconnect_max_s=0.3),
                       status_sink=lines.append)
    bridge.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and bridge.connection.failed_attempts < 3:
        time.sleep(0.05)
    return lines, bridge


def test_a_refused_connection_is_explained_once_and_retries_are_counted() -> None:
    lines, bridge = _run(f"ws://127.0.0.1:{free_port()}", 10)
    try:
        attempts = bridge.connection.failed_attempts
        assert attempts >= 3
        reasons = [line for line in lines if "cannot connect" in line]
        assert len(reasons) == 1 and "connection refused" in reasons[0]
        assert f"{bridge.snapshot().failed_attempts} attempts failed" in format_status(None, bridge.snapshot(), 5.0)
    finally:
        bridge.stop()


@pytest.fixture
def plain_http_server() -> Iterator[str]:
    """A web server that is not a websocket server (a wrong port, a proxy)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *args: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"ws://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_failed_websocket_handshake_is_explained(plain_http_server: str) -> None:
    lines, bridge = _run(plain_http_server, 10)
    try:
        reasons = [line for line in lines if "cannot connect" in line]
        assert len(reasons) == 1 and "websocket handshake failed" in reasons[0], lines
    finally:
        bridge.stop()
