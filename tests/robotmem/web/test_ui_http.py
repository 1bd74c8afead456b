"""`robotmem ui` over plain HTTP: the same token and Origin/Host rules as the HTTP MCP server, clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import UiServer

from robotmem import Memory
from robotmem.view.episodes import MAX_ROWS


class Reply:
    def __init__(self, status: int, body: bytes, headers: Any = None) -> None:
        self.status_code, self.text = status, body.decode()
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}

    def json(self) -> Any:
        return json.loads(self.text)


def _get(url: str, params: dict[str, str] | None = None, headers: dict[str, str] | None = None,
         method: str = "GET") -> Reply:
    """A request that returns error statuses instead of raising (the stdlib's urllib, no extra client)."""
    query = "?" + urllib.parse.urlencode(params) if params else ""
    request = urllib.request.Request(url + query, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Reply(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.read(), dict(error.headers))


@pytest.fixture(scope="module")
def small_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ui-http")
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        episode = mem.start_session(context={"robot": {"id": "r1"}, "task": {"name": "probe"}})
        mem.learn("the left gripper pad is worn", session_id=episode["session_id"])
        mem.end_session(episode["session_id"], outcome_score=0.2)
    return home


@pytest.fixture(scope="module")
def guarded(small_home: Path) -> Iterator[UiServer]:
    server = UiServer(small_home, env={"ROBOTMEM_TOKEN": "s3cret"})
    yield server
    server.stop()


def test_the_api_needs_the_token_and_the_page_does_not(guarded: UiServer) -> None:
    assert _get(guarded.url + "api/episodes").status_code == 401
    ok = _get(guarded.url + "api/episodes", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    (row,) = ok.json()["episodes"]
    assert (row["robot"], row["task"], row["outcome_score"], row["facts"]) == ("r1", "probe", 0.2, 1)
    page = _get(guarded.url)
    assert page.status_code == 200 and "<title>robotmem</title>" in page.text and "gripper" not in page.text


def test_a_foreign_origin_and_a_foreign_host_are_refused(guarded: UiServer) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    assert _get(guarded.url + "api/episodes", headers={**auth, "Origin": "http://evil.example"}).status_code == 403
    assert _get(guarded.url + "api/episodes", headers={**auth, "Host": "evil.example"}).status_code == 421
    assert _get(guarded.url, headers={"Host": "evil.example"}).status_code == 421


def test_bad_requests_get_errors_naming_the_field(guarded: UiServer) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    bad_filter = _get(guarded.url + "api/recall", params={"q": "gripper", "filter": "{oops"}, headers=auth)
    assert bad_filter.status_code == 400 and bad_filter.json()["error"]["field"] == "context_filter"
    bad_near = _get(guarded.url + "api/recall", params={"near": "here"}, headers=auth)
    assert bad_near.status_code == 400 and bad_near.json()["error"]["field"] == "near"
    missing = _get(guarded.url + "api/episodes/no-such-episode", headers=auth)
    assert missing.status_code == 404
    found = _get(guarded.url + "api/recall", params={"q": "gripper pad"}, headers=auth)
    assert found.status_code == 200 and found.json()["results"][0]["content"] == "the left gripper pad is worn"


def test_binding_beyond_loopback_without_a_token_is_refused(small_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ROBOTMEM_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "ui", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env={**env, "ROBOTMEM_HOME": str(small_home)})
    assert proc.returncode != 0
    assert "token" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def many_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More episodes than the list shows in the default collection, one in collection lab2."""
    home = tmp_path_factory.mktemp("ui-many")
    os.environ["ROBOTMEM_HOME"] = str(home)
    with Memory(embedder=None) as mem:
        for i in range(MAX_ROWS + 1):
            mem.start_session(context={"robot": {"id": f"bot-{i}"}})
        lab2 = mem.start_session(collection="lab2", context={"robot": {"id": "lab2-bot"}})
        mem.learn("lab2's door opens inwards", session_id=lab2["session_id"])
    return home


def test_the_list_shows_the_documented_number_and_says_older_ones_are_hidden(many_home: Path) -> None:
    server = UiServer(many_home)
    try:
        body = _get(server.url + "api/episodes").json()
    finally:
        server.stop()
    assert (len(body["episodes"]), body["more"], body["collection"]) == (MAX_ROWS, True, "default")
    assert body["episodes"][0]["robot"] == f"bot-{MAX_ROWS}"  # newest first: the oldest one is left out
    assert {row["collection"] for row in body["episodes"]} == {"default"}


def test_the_list_shows_the_collection_recall_and_the_map_use(many_home: Path) -> None:
    server = UiServer(many_home, "--collection", "lab2")
    try:
        body = _get(server.url + "api/episodes").json()
        recalled = _get(server.url + "api/recall", params={"q": "door opens inwards"}).json()
    finally:
        server.stop()
    assert (body["collection"], body["more"]) == ("lab2", False)
    assert [(row["robot"], row["facts"]) for row in body["episodes"]] == [("lab2-bot", 1)]
    assert {hit["collection"] for hit in recalled["results"]} == {"lab2"}


@pytest.mark.parametrize("n", ["nan", "inf", "1e400", "2.5", "ten", "0", "101"])
def test_a_count_that_is_not_a_whole_number_in_range_is_a_400_naming_n(guarded: UiServer, n: str) -> None:
    reply = _get(guarded.url + "api/recall", params={"q": "gripper", "n": n}, headers={"Authorization": "Bearer s3cret"})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "n", reply.text


@pytest.mark.parametrize("memory_id", ["abc", "-1", "0", "1.5"])
def test_a_bad_memory_id_for_an_image_is_a_json_400_naming_it(guarded: UiServer, memory_id: str) -> None:
    reply = _get(guarded.url + f"api/memories/{memory_id}/image", headers={"Authorization": "Bearer s3cret"})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "memory_id", reply.text


def _episode_id(server: UiServer) -> str:
    (row,) = _get(server.url + "api/episodes", headers={"Authorization": "Bearer s3cret"}).json()["episodes"]
    return str(row["session_id"])


@pytest.mark.parametrize("page", ["-1", "2.5", "abc", "1e400", "nan"])
def test_a_timeline_page_that_is_not_a_whole_number_from_0_is_a_400_naming_it(guarded: UiServer, page: str) -> None:
    reply = _get(guarded.url + f"api/episodes/{_episode_id(guarded)}/timeline", params={"page": page},
                 headers={"Authorization": "Bearer s3cret"})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "page", reply.text


def test_the_timeline_pages_start_at_the_episodes_and_end_empty(guarded: UiServer) -> None:
    auth, sid = {"Authorization": "Bearer s3cret"}, _episode_id(guarded)
    detail = _get(guarded.url + f"api/episodes/{sid}", headers=auth).json()
    first = _get(guarded.url + f"api/episodes/{sid}/timeline", headers=auth).json()  # no page: the first
    assert first["timeline"] == detail["timeline"] and [line["kind"] for line in first["timeline"]] == [
        "start", "fact", "end"]
    assert (first["timeline_total"], first["timeline_page"], first["timeline_next_page"]) == (3, 0, None)
    past = _get(guarded.url + f"api/episodes/{sid}/timeline", params={"page": "1"}, headers=auth)
    assert past.status_code == 200 and (past.json()["timeline"], past.json()["timeline_total"]) == ([], 3)
    unknown = _get(guarded.url + "api/episodes/ses_no_such_episode/timeline", headers=auth)
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "session_id"


def test_an_unknown_api_path_and_memory_get_json_404s(guarded: UiServer) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    assert _get(guarded.url + "api/memories/999/image", headers=auth).json()["error"]["field"] == "memory_id"
    unknown = _get(guarded.url + "api/no-such-thing", headers=auth)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


DASHBOARD = "http://Dash.example:18999/"  # as a user may type it: case and a trailing slash do not matter


@pytest.fixture(scope="module")
def shared_with_dashboard(small_home: Path) -> Iterator[UiServer]:
    server = UiServer(small_home, "--allow-origin", DASHBOARD, env={"ROBOTMEM_TOKEN": "s3cret"})
    yield server
    server.stop()


def test_an_allowed_origin_gets_cors_headers_and_its_preflight_an_answer(shared_with_dashboard: UiServer) -> None:
    origin = "http://dash.example:18999"  # what a browser sends
    preflight = _get(shared_with_dashboard.url + "api/episodes", method="OPTIONS", headers={
        "Origin": origin, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == origin
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    reply = _get(shared_with_dashboard.url + "api/episodes", headers={"Origin": origin, "Authorization": "Bearer s3cret"})
    assert reply.status_code == 200 and reply.headers["access-control-allow-origin"] == origin
    assert reply.json()["episodes"][0]["robot"] == "r1"
    unauthorized = _get(shared_with_dashboard.url + "api/episodes", headers={"Origin": origin})
    assert unauthorized.status_code == 401 and unauthorized.headers["access-control-allow-origin"] == origin


def test_other_origins_get_no_cors_headers(shared_with_dashboard: UiServer, guarded: UiServer) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    foreign = _get(shared_with_dashboard.url + "api/episodes", headers={**auth, "Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
    local = _get(guarded.url + "api/episodes", headers={**auth, "Origin": "http://localhost:3000"})
    assert local.status_code == 200 and "access-control-allow-origin" not in local.headers
