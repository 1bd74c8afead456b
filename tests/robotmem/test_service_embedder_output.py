"""A custom embedder's vectors are checked where they enter the store: a bad one is refused
with a ValidationError naming the embedder, before anything is written, and can no longer
break every later recall of the collection (a NaN row made sqlite-vec return NULL
similarities, a short row a dimension mismatch, on every recall from then on)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robotmem import Memory
from robotmem.errors import ValidationError


class Good:
    model_id, dim = "toy/3", 3

    def embed(self, texts: Sequence[str]) -> Any:
        return [[1.0, 0.5, 0.25] for _ in texts]


def _bad(rows: Callable[[int], Any]) -> Any:
    class Bad(Good):
        def embed(self, texts: Sequence[str]) -> Any:
            return rows(len(texts))

    return Bad()


BAD_OUTPUTS = {
    "nan": (lambda n: [[float("nan"), 0.0, 0.0]] * n, "NaN or infinite"),
    "inf": (lambda n: [[float("inf"), 0.0, 0.0]] * n, "NaN or infinite"),
    "short row": (lambda n: [[1.0, 0.0]] * n, "shape [1, 2]"),
    "too few rows": (lambda n: np.ones((n + 1, 3), dtype=np.float32)[:0], "shape [0, 3]"),
    "all zero": (lambda n: np.zeros((n, 3), dtype=np.float32), "all-zero"),
    "not numbers": (lambda n: [["a", "b", "c"]] * n, "not an array of numbers"),
}


def _refused(call: Callable[[], Any], expected: str) -> None:
    with pytest.raises(ValidationError) as caught:
        call()
    assert caught.value.field == "embedder"
    assert "'toy/3'" in caught.value.message and expected in caught.value.message


def _count(db_path: Any) -> int:
    with Memory(db_path, embedder=None) as mem:
        return int(mem.stats()["memories"])


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
def test_a_bad_vector_is_refused_before_anything_is_written(db_path, kind):
    rows, expected = BAD_OUTPUTS[kind]
    with Memory(db_path, embedder=Good()) as mem:
        for i in range(3):
            mem.learn(f"good lesson number {i}")
        kept = mem.learn("the lesson that gets corrected")["memory_id"]
    with Memory(db_path, embedder=_bad(rows)) as mem:
        _refused(lambda: mem.learn("one bad vector lesson"), expected)
        _refused(lambda: mem.save_perception("a bad vector perception"), expected)
        _refused(lambda: mem.save_perceptions([{"description": "a bad vector batch"}]), expected)
        _refused(lambda: mem.update(kept, "the corrected lesson text"), expected)
        _refused(lambda: mem.recall("good lesson"), expected)  # the query's own vector
        assert mem.get(kept)["content"] == "the lesson that gets corrected"
    assert _count(db_path) == 4
    with Memory(db_path, embedder=Good()) as mem:
        result = mem.recall("good lesson")
        assert result["mode"] == "hybrid" and len(result["results"]) == 4  # every vector is the same
        json.dumps(result, allow_nan=False)


def test_a_vector_of_another_length_is_stored_unit_length(db_path):
    class Long(Good):
        def embed(self, texts: Sequence[str]) -> Any:
            return [[3.0, 0.0, 4.0] for _ in texts]

    with Memory(db_path, embedder=Long()) as mem:
        mem.learn("a long vector lesson")
        hit = mem.recall("vector lesson", query_vector=[0.6, 0.0, 0.8], min_relevance=0)["results"][0]
        # Cosine 1 on every search path: the stored row was scaled to unit length.
        assert hit["similarity"] == pytest.approx(1.0, abs=1e-5)


def _identified(model_id: Any, dim: Any) -> Any:
    class Named(Good):
        pass

    named = Named()
    named.model_id, named.dim = model_id, dim  # type: ignore[misc]
    return named


# A NUL was stored by SQLite while PostgreSQL refused learn and its recall's SQL broke
# ("unterminated quoted string"); a surrogate or an int was a raw UnicodeEncodeError / AttributeError.
@pytest.mark.parametrize(("model_id", "dim", "field"), [
    ("toy\x00model", 3, "embedder.model_id"),
    ("toy\ud800model", 3, "embedder.model_id"),
    (5, 3, "embedder.model_id"),
    ("", 3, "embedder.model_id"),
    ("toy\nmodel", 3, "embedder.model_id"),
    ("m" * 201, 3, "embedder.model_id"),
    ("toy/3", 0, "embedder.dim"),
    ("toy/3", "3", "embedder.dim"),
    ("toy/3", True, "embedder.dim"),
])
def test_an_embedder_with_a_bad_model_id_or_dim_is_refused_when_given(db_path, model_id, dim, field):
    with pytest.raises(ValidationError) as caught:
        Memory(db_path, embedder=_identified(model_id, dim))
    assert caught.value.field == field
    if isinstance(db_path, Path):
        assert not db_path.exists()  # refused before the store was opened: not created, not migrated
    assert _count(db_path) == 0


def test_an_embedder_with_a_plain_model_id_learns_and_recalls_on_both_stores(db_path):
    with Memory(db_path, embedder=_identified("toy model/v1.2 (fp32)", np.int64(3))) as mem:
        mem.learn("a fact about the cup")
        assert mem.recall("cup", min_relevance=0)["count"] == 1
