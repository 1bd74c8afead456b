"""Changing the model never mixes vector spaces; reindex re-embeds with the active one."""

import threading
from pathlib import Path
from typing import Any

import numpy as np
from test_service_sessions import TextVectors, run_until_it_waits

from robotmem import Config, Memory
from robotmem.cli.main import main
from robotmem.store.backend import as_vector_bytes


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


def _vector_of(mem: Memory, memory_id: int) -> np.ndarray | None:
    with mem._db.read() as conn:
        row = conn.execute("SELECT vector FROM embeddings WHERE memory_id = ?", (memory_id,)).fetchone()
    blob = None if row is None else as_vector_bytes(row[0])
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)


def test_reindex_leaves_a_memory_changed_meanwhile_to_the_writer_that_changed_it(db_path: Any):
    """reindex reads every text first, then embeds batch by batch. Between two batches another
    process updates memory 2 (storing its new text's vector) and forgets memory 3: reindex used to
    overwrite memory 2's vector with its old text's, and give forgotten memory 3 one."""
    embedder = TextVectors()
    with Memory(db_path, embedder=None) as plain:
        ids = [plain.learn(t)["memory_id"] for t in ("gripper slips on wet glass", "the charger is in the kitchen",
                                                     "stairs are dangerous")]
    with Memory(db_path, embedder=embedder) as other, Memory(db_path, embedder=embedder) as mem:

        def meanwhile(done: int, total: int) -> None:
            if done == 1:
                other.update(ids[1], "the charger is in room 12")
                other.forget(ids[2], "wrong")

        report = mem.reindex(everything=True, batch_size=1, progress=meanwhile)
        assert (report["reembedded"], report["total"]) == (1, 3)
        stored = _vector_of(mem, ids[1])
        assert stored is not None
        new, old = (v / np.linalg.norm(v) for v in embedder.embed(["the charger is in room 12",
                                                                   "the charger is in the kitchen"]))
        assert np.allclose(stored, new) and not np.allclose(stored, old)  # stored normalised
        assert _vector_of(mem, ids[2]) is None


def test_an_update_during_reindexs_write_waits_for_it_and_keeps_its_own_vector(db_path: Any, backend: str):
    """Inside reindex's write, after it checked that memory 2 still holds the text it embedded,
    another process updates memory 2. That update must wait for reindex's commit (PostgreSQL: the
    row reindex locked; SQLite: the write lock), or reindex stores the old text's vector over the
    new one's."""
    embedder = TextVectors()
    with Memory(db_path, embedder=None) as plain:
        ids = [plain.learn(t)["memory_id"] for t in ("gripper slips on wet glass", "the charger is in the kitchen")]
    with Memory(db_path, embedder=embedder) as other, Memory(db_path, embedder=embedder) as mem:
        updates: list[threading.Thread] = []
        real_check = mem._db.lock_live_contents

        def checked_then_updated(conn: Any, memory_ids: list[int]) -> dict[int, str]:
            current = real_check(conn, memory_ids)
            if memory_ids == [ids[1]]:
                updates.append(run_until_it_waits(
                    mem, other, backend, lambda: other.update(ids[1], "the charger is in room 12")))
            return current

        mem._db.lock_live_contents = checked_then_updated  # type: ignore[method-assign]
        assert mem.reindex(everything=True, batch_size=1)["reembedded"] == 2
        updates[0].join()
        stored = _vector_of(mem, ids[1])
        new = embedder.embed(["the charger is in room 12"])[0]
        assert stored is not None and np.allclose(stored, new / np.linalg.norm(new))
