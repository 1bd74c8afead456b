"""Our ONNX pipeline against the vectors sentence-transformers computes (../shared/reference)."""

from __future__ import annotations

import numpy as np

from robotmem.embeddings import OnnxEmbedder

FP32_MIN_COSINE = 0.9999
INT8_MIN_MEAN_COSINE = 0.99


def _nearest_other(vectors: np.ndarray) -> np.ndarray:
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return similarity.argmax(axis=1)


def test_fp32_matches_the_reference_for_every_sentence(fp32_embedder: OnnxEmbedder, reference) -> None:
    vectors = fp32_embedder.embed(reference.sentences)
    cosines = np.sum(vectors * reference.vectors, axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= FP32_MIN_COSINE, (
        f"sentence {worst} {reference.sentences[worst][:60]!r}: cosine {cosines[worst]:.6f}"
    )


def test_fp32_matches_the_reference_when_each_sentence_is_embedded_alone(
    fp32_embedder: OnnxEmbedder, reference
) -> None:
    alone = np.vstack([fp32_embedder.embed([sentence]) for sentence in reference.sentences])
    assert np.sum(alone * reference.vectors, axis=1).min() >= FP32_MIN_COSINE


def test_int8_keeps_mean_cosine_and_every_nearest_neighbour(int8_embedder: OnnxEmbedder, reference) -> None:
    vectors = int8_embedder.embed(reference.sentences)
    cosines = np.sum(vectors * reference.vectors, axis=1)
    assert cosines.mean() >= INT8_MIN_MEAN_COSINE
    expected, actual = _nearest_other(reference.vectors), _nearest_other(vectors)
    changed = [reference.sentences[i][:40] for i in np.nonzero(expected != actual)[0]]
    assert not changed, f"int8 changed the nearest neighbour of {changed}"


def test_reference_uses_the_sequence_length_we_truncate_at(reference) -> None:
    from robotmem.embeddings.tokenize import MAX_SEQ_LENGTH

    assert reference.max_seq_length == MAX_SEQ_LENGTH


def test_text_beyond_256_tokens_does_not_change_the_vector(fp32_embedder: OnnxEmbedder) -> None:
    long_text = " ".join(f"waypoint {i} reached without incident." for i in range(80))  # > 256 tokens
    with_tail = long_text + " Then the gripper dropped the cup."
    vectors = fp32_embedder.embed([long_text, with_tail])
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


def test_padding_in_a_batch_does_not_change_a_short_sentence(fp32_embedder: OnnxEmbedder) -> None:
    short = "door locked"
    long = "the robot waited at the locked door of room three for twelve minutes before giving up"
    alone = fp32_embedder.embed([short])[0]
    batched = fp32_embedder.embed([long, short])[1]
    np.testing.assert_allclose(alone, batched, atol=1e-5)
