"""The web API in process (the ASGI app called directly, no socket): bounded episode builds,
JSON for every error, strict whole numbers, the security headers, the token rule."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import robotmem.view.episodes as episodes
import robotmem.web.app as web_app
from robotmem import Memory
from robotmem.errors import ConfigError
from robotmem.mcp.transports import check_http_binding
from robotmem.web.app import MAX_BUILDS, BuildGate, build_app


async def _call(app: Any, path: str, query: str = "", method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": query.encode(),
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80)}
    messages: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # no disconnect: the app cancels this wait once it has answered
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    start = messages[0]
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in messages[1:])


def get(app: Any, path: str, query: str = "", method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    return asyncio.run(_call(app, path, query, method))


@pytest.fixture()
def mem(tmp_path: Path) -> Iterator[Memory]:
    os.environ["ROBOTMEM_HOME"] = str(tmp_path)
    with Memory(embedder=None) as memory:
        yield memory


class _SlowBuilds:
    """Stands in for episode_detail: counts the builds and holds each until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()

    def __call__(self, mem: Memory, session_id: str) -> dict[str, Any]:
        self.started.append(session_id)
        assert self.release.wait(30)
        return {"episode": {"session_id": session_id}, "big": list(range(1000))}

    def wait_for(self, n: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.started) < n:
            assert time.monotonic() < deadline, self.started
            time.sleep(0.01)


def test_concurrent_requests_for_one_episode_share_one_build_and_more_episodes_wait(
        mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = _SlowBuilds()
    monkeypatch.setattr(web_app, "episode_detail", builds)
    gate = BuildGate()
    app = build_app(mem, host="127.0.0.1", token=None, gate=gate)

    async def scenario() -> tuple[list[Any], list[Any], tuple[int, dict[str, str], bytes]]:
        same = [asyncio.create_task(_call(app, "/api/episodes/ses_a")) for _ in range(6)]
        await asyncio.to_thread(builds.wait_for, 1)
        await asyncio.sleep(0.2)  # the other five are waiting for the first build, not building
        others = [asyncio.create_task(_call(app, f"/api/episodes/ses_{k}")) for k in "bcdefg"[:MAX_BUILDS - 1]]
        await asyncio.to_thread(builds.wait_for, MAX_BUILDS)
        refused = await _call(app, "/api/episodes/ses_z")  # every slot taken: refused at once
        builds.release.set()
        return await asyncio.gather(*same), await asyncio.gather(*others), refused

    same, others, refused = asyncio.run(scenario())
    assert builds.started.count("ses_a") == 1 and len(builds.started) == MAX_BUILDS == gate.builds
    assert {status for status, _, _ in same} == {200} and len({body for _, _, body in same}) == 1
    assert json.loads(same[0][2])["episode"]["session_id"] == "ses_a"
    assert [status for status, _, _ in others] == [200] * (MAX_BUILDS - 1)
    status, headers, body = refused
    assert status == 503 and headers["retry-after"] == "2" and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "busy"
    # nothing is kept after a build: the next request reads the store afresh
    assert get(app, "/api/episodes/ses_a")[0] == 200 and builds.started.count("ses_a") == 2


def test_a_failed_build_fails_every_request_sharing_it_and_frees_its_slot(
        mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(mem: Memory, session_id: str) -> Any:
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(web_app, "episode_detail", broken)
    app = build_app(mem, host="127.0.0.1", token=None)
    for _ in range(MAX_BUILDS + 2):  # a leaked slot would turn these into 503s
        status, headers, body = get(app, "/api/episodes/ses_x")
        assert status == 500 and headers["content-type"] == "application/json"
        assert json.loads(body)["error"]["code"] == "internal_error" and "disk on fire" not in body.decode()


def test_an_unexpected_error_or_a_nan_anywhere_still_answers_json(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_app, "episode_list",
                        lambda mem, **query: {"a": [float("nan"), 1.5, float("-inf")]})
    app = build_app(mem, host="127.0.0.1", token=None)
    status, _, body = get(app, "/api/episodes")
    assert status == 200 and json.loads(body) == {"a": [None, 1.5, None]}
    monkeypatch.setattr(web_app, "episode_list", lambda mem, **query: 1 / 0)
    status, headers, body = get(app, "/api/episodes")
    assert status == 500 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "internal_error"


def test_an_episode_with_nan_and_inf_poses_opens(mem: Memory) -> None:
    sid = mem.start_session()["session_id"]
    nan = float("nan")
    mem.save_perception("pose chunk", "proprioceptive",
                        data={"t0_ns": 10**18, "t": [0.0, 0.1, 0.2], "x": [0.0, nan, 1.0], "y": [0.0, 0.5, float("inf")]},
                        metadata={"source": {"topic": "/odom"},
                                  "spatial": {"start_position": [0, 0], "end_position": [1, 1], "frame": "map"}},
                        session_id=sid)
    status, headers, body = get(build_app(mem, host="127.0.0.1", token=None), f"/api/episodes/{sid}")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["paths"][0]["segments"] == [[[0.0, 0.0]]]


@pytest.mark.parametrize("page", ["1_0", "\u0661", "\uff11", "  1 ", "0x1", "1.0", "+1", "-x", "-"])
def test_a_page_number_is_ascii_digits_only(mem: Memory, page: str) -> None:
    sid = mem.start_session()["session_id"]
    app = build_app(mem, host="127.0.0.1", token=None)
    status, _, body = get(app, f"/api/episodes/{sid}/timeline", "page=" + urllib.parse.quote(page))
    assert status == 400, (page, body)
    assert json.loads(body)["error"]["field"] == "page"
    assert get(app, f"/api/episodes/{sid}/timeline", "page=1")[0] == 200
    status, _, body = get(app, f"/api/episodes/{sid}/timeline", "page=-1")
    assert status == 400 and json.loads(body)["error"]["field"] == "page"


@pytest.mark.parametrize("memory_id", ["\u0663", "0_3", "%EF%BC%93", "%203"])
def test_a_memory_id_is_ascii_digits_only(mem: Memory, memory_id: str) -> None:
    status, _, body = get(build_app(mem, host="127.0.0.1", token=None), f"/api/memories/{memory_id}/image")
    assert status == 400 and json.loads(body)["error"]["field"] == "memory_id"


def test_every_api_404_is_json_and_every_answer_has_the_security_headers(mem: Memory) -> None:
    app = build_app(mem, host="127.0.0.1", token=None)
    for path in ("/api", "/api/", "/api/nope"):
        status, headers, body = get(app, path)
        assert status == 404 and headers["content-type"] == "application/json", path
        assert json.loads(body)["error"]["code"]
    for path in ("/", "/app.js", "/api/episodes", "/api"):
        headers = get(app, path)[1]
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "default-src 'none'" in headers["content-security-policy"]


def test_a_token_of_spaces_is_no_token_for_a_public_bind() -> None:
    for blank in ("", " ", "\t \n"):
        with pytest.raises(ConfigError, match="without a token"):
            check_http_binding("0.0.0.0", blank)
    check_http_binding("0.0.0.0", " s3cret ")
    check_http_binding("127.0.0.1", " ")


@pytest.mark.parametrize(("path", "query", "field"), [
    ("/api/episodes", "limit=-1", "limit"),  # the list takes no limit: not silently the newest 500
    ("/api/episodes/{sid}/timeline", "pgae=3", "pgae"),  # a typo opened the first page
    ("/api/recall", "query=doorway", "query"),  # recall's text is q
    ("/api/map", "zzz=1", "zzz"),
    ("/api/memories/1/image", "size=9", "size"),
    ("/api/recall", "q=a&n=1&n=2", "n"),  # the last one won
    ("/api/episodes/{sid}/timeline", "page=1&page=2", "page"),
    ("/api/episodes", "collection=a&collection=b", "collection"),
    ("/api/recall", "q=%ff%fe", "q"),  # recalled "\ufffd\ufffd": 200 with nothing
    ("/api/recall", "q=door&filter=%7B%22robot.id%22%3A%22%ff%22%7D", "filter"),
    ("/api/episodes/{sid}/timeline", "at=%ff", "at"),
])
def test_an_unknown_repeated_or_non_utf8_parameter_is_a_400_naming_it(mem: Memory, path: str, query: str,
                                                                      field: str) -> None:
    sid = mem.start_session()["session_id"]
    status, headers, body = get(build_app(mem, host="127.0.0.1", token=None), path.format(sid=sid), query)
    assert status == 400 and headers["content-type"] == "application/json", (query, body)
    assert json.loads(body)["error"]["field"] == field


def test_the_documented_parameters_are_still_taken(mem: Memory) -> None:
    sid = mem.start_session()["session_id"]
    mem.learn("the narrow doorway", session_id=sid)
    app = build_app(mem, host="127.0.0.1", token=None)
    for path, query in [("/api/episodes", "collection=default"), ("/api/map", "collection=default"),
                        (f"/api/episodes/{sid}/timeline", "at=end"), (f"/api/episodes/{sid}/timeline", "page=0"),
                        ("/api/recall", "q=doorway+narrow&filter=&near=1%2C2&field=spatial.position&max_distance=5"
                                        "&since=2020-01-01&until=&n=3&min_relevance=0&collection=default")]:
        assert get(app, path, query)[0] == 200, (path, query)


def test_anything_but_get_is_a_json_405(mem: Memory) -> None:
    app = build_app(mem, host="127.0.0.1", token=None)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = get(app, "/api/episodes", method=method)
        assert status == 405 and headers["content-type"] == "application/json", (method, body)
        assert json.loads(body)["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("after", ["yesterday", "[]", "{}", '[1.5]', '["x","ses_1a2b3c4d5e6f"]', '[1e999,"ses_1a2b3c4d5e6f"]',
                                   '[1.5,"not an id"]', '[true,"ses_1a2b3c4d5e6f"]', "%ff"])
def test_an_episodes_cursor_the_server_did_not_send_is_a_400_naming_after(mem: Memory, after: str) -> None:
    mem.start_session()
    query = "after=" + (after if after.startswith("%") else urllib.parse.quote(after))
    status, headers, body = get(build_app(mem, host="127.0.0.1", token=None), "/api/episodes", query)
    assert status == 400 and headers["content-type"] == "application/json", (after, body)
    assert json.loads(body)["error"]["field"] == "after"


def test_the_episode_list_pages_through_every_episode_by_its_cursor(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "MAX_ROWS", 7)
    ids = [mem.start_session()["session_id"] for _ in range(30)]
    app = build_app(mem, host="127.0.0.1", token=None)
    listed: list[str] = []
    query = ""
    while True:
        status, _, body = get(app, "/api/episodes", query)
        assert status == 200
        page = json.loads(body)
        listed += [row["session_id"] for row in page["episodes"]]
        if page["next"] is None:
            assert page["more"] is False
            break
        assert page["more"] is True and len(page["episodes"]) == 7
        mem.start_session()  # a robot starts another meanwhile: the next page goes on where this one ended
        query = "after=" + urllib.parse.quote(page["next"])
    # every episode once, newest first: the order the store's sessions sort in, read with apsw
    rows = apsw.Connection(str(Path(os.environ["ROBOTMEM_HOME"]) / "memory.db")).execute(
        "SELECT id, started_at FROM sessions").fetchall()
    order = [sid for sid, _ in sorted(rows, key=lambda r: (-r[1], r[0])) if sid in set(ids)]
    assert listed == order and len(listed) == 30


def test_the_episode_list_of_one_robot(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "MAX_ROWS", 3)
    ids = [mem.start_session(context={"robot": {"id": f"r{i % 2}"}})["session_id"] for i in range(9)]
    app = build_app(mem, host="127.0.0.1", token=None)
    page = json.loads(get(app, "/api/episodes", "robot=r1")[2])
    rest = json.loads(get(app, "/api/episodes", "robot=r1&after=" + urllib.parse.quote(page["next"]))[2])
    assert page["robot"] == "r1" and rest["next"] is None
    assert {row["robot"] for row in page["episodes"] + rest["episodes"]} == {"r1"}
    assert sorted(row["session_id"] for row in page["episodes"] + rest["episodes"]) == sorted(ids[1::2])
    status, _, body = get(app, "/api/episodes", "robot=a%00b")
    assert status == 400 and json.loads(body)["error"]["field"] == "robot"
