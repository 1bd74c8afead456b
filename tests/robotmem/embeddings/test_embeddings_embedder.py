"""OnnxEmbedder behaviour: output shape, input validation, lazy and background loading, threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from robotmem.embeddings import DIM, Embedder, OnnxEmbedder
from robotmem.embeddings.source import ModelSource
from robotmem.errors import ValidationError

#: Bounds a wait so a deadlock fails the test instead of hanging CI; not a speed limit.
WAIT_S = 120.0

ROBOT_NOTES = [
    "the gripper slipped on the wet glass bottle",
    "battery dropped below 20 percent near the charging dock",
    "door of room 3 was locked, waited two minutes then replanned",
    "lidar saw a chair blocking the hallway",
    "odometry drifted 0.4 m on the carpet",
    "grasp succeeded with force 12 N on the red cup",
    "",
    "Kamera-Zeitüberschreitung im Flur",
    "机器人在厨房里找到了杯子",
    "the arm joint 3 overheated after forty pick cycles in a row without a cooling pause",
]


def test_fp32_embedder_satisfies_the_embedder_protocol(fp32_embedder: OnnxEmbedder) -> None:
    assert isinstance(fp32_embedder, Embedder)
    assert fp32_embedder.model_id == "all-MiniLM-L6-v2/fp32"
    assert fp32_embedder.dim == DIM == 384


def test_int8_embedder_has_its_own_model_id(int8_embedder: OnnxEmbedder) -> None:
    assert int8_embedder.model_id == "all-MiniLM-L6-v2/int8"


def test_vectors_are_float32_unit_rows_of_dimension_384(fp32_embedder: OnnxEmbedder) -> None:
    vectors = fp32_embedder.embed(ROBOT_NOTES)
    assert vectors.shape == (len(ROBOT_NOTES), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_experiences_are_closer_than_unrelated_ones(fp32_embedder: OnnxEmbedder) -> None:
    slipped, dropped, battery = fp32_embedder.embed(
        ["the gripper slipped on the wet bottle", "the hand lost its grip on a slippery flask", "battery is low"]
    )
    assert slipped @ dropped > slipped @ battery + 0.2


def test_empty_list_gives_an_empty_matrix_without_loading_the_model(model_source: ModelSource, tmp_path: Path) -> None:
    embedder = OnnxEmbedder(model_source, tmp_path / "models", progress=None)
    result = embedder.embed([])
    assert result.shape == (0, 384) and result.dtype == np.float32
    assert embedder.state == "unloaded"
    assert not (tmp_path / "models").exists()


def test_a_bare_string_is_a_validation_error_naming_texts(fp32_embedder: OnnxEmbedder) -> None:
    with pytest.raises(ValidationError) as info:
        fp32_embedder.embed("the gripper slipped")  # type: ignore[arg-type]
    assert info.value.field == "texts"


def test_a_non_string_item_is_a_validation_error_naming_its_index(fp32_embedder: OnnxEmbedder) -> None:
    with pytest.raises(ValidationError) as info:
        fp32_embedder.embed(["fine", None])  # type: ignore[list-item]
    assert info.value.field == "texts[1]"


def test_construction_touches_neither_model_nor_cache(model_source: ModelSource, tmp_path: Path) -> None:
    embedder = OnnxEmbedder(model_source, tmp_path / "models", progress=None)
    assert embedder.state == "unloaded"
    assert embedder.model_path is None
    assert not (tmp_path / "models").exists()


def test_many_batches_come_back_in_input_order(
    fp32_embedder: OnnxEmbedder, model_source: ModelSource, _shared_model_cache: Path
) -> None:
    small_batches = OnnxEmbedder(model_source, _shared_model_cache, batch_size=3, progress=None)
    batched = small_batches.embed(ROBOT_NOTES)
    one_by_one = np.vstack([fp32_embedder.embed([text]) for text in ROBOT_NOTES])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_warm_in_background_returns_while_the_model_is_still_loading(
    model_source: ModelSource, _shared_model_cache: Path
) -> None:
    embedder = OnnxEmbedder(model_source, _shared_model_cache, progress=None)
    # Hold the load lock so the loader cannot finish: the call must return anyway.
    with embedder._lock:
        loader = embedder.warm_in_background()
        # "loading" before the thread runs: a recall that must not wait sees a load under way
        assert embedder.state == "loading"
    loader.join(WAIT_S)
    assert not loader.is_alive()
    assert embedder.state == "ready"
    assert embedder.model_path is not None and embedder.model_path.is_file()


def test_first_concurrent_calls_share_one_load(model_source: ModelSource, _shared_model_cache: Path) -> None:
    embedder = OnnxEmbedder(model_source, _shared_model_cache, progress=None)
    sessions_opened = []
    real_open = embedder._open_session

    def counting_open(path: Path):  # a spy around the real method, not a replacement
        sessions_opened.append(path)
        return real_open(path)

    embedder._open_session = counting_open  # type: ignore[method-assign]
    start = threading.Barrier(4)

    def first_call(text: str) -> np.ndarray:
        start.wait(WAIT_S)
        return embedder.embed([text])

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(first_call, ROBOT_NOTES[:4], timeout=WAIT_S))
    assert all(r.shape == (1, 384) for r in results)
    assert embedder.state == "ready"
    assert len(sessions_opened) == 1


def test_concurrent_embeds_equal_serial_ones(fp32_embedder: OnnxEmbedder) -> None:
    workloads = [ROBOT_NOTES[i:] + ROBOT_NOTES[:i] for i in range(8)]
    serial = [fp32_embedder.embed(texts) for texts in workloads]
    start = threading.Barrier(len(workloads))

    def concurrently(texts: list[str]) -> np.ndarray:
        start.wait(WAIT_S)
        return fp32_embedder.embed(texts)

    with ThreadPoolExecutor(len(workloads)) as pool:
        parallel = list(pool.map(concurrently, workloads, timeout=WAIT_S))
    for expected, actual in zip(serial, parallel):
        np.testing.assert_allclose(actual, expected, atol=1e-6)


def test_a_lone_surrogate_is_embedded_as_a_replacement_character(fp32_embedder: OnnxEmbedder) -> None:
    broken, replaced = fp32_embedder.embed(["gripper \ud800 slipped", "gripper \ufffd slipped"])
    np.testing.assert_allclose(broken, replaced, atol=1e-6)
