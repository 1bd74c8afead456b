"""docs/mcp.md's tool examples, made again through the real stdio server and the SDK's client.

The calls are read from the document itself and made in the order it names (start_session,
learn, save_perception, the recalls, update, forget, end_session) on a new store with the
real model, so a change to ranking, relevance or a result's fields that makes the shown
results wrong fails here instead of leaving the document stale. Results shown in full must
match except for what differs per run (session id, clock times); shortened recall results
(``...``) must match in what they show: mode, count, which memories in which order, and
each relevance (which the default threshold must let through).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_client_helpers import REPO_ROOT, call_ok, server_env, stdio_session

from robotmem import Memory

from robotmem.models import DEFAULT_MIN_RELEVANCE

pytestmark = pytest.mark.anyio

DOC = REPO_ROOT / "docs" / "mcp.md"
#: differ per run: compared by presence only
VOLATILE = {"started_at", "duration_s"}
#: a shown relevance may be this far from today's (rounding, small tuning); a larger change
#: means the document's numbers no longer describe the server
RELEVANCE_TOLERANCE = 0.05
#: the note the client scripts' output shows (the README's first command stores it)
CUP_NOTE = "The cup is on the kitchen counter next to the window"


def tool_examples() -> dict[str, list[str]]:
    """Per tool section of the "Tools" chapter: the bodies of its ```json blocks, in order."""
    text = DOC.read_text(encoding="utf-8")
    tools = text.split("\n## Tools\n", 1)[1].split("\n## Errors\n", 1)[0]
    parts = re.split(r"^### (\w+)\(", tools, flags=re.MULTILINE)
    return {name: re.findall(r"```json\n(.*?)```", body, flags=re.DOTALL)
            for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def json_values(block: str) -> list[Any]:
    """The JSON values of a block that holds one or more of them (one call per value)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(block) and block[at].isspace():
            at += 1
        if at == len(block):
            return values
        value, at = decoder.raw_decode(block, at)
        values.append(value)


def shown_results(block: str) -> list[dict[str, Any]]:
    """What a shortened (``...``) recall result shows: one per ``{"mode": ...}`` value."""
    shown = []
    for text in re.split(r'(?=\{"mode")', block)[1:]:
        shown.append({
            "mode": re.search(r'"mode": "(\w+)"', text).group(1),  # type: ignore[union-attr]
            "count": int(re.search(r'"count": (\d+)', text).group(1)),  # type: ignore[union-attr]
            "ids": [int(i) for i in re.findall(r'\{"id": (\d+)', text)],
            "relevance": [None if r == "null" else float(r) for r in re.findall(r'"relevance": (null|[\d.]+)', text)],
            "distance": [float(d) for d in re.findall(r'"distance": ([\d.]+)', text)],
        })
    return shown


def check_full_result(real: dict[str, Any], shown: dict[str, Any]) -> None:
    assert set(real) == set(shown)
    assert {k: v for k, v in real.items() if k not in VOLATILE} == {k: v for k, v in shown.items() if k not in VOLATILE}


def check_recall(real: dict[str, Any], shown: dict[str, Any]) -> None:
    hits = real["results"]
    assert (real["mode"], real["count"], [h["id"] for h in hits]) == (shown["mode"], shown["count"], shown["ids"])
    assert [h.get("distance") for h in hits if "distance" in h] == shown["distance"]
    relevances = [h["relevance"] for h in hits]
    for got, expected in zip(relevances, shown["relevance"], strict=True):
        if expected is None:
            assert got is None
        else:
            assert got >= DEFAULT_MIN_RELEVANCE and abs(got - expected) <= RELEVANCE_TOLERANCE, (got, expected)


async def test_the_tool_examples_in_mcp_md_are_what_the_server_answers(robotmem_home: Path, tmp_path: Path) -> None:
    examples = tool_examples()
    (start_call,), (start_shown,) = (json_values(b) for b in examples["start_session"][:2])
    doc_sid = start_shown["session_id"]

    async with stdio_session(robotmem_home, tmp_path / "server.log") as session:
        started = await call_ok(session, "start_session", start_call)
        sid = started["session_id"]
        check_full_result({**started, "session_id": doc_sid}, start_shown)

        def with_real_session(value: Any) -> Any:
            return json.loads(json.dumps(value).replace(doc_sid, sid))

        async def run(tool: str) -> None:
            (call,), (shown,) = (json_values(b) for b in examples[tool][:2])
            real = await call_ok(session, tool, with_real_session(call))
            check_full_result(json.loads(json.dumps(real).replace(sid, doc_sid)), shown)

        await run("learn")
        await run("save_perception")

        recall_blocks = examples["recall"]
        calls = json_values(recall_blocks[0]) + json_values(recall_blocks[2])
        shown = shown_results(recall_blocks[1]) + shown_results(recall_blocks[3])
        assert len(calls) == len(shown) == 3
        for call, expected in zip(calls, shown, strict=True):
            check_recall(await call_ok(session, "recall", call), expected)

        # The sentence below the example: an ordinary question sharing few words needs a lower threshold.
        ordinary = {"query": "how hard to grip a cup", "collection": "kitchen", "n": 3}
        assert (await call_ok(session, "recall", ordinary))["count"] == 0
        weak = (await call_ok(session, "recall", {**ordinary, "min_relevance": 0}))["results"]
        assert [h["id"] for h in weak] == [1, 2] and all(h["relevance"] < DEFAULT_MIN_RELEVANCE for h in weak)

        await run("update")
        await run("forget")
        await run("end_session")


def check_printed(printed: str) -> None:
    """``MODE [(RELEVANCE, CONTENT)]`` as the document shows it; the relevance depends on the
    rest of the store (the document's store is the README's), so only its threshold is checked."""
    match = re.fullmatch(rf"(bm25_only|hybrid) \[\(([\d.]+), '{CUP_NOTE}'\)\]\n", printed)
    assert match is not None and float(match.group(2)) >= DEFAULT_MIN_RELEVANCE, printed


def python_scripts() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def run_script(code: str, **env: str) -> str:
    # cwd: the checkout, so the server the stdio script starts (python -m robotmem) is this code
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, **server_env(Path(env.pop("ROBOTMEM_HOME"))), **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_stdio_client_script_in_mcp_md_runs_as_written(tmp_path: Path) -> None:
    stdio, _http = python_scripts()
    home = tmp_path / "user"  # the script uses ~/.robotmem
    with Memory(home / ".robotmem" / "memory.db", embedder=None) as mem:
        mem.learn(CUP_NOTE)
    printed = run_script(stdio, HOME=str(home), ROBOTMEM_HOME=str(home / ".robotmem"))
    # The first recall of a new server: full text while the model loads, or hybrid if it is already loaded.
    check_printed(printed)


def test_the_http_client_script_in_mcp_md_runs_as_written(robotmem_home: Path, http_server_factory: Any) -> None:
    _stdio, http = python_scripts()
    with Memory(robotmem_home / "memory.db", embedder=None) as mem:
        mem.learn(CUP_NOTE)
    server = http_server_factory(ROBOTMEM_TOKEN="doc-token")
    assert "http://127.0.0.1:8765/mcp" in http
    script = http.replace("http://127.0.0.1:8765/mcp", server.url)  # port 0: the port the OS gave
    printed = run_script(script, ROBOTMEM_HOME=str(robotmem_home), ROBOTMEM_TOKEN="doc-token")
    check_printed(printed)


async def test_each_tool_heading_in_mcp_md_names_the_servers_parameters(robotmem_home: Path, tmp_path: Path) -> None:
    """``### recall(query, collection?, ...)``: the tool's parameters in order, ``?`` for optional."""
    text = DOC.read_text(encoding="utf-8").split("\n## Tools\n", 1)[1]
    headings = {m.group(1): m.group(2).split(", ") for m in re.finditer(r"^### (\w+)\((.*)\)$", text, re.MULTILINE)}
    async with stdio_session(robotmem_home, tmp_path / "server.log", ROBOTMEM_EMBEDDINGS="off") as session:
        tools = (await session.list_tools()).tools
    served = {tool.name: ([name if name in tool.input_schema.get("required", []) else f"{name}?"
                           for name in tool.input_schema.get("properties", {})]) for tool in tools}
    assert headings == served
