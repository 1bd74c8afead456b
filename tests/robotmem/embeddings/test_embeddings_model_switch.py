"""Changing the embedding model (fp32 -> int8) never compares vectors of different models."""

from __future__ import annotations

from pathlib import Path

from robotmem import Memory
from robotmem.embeddings import OnnxEmbedder

STORED = "the gripper slipped on the wet glass bottle"
PARAPHRASE = "grasp failed; slippery object"  # no word in common with STORED
# Found by meaning alone, a paraphrase sits below the default min_relevance (docs/recall.md): every
# recall here asks for every hit, so that "not found" means the vectors were not compared.


def test_vectors_of_another_model_are_ignored_until_reindex(
    fp32_embedder: OnnxEmbedder, int8_embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "switch.db"
    with Memory(path=db, embedder=fp32_embedder) as memory:
        memory.learn(STORED)
        memory.learn("battery dropped below 20 percent near the charging dock")
        assert STORED in [hit["content"] for hit in memory.recall(PARAPHRASE, min_relevance=0)["results"]]

    with Memory(path=db, embedder=int8_embedder) as memory:
        # Only fp32 vectors exist: an int8 query must not be compared with them.
        assert STORED not in [hit["content"] for hit in memory.recall(PARAPHRASE, min_relevance=0)["results"]]
        assert memory.reindex()["kept_other_models"] == {fp32_embedder.model_id: 2}  # not without being told
        assert STORED not in [hit["content"] for hit in memory.recall(PARAPHRASE, min_relevance=0)["results"]]
        memory.reindex(replace_other_models=True)
        assert memory.stats()["embeddings"].get(int8_embedder.model_id) == 2
        assert STORED in [hit["content"] for hit in memory.recall(PARAPHRASE, min_relevance=0)["results"]]
