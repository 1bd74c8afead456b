"""The HTTP guard in front of /mcp: Origin, Host and bearer token, on a real ASGI app."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from robotmem.errors import ConfigError
from robotmem.mcp.http_guard import HttpGuard, is_loopback_host
from robotmem.mcp.transports import check_http_binding


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def _client(**guard: Any) -> httpx2.AsyncClient:
    app = HttpGuard(Starlette(routes=[Route("/mcp", _hello, methods=["GET", "POST"])]), **guard)
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "localhost", "::1", "[::1]", "LOCALHOST"])
def test_loopback_hosts_are_recognised(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com", "", "127.0.0.1.evil.com", "[127.0.0.1]",
                                  "[::1].evil.example"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_binding_beyond_loopback_without_a_token_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ConfigError) as caught:
        check_http_binding("0.0.0.0", None)
    assert "ROBOTMEM_TOKEN" in caught.value.message and "0.0.0.0" in caught.value.message


def test_binding_beyond_loopback_with_a_token_is_allowed() -> None:
    check_http_binding("0.0.0.0", "s3cret")
    check_http_binding("127.0.0.1", None)


@pytest.mark.anyio
async def test_without_a_configured_token_requests_pass() -> None:
    async with _client(token=None, check_host=True) as client:
        response = await client.get("/mcp")
    assert response.status_code == 200 and response.text == "hello"


@pytest.mark.anyio
@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic s3cret", "s3cret", "Bearer "])
async def test_missing_or_wrong_token_is_401(authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with _client(token="s3cret", check_host=True) as client:
        response = await client.post("/mcp", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.anyio
async def test_right_token_passes() -> None:
    async with _client(token="s3cret", check_host=True) as client:
        response = await client.post("/mcp", headers={"Authorization": "Bearer s3cret"})
    assert response.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:9000"])
async def test_loopback_origins_are_accepted(origin: str) -> None:
    async with _client(token=None, check_host=True) as client:
        response = await client.get("/mcp", headers={"Origin": origin})
    assert response.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize("origin", [
    "https://evil.example", "null", "http://localhost.evil.example",
    # Lenient URL parsers read the first as ::1 and crash (500) on the second.
    "http://[::1].evil.example", "http://[127.0.0.1]", "http://[127.0.0.1]:80", "http://[::1", "http://::1]",
    "http://localhost@evil.example", "http://evil.example@localhost", "http://127.0.0.1:99999999",
    "ftp://localhost", "http://localhost/path", "http://localhost?x", "http://[::ffff:127.0.0.1]x", "http://",
    "http://%6c%6f%63%61%6c%68%6f%73%74", "http://127.0.0.1\x00", "http://[::1]:80:80",
])
async def test_foreign_origin_is_403(origin: str) -> None:
    async with _client(token=None, check_host=True) as client:
        response = await client.get("/mcp", headers={"Origin": origin})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.anyio
async def test_an_explicitly_allowed_origin_is_accepted() -> None:
    async with _client(token=None, check_host=False, allowed_origins=["https://dash.example/"]) as client:
        response = await client.get("/mcp", headers={"Origin": "https://dash.example"})
    assert response.status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["evil.example:8765", "[::1].evil.example", "[127.0.0.1]:8765", "localhost:x"])
async def test_loopback_server_refuses_a_foreign_host_header(host: str) -> None:
    # What a DNS-rebinding page produces: the right address under the attacker's name.
    async with _client(token=None, check_host=True) as client:
        response = await client.get("/mcp", headers={"Host": host})
    assert response.status_code == 421


@pytest.mark.anyio
async def test_a_server_bound_beyond_loopback_accepts_any_host_header() -> None:
    async with _client(token="s3cret", check_host=False) as client:
        response = await client.get(
            "/mcp", headers={"Host": "robot.lan:8765", "Authorization": "Bearer s3cret"}
        )
    assert response.status_code == 200
