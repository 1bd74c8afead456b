"""Hostile import files: every bad line is refused with its line number and nothing gets in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotmem import Memory, ValidationError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def export_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A real export: a session, a fact, a perception with a payload."""
    folder = tmp_path_factory.mktemp("export")
    with Memory(folder / "source.db", embedder=None) as source:
        sid = source.start_session(context={"task": {"name": "pick"}})["session_id"]
        source.learn("grip the red cup at 12 N", context={"params": {"grip_force": 12}}, session_id=sid)
        source.save_perception("the red cup is on the shelf", data={"joints": [0.1, 0.2, 0.3]}, session_id=sid)
        source.export(folder / "export.jsonl")
    return (folder / "export.jsonl").read_text(encoding="utf-8").splitlines()


def _memory_line(lines: list[str], kind: str = "fact") -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line).get("type") == kind)


def _with(lines: list[str], index: int, change: dict[str, Any] | str) -> list[str]:
    changed = list(lines)
    changed[index] = change if isinstance(change, str) else json.dumps({**json.loads(lines[index]), **change})
    return changed


def _import(tmp_path: Path, lines: list[str], embedder: Any = None) -> tuple[Memory, Any]:
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    memory = Memory(tmp_path / "target.db", embedder=embedder)
    try:
        return memory, memory.import_(path)
    except ValidationError as exc:
        return memory, exc


def _stored(memory: Memory) -> int:
    return len(memory.recall("", since=0, n=100, min_confidence=0)["results"])


DEEP = '{"a":' * 10_000 + "1" + "}" * 10_000
HOSTILE: list[tuple[str, str, dict[str, Any] | str]] = [
    ("reinforced_at yesterday", "fact", {"reinforced_at": "yesterday"}),
    ("created_at NaN", "fact", {"created_at": float("nan")}),
    ("context as a list", "fact", {"context": [1, 2]}),
    ("context too large", "fact", {"context": {"note": "x" * 70_000}}),
    ("10k-deep line", "fact", DEEP),
    ("not JSON", "fact", "{this is not json"),
    ("cut-off line", "fact", '{"kind": "memory", "id": 1, "coll'),
    ("bad base64 payload", "perception", {"payload": "***not base64***"}),
    ("payload not msgpack", "perception", {"payload": "wcHBwcHB"}),
    ("vector bad base64", "fact", {"embedding": {"model_id": "m", "vector": "%%%"}}),
    ("vector not float32", "fact", {"embedding": {"model_id": "m", "vector": "AAAAAAA="}}),
    ("confidence 7", "fact", {"confidence": 7}),
    ("status deleted", "fact", {"status": "deleted"}),
    ("type rumor", "fact", {"type": "rumor"}),
    ("id -1", "fact", {"id": -1}),
    ("collection path", "fact", {"collection": "../etc"}),
    ("unknown session", "fact", {"session_id": "ses_doesnotexist"}),
    ("evidence_count text", "fact", {"evidence_count": "many"}),
    ("absorbed not ids", "fact", {"absorbed": ["x"]}),
    ("kind unknown", "fact", {"kind": "virus"}),
]


@pytest.mark.parametrize("name, kind, change", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_line_is_refused_with_its_number_and_nothing_gets_in(
    tmp_path: Path, export_lines: list[str], name: str, kind: str, change: dict[str, Any] | str
) -> None:
    index = _memory_line(export_lines, kind)
    memory, outcome = _import(tmp_path, _with(export_lines, index, change))
    with memory:
        assert isinstance(outcome, ValidationError), f"{name} was imported: {outcome}"
        assert f"line {index + 1}" in outcome.message and len(outcome.message) <= 600
        assert _stored(memory) == 0 and memory.list_sessions() == []


def test_imported_search_text_and_payload_summary_are_recomputed_not_trusted(
    tmp_path: Path, export_lines: list[str]
) -> None:
    fact, perception = _memory_line(export_lines), _memory_line(export_lines, "perception")
    lines = _with(export_lines, fact, {"search_text": "smuggled words"})
    lines = _with(lines, perception, {"payload_summary": {"bytes": 1, "shape": "lies"}})
    memory, counts = _import(tmp_path, lines)
    with memory:
        assert counts["memories"] == 2
        assert memory.recall("smuggled")["results"] == []
        assert memory.recall("grip red cup")["results"][0]["content"] == "grip the red cup at 12 N"
        shown = memory.recall("shelf")["results"][0]
        assert shown["payload"]["shape"] != "lies"


def test_an_eight_float_vector_for_the_active_model_does_not_break_recall(
    tmp_path: Path, export_lines: list[str]
) -> None:
    import base64

    import numpy as np

    with Memory(tmp_path / "probe.db", embedder="auto") as probe:
        model_id = probe.embedder.model_id  # type: ignore[union-attr]
    vector = base64.b64encode(np.ones(8, dtype=np.float32).tobytes()).decode()
    lines = _with(export_lines, _memory_line(export_lines), {"embedding": {"model_id": model_id, "vector": vector}})
    memory, counts = _import(tmp_path, lines, embedder="auto")
    with memory:
        assert not isinstance(counts, ValidationError), counts
        assert counts["embedded"] == 2, "the wrong-sized vector is replaced by a fresh one"
        assert memory.recall("how to hold the cup")["mode"] != "bm25_only"
        assert memory.recall("how to hold the cup", min_relevance=0)["count"] == 2  # both searchable


field_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                         st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                             max_size=3))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["id", "collection", "session_id", "type", "perception_type", "content", "search_text",
                              "context", "content_hash", "protected", "confidence", "reinforced_at",
                              "evidence_count", "first_seen", "created_at", "occurred_at", "status",
                              "superseded_by", "absorbed", "forgotten_at", "forget_reason", "access_count",
                              "last_accessed", "embed", "payload", "embedding", "uid"]),
       value=field_values, kind=st.sampled_from(["fact", "perception"]))
def test_any_field_value_is_either_refused_by_line_or_imported_and_recallable(
    tmp_path_factory: pytest.TempPathFactory, export_lines: list[str], field: str, value: Any, kind: str
) -> None:
    index = _memory_line(export_lines, kind)
    memory, outcome = _import(tmp_path_factory.mktemp("prop"), _with(export_lines, index, {field: value}))
    with memory:
        if isinstance(outcome, ValidationError):
            assert f"line {index + 1}" in outcome.message
            assert _stored(memory) == 0
            return
        # Whatever got in must leave the collection fully usable.
        for result in memory.recall("", since=0, n=100, min_confidence=0)["results"]:
            memory.get(result["id"])
        memory.recall("red cup shelf", min_confidence=0)
        memory.recall("", context_filter={"params.grip_force": {"$gte": 0}})


def test_robotmem_import_reports_a_bad_line_without_a_traceback(tmp_path: Path, export_lines: list[str]) -> None:
    index = _memory_line(export_lines)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(_with(export_lines, index, {"reinforced_at": "yesterday"})) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "robotmem.cli.main", "--home", str(tmp_path / "home"), "import",
                           str(path)], capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "ROBOTMEM_EMBEDDINGS": "off"})
    assert done.returncode != 0
    assert f"line {index + 1}" in done.stderr and "reinforced_at" in done.stderr
    assert "Traceback" not in done.stderr
