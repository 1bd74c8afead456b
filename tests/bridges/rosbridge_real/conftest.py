"""The real rosbridge server (ROS 1) with real rospy publishers.

Skipped, with one reason, on a machine without ROS 1 set up (../shared/rosbridge/setup.sh);
under CI=true, where .ci/run sets it up, a missing server fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridges.rosbridge.testing.real_server import RealRosbridge, missing_ros
from robotmem import Memory


@pytest.fixture(scope="module")
def real_rosbridge() -> Iterator[RealRosbridge]:
    reason = missing_ros()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real rosbridge server: {reason}")
        pytest.skip(reason)
    with RealRosbridge() as server:
        yield server


@pytest.fixture
def memory(robotmem_home: Path) -> Iterator[Memory]:
    with Memory(robotmem_home / "memory.db", collection="robot") as mem:
        yield mem
