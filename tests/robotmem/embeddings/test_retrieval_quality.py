"""Semantic recall through the real Memory: paraphrases with no shared word are found.

A small hand-written corpus of robot experiences, with distractors that *do* share
words with the questions, so full-text search alone returns something, just not
the memory that answers the question.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.embeddings import OnnxEmbedder

EXPERIENCES = [
    "the gripper slipped on the wet glass bottle",
    "battery dropped below 20 percent near the charging dock",
    "the lidar saw a chair blocking the hallway",
    "odometry drifted 0.4 m after driving on carpet",
    "the door of room 3 was locked so the robot waited and replanned",
    "the arm joint 3 overheated after forty pick cycles",
    "camera exposure was too dark in the basement",
    "the object detector crashed after the software update",
    "a person walked in front of the robot and it stopped safely",
    "the conveyor belt moved faster than expected during sorting",
    "wifi signal was lost in the warehouse corner for two minutes",
    "the speech recognizer misheard coffee as copy",
    "suction cup failed to hold a cardboard box with tape on it",
    "the map was outdated because shelves were moved",
    "the station warning light blinked during the night shift",
]

# (question, the experience that answers it): no word in common with that experience.
PARAPHRASES = [
    ("grasp failed; slippery object", "the gripper slipped on the wet glass bottle"),
    ("furniture obstructing corridor", "the lidar saw a chair blocking the hallway"),
    ("power running low close to station", "battery dropped below 20 percent near the charging dock"),
    ("motor became too hot", "the arm joint 3 overheated after forty pick cycles"),
    ("position estimate wandered over rug", "odometry drifted 0.4 m after driving on carpet"),
]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


@pytest.fixture(params=["fp32", "int8"])
def semantic_memory(
    request: pytest.FixtureRequest, fp32_embedder: OnnxEmbedder, int8_embedder: OnnxEmbedder, tmp_path: Path
) -> Iterator[Memory]:
    embedder = fp32_embedder if request.param == "fp32" else int8_embedder
    with Memory(path=tmp_path / "semantic.db", embedder=embedder) as memory:
        for experience in EXPERIENCES:
            memory.learn(experience)
        yield memory


@pytest.fixture
def text_only_memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(path=tmp_path / "text-only.db", embedder=None) as memory:
        for experience in EXPERIENCES:
            memory.learn(experience)
        yield memory


def test_the_paraphrases_share_no_word_with_their_answers() -> None:
    for question, answer in PARAPHRASES:
        assert not _words(question) & _words(answer), question


@pytest.mark.parametrize(("question", "answer"), PARAPHRASES)
def test_a_paraphrase_is_recalled_in_the_top_3_in_hybrid_mode(
    semantic_memory: Memory, question: str, answer: str
) -> None:
    # Ranking, not the threshold: a paraphrase sharing no word may be a weak hit.
    result = semantic_memory.recall(question, n=3, min_relevance=0)
    assert result["mode"] == "hybrid"
    assert answer in [hit["content"] for hit in result["results"]], result["results"]


@pytest.mark.parametrize(("question", "answer"), PARAPHRASES)
def test_bm25_only_misses_the_paraphrase(text_only_memory: Memory, question: str, answer: str) -> None:
    result = text_only_memory.recall(question, n=3, min_relevance=0)
    assert result["mode"] == "bm25_only"
    assert answer not in [hit["content"] for hit in result["results"]]


def test_a_question_sharing_words_with_distractors_still_finds_the_answer_first(semantic_memory: Memory) -> None:
    # "object" and "station" match distractors in full text; the meaning points at the gripper.
    result = semantic_memory.recall("object slipped out of the hand at the station", n=3, min_relevance=0)
    assert result["results"][0]["content"] == "the gripper slipped on the wet glass bottle"
