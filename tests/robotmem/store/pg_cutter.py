"""A proxy in front of a real PostgreSQL that loses a connection exactly at a COMMIT.

Between the client and the server's Unix socket it reads the wire protocol's message frames
(a type byte and a 4-byte length after the startup message), forwards everything, and, once
armed, treats the next COMMIT one of two ways:

- ``"answer"``: the COMMIT reaches the server and is carried out; its answer is read and thrown
  away and both sockets are closed, so the client sees the connection drop with no answer;
- ``"request"``: the connection is closed instead of forwarding the COMMIT (its Bind, when psycopg
  sends a prepared one), so the server ends the transaction by rolling it back.

It is the fault a network partition or a server restart causes at the worst moment, on the real
server with the real client library; only the timing is chosen.
"""

from __future__ import annotations

import socket
import struct
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

Cut = Literal["answer", "request"]


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _frames(sock: socket.socket, *, startup: bool) -> Iterator[tuple[bytes, bytes]]:
    """(type, whole frame) of each message; the startup message has no type byte (type b"")."""
    if startup:
        head = _read_exact(sock, 4)
        if head is None:
            return
        body = _read_exact(sock, struct.unpack("!I", head)[0] - 4)
        if body is None:
            return
        yield b"", head + body
    while True:
        head = _read_exact(sock, 5)
        if head is None:
            return
        body = _read_exact(sock, struct.unpack("!I", head[1:])[0] - 4)
        if body is None:
            return
        yield head[:1], head + body


def _is_commit(kind: bytes, frame: bytes, prepared: set[bytes]) -> bool:
    """A simple query "COMMIT", or the Bind of a statement prepared as one (psycopg prepares a
    statement it sends often, and then sends only its name). Parse messages are noted in ``prepared``."""
    fields = frame[5:].split(b"\0")
    if kind == b"Q":
        return _commit_text(fields[0])
    if kind == b"P":  # statement name, query
        if _commit_text(fields[1]):
            prepared.add(fields[0])
        return False
    return kind == b"B" and fields[1] in prepared  # portal name, statement name


def _commit_text(query: bytes) -> bool:
    return query.strip().rstrip(b";").upper() == b"COMMIT"


class CommitCutter:
    """Serves a Unix socket; ``url`` connects through it; ``arm(cut)`` cuts the next COMMIT."""

    def __init__(self, server_url: str) -> None:
        parts = urlsplit(server_url)
        query = dict(parse_qsl(parts.query))
        self._target = str(Path(query["host"]) / f".s.PGSQL.{parts.port or 5432}")
        self._folder = tempfile.mkdtemp(prefix="pg-cutter-")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(Path(self._folder) / f".s.PGSQL.{parts.port or 5432}"))
        self._listener.listen(16)
        query["host"] = self._folder
        self.url = parts._replace(query=urlencode(query)).geturl()
        self._lock = threading.Lock()
        self._armed: Cut | None = None
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, cut: Cut) -> None:
        with self._lock:
            self._armed = cut

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            cutting = threading.Event()
            threading.Thread(target=self._upstream, args=(client, server, cutting), daemon=True).start()
            threading.Thread(target=self._downstream, args=(client, server, cutting), daemon=True).start()

    def _take(self) -> Cut | None:
        with self._lock:
            cut, self._armed = self._armed, None
            if cut is not None:
                self.cuts += 1
            return cut

    def _upstream(self, client: socket.socket, server: socket.socket, cutting: threading.Event) -> None:
        prepared: set[bytes] = set()
        try:
            for kind, frame in _frames(client, startup=True):
                if _is_commit(kind, frame, prepared):
                    cut = self._take()
                    if cut == "request":
                        _close(client, server)
                        return
                    if cut == "answer":
                        cutting.set()  # from here on the server's bytes are this COMMIT's answer
                server.sendall(frame)
        except OSError:
            pass
        _close(client, server)

    @staticmethod
    def _downstream(client: socket.socket, server: socket.socket, cutting: threading.Event) -> None:
        try:
            for kind, frame in _frames(server, startup=False):
                if cutting.is_set():
                    if kind == b"Z":  # ReadyForQuery: the COMMIT was carried out; its answer is lost
                        break
                    continue
                client.sendall(frame)
        except OSError:
            pass
        _close(client, server)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
