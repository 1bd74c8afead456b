"""Changing the model never mixes vector spaces; reindex re-embeds with the active one."""

from pathlib import Path

from robotmem import Config, Memory
from robotmem.cli.main import main


def test_a_new_model_ignores_old_vectors_until_reindex(tmp_path: Path, clock):
    db = tmp_path / "m.db"
    fp32 = Config.load(db_path=db, embedding_precision="fp32")
    int8 = Config.load(db_path=db, embedding_precision="int8")
    with Memory(db, clock=clock, config=fp32) as mem:
        slip = mem.learn("the gripper slipped on the wet glass bottle")["memory_id"]
        mem.learn("the battery charger LED blinks red")
        assert mem.stats()["embeddings"] == {"all-MiniLM-L6-v2/fp32": 2}
    with Memory(db, clock=clock, config=int8) as mem:
        assert mem.embedder is not None and mem.embedder.model_id != "all-MiniLM-L6-v2/fp32"
        before = mem.recall("grasp failure with slippery item")
        assert before["results"] == []  # no words in common, and no int8 vectors yet
        kept = mem.reindex(batch_size=1)  # fp32 vectors may be all a program has: kept unless asked
        assert kept == {"model_id": mem.embedder.model_id, "reembedded": 0, "total": 0,
                        "kept_other_models": {"all-MiniLM-L6-v2/fp32": 2}, "vector_indexes": []}
        report = mem.reindex(batch_size=1, replace_other_models=True)
        # Two memories are far below the vector index size floor: no index file is written.
        assert report == {"model_id": mem.embedder.model_id, "reembedded": 2, "total": 2, "kept_other_models": {},
                          "vector_indexes": []}
        # Found by meaning alone (no shared word): ranked first, below the default threshold.
        after = mem.recall("grasp failure with slippery item", min_relevance=0)
        assert after["mode"] == "hybrid" and after["results"][0]["id"] == slip
        assert mem.reindex()["reembedded"] == 0


def test_reindex_command_embeds_what_is_missing(capsys, robotmem_home: Path):
    assert main(["learn", "the gripper slipped on the wet glass bottle"]) == 0
    capsys.readouterr()
    with Memory(embedder=None) as mem:
        mem._db.connection().execute("DELETE FROM embeddings")
    assert main(["--json", "reindex"]) == 0
    captured = capsys.readouterr()
    assert '"reembedded": 1' in captured.out
    assert captured.err == ""  # not a terminal: no progress bar (tests/robotmem/cli/test_cli_commands.py)


class ItsOwnVectors:
    """A program's own embedder, which the CLI cannot load."""

    model_id, dim = "lab-clip/4", 4

    def embed(self, texts):
        import numpy as np

        return np.tile(np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32), (len(texts), 1))


def test_reindex_keeps_vectors_of_a_model_it_cannot_load_unless_told(capsys, robotmem_home: Path):
    with Memory(embedder=ItsOwnVectors()) as mem:
        mem.learn("the gripper slipped on the wet glass bottle")
        mem.learn("the battery charger LED blinks red")
        mem.save_perceptions([{"description": "odom chunk", "embed": False}])  # never embedded, by request
    assert main(["reindex"]) == 0
    out = capsys.readouterr().out
    assert "embedded 0 of 0 memories" in out
    assert "kept 2 vectors of lab-clip/4" in out and "--replace-other-models" in out
    with Memory(embedder=None) as mem:
        assert mem.stats()["embeddings"] == {"lab-clip/4": 2}
    assert main(["--json", "reindex", "--replace-other-models"]) == 0
    assert '"reembedded": 2' in capsys.readouterr().out
    with Memory(embedder=None) as mem:
        assert mem.stats()["embeddings"] == {"all-MiniLM-L6-v2/fp32": 2}
