"""The real rosbridge server (ROS 1, rosbridge_suite 0.11.17) and real ROS nodes, for tests and benchmarks.

``../shared/rosbridge`` (beside the checkout) holds ``start.sh`` / ``stop.sh``; ``setup.sh``
installs ROS 1 from Debian and builds the server into ``$ROSB`` (default
``${TMPDIR:-/tmp}/robotmem-rosbridge``). :class:`RealRosbridge` runs its own instance of that
install: a private ROSB folder (links to the built parts, its own logs and pid files) on free
ports, so it never touches a server someone else started. Publishers are real rospy nodes
(``scripts/ros_publisher.py`` under Debian's ``/usr/bin/python3``).

``missing_ros()`` says, in one sentence, why the real server cannot run here (None: it can).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["RealRosbridge", "RosPublisher", "free_port", "missing_ros", "shared_rosbridge_dir"]

REPO = Path(__file__).resolve().parents[3]
SYSTEM_PYTHON = "/usr/bin/python3"
PUBLISHER = REPO / "scripts" / "ros_publisher.py"
#: the parts of a built ROSB folder an instance links to (logs and pid files are its own)
_SHARED_PARTS = ("env.sh", "src", "pkgs", "py", "stub", "roshome")


def shared_rosbridge_dir() -> Path:
    """``../shared/rosbridge`` beside the checkout (start.sh, stop.sh, setup.sh)."""
    return Path(os.environ.get("ROBOTMEM_SHARED", REPO.parent / "shared")) / "rosbridge"


def installed_rosb() -> Path:
    """Where setup.sh built the server."""
    return Path(os.environ.get("ROSB") or Path(os.environ.get("TMPDIR", "/tmp")) / "robotmem-rosbridge")


def missing_ros() -> str | None:
    """Why the real rosbridge server cannot run on this machine, or None."""
    scripts = shared_rosbridge_dir()
    if not (scripts / "start.sh").exists():
        return f"the real rosbridge scripts are not at {scripts} (../shared/rosbridge)"
    rosb = installed_rosb()
    if not (rosb / "env.sh").exists():
        return f"the real rosbridge server is not set up at {rosb}: run {scripts / 'setup.sh'}"
    if shutil.which("rosmaster") is None or not Path(SYSTEM_PYTHON).exists():
        return "ROS 1 (rosmaster, /usr/bin/python3 with python3-rospy) is not installed: run setup.sh"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RealRosbridge:
    """rosmaster + rosbridge_websocket + rosapi on free ports, in a private ROSB folder."""

    def __init__(self) -> None:
        reason = missing_ros()
        if reason is not None:
            raise RuntimeError(reason)
        self.scripts = shared_rosbridge_dir()
        self.installed = installed_rosb()
        self.rosb = Path(tempfile.mkdtemp(prefix="robotmem-rosb-"))
        for part in _SHARED_PARTS:
            if (self.installed / part).exists():
                (self.rosb / part).symlink_to(self.installed / part)
        (self.rosb / "logs").mkdir()
        self.port = free_port()
        self.master_port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment start.sh / stop.sh and ROS nodes of this instance run with."""
        return {**os.environ, "ROSB": str(self.rosb), "ROSBRIDGE_PORT": str(self.port),
                "ROS_MASTER_PORT": str(self.master_port)}

    def start(self) -> None:
        subprocess.run(["bash", str(self.scripts / "start.sh")], env=self.env, check=True, capture_output=True,
                       timeout=60)

    def stop(self) -> None:
        subprocess.run(["bash", str(self.scripts / "stop.sh")], env=self.env, check=False, capture_output=True,
                       timeout=60)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.rosb, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- taking the websocket server down and up (rosmaster, rosapi and the publishers stay) --

    def kill_websocket(self) -> None:
        """End rosbridge_websocket (its pid file from start.sh), as a crash would."""
        pid_file = self.rosb / "rosbridge.pid"
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        pid_file.unlink()

    def start_websocket(self) -> None:
        """Start rosbridge_websocket again as start.sh does; returns once its port accepts connections."""
        command = (f'cd "{self.rosb}" && . ./env.sh && exec {SYSTEM_PYTHON} '
                   "src/rosbridge_server/scripts/rosbridge_websocket.py __name:=rosbridge_websocket "
                   f"_address:=127.0.0.1 _port:={self.port}")
        with open(self.rosb / "logs" / "rosbridge.log", "ab") as log:
            proc = subprocess.Popen(["bash", "-c", command], env=self.env, stdout=log, stderr=log,
                                    start_new_session=True)
        (self.rosb / "rosbridge.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"rosbridge_websocket did not listen on {self.port}; see {self.rosb}/logs")

    def publisher(self, streams: list[dict[str, Any]], seconds: float, *, wait_for_subscriber: bool = True,
                  text: str | None = None, sim_time: dict[str, Any] | None = None) -> RosPublisher:
        return RosPublisher(self, {"streams": streams, "seconds": seconds,
                                   "wait_for_subscriber": wait_for_subscriber, "text": text, "sim_time": sim_time})


class RosPublisher:
    """One rospy node publishing the streams of ``spec`` (see scripts/ros_publisher.py)."""

    def __init__(self, server: RealRosbridge, spec: dict[str, Any]) -> None:
        command = f'. "{server.rosb}/env.sh" && exec {SYSTEM_PYTHON} "{PUBLISHER}" \'{json.dumps(spec)}\''
        self.proc = subprocess.Popen(["bash", "-c", command], env=server.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the node publishes (after its subscribers connected, when it waits for them)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if json.loads(line).get("ready"):
                return
        raise RuntimeError(f"the ROS publisher did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def result(self, timeout: float = 120.0) -> dict[str, dict[str, Any]]:
        """Per topic: count, first and last stamp (seconds) of what was published."""
        out, err = self.proc.communicate(timeout=timeout)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the ROS publisher failed ({self.proc.returncode}): {err}")
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        return {row["topic"]: row for row in rows if "topic" in row}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
