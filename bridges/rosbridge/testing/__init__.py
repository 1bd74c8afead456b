"""Test support shipped with the bridge: a loopback rosbridge v2 server and message builders.

The benchmark (scripts/bench_bridge.py) and the tests both use them, so they live in the
package rather than under tests/.
"""

from __future__ import annotations

from . import messages
from .server import RosbridgeTestServer, StreamHandle, Subscription

__all__ = ["RosbridgeTestServer", "StreamHandle", "Subscription", "messages"]
