"""Recall answers from full text while a server is still loading the model in the background."""

import fcntl
from pathlib import Path

from robotmem import Memory
from robotmem.embeddings import OnnxEmbedder
from robotmem.embeddings.cache import cached_model_path
from robotmem.embeddings.source import locate_model_source


def test_recall_does_not_wait_for_a_model_loading_in_the_background(tmp_path: Path, clock):
    models = tmp_path / "empty-model-cache"
    lock_path = cached_model_path(locate_model_source(), models, "fp32")
    lock_path = lock_path.with_name(lock_path.name + ".lock")
    lock_path.parent.mkdir(parents=True)
    embedder = OnnxEmbedder(locate_model_source(), models, precision="fp32", progress=None)
    with lock_path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # the build cannot start: loading stays in progress
        with Memory(tmp_path / "m.db", clock=clock, embedder=None) as text_only:
            mid = text_only.learn("the gripper slipped on the wet glass bottle")["memory_id"]
        loader = embedder.warm_in_background()
        assert embedder.state == "loading"  # from the moment warm_in_background returns
        with Memory(tmp_path / "m.db", clock=clock, embedder=embedder) as mem:
            result = mem.recall("gripper slipped")
            assert result["mode"] == "bm25_only" and result["results"][0]["id"] == mid
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            loader.join(timeout=300)
            assert embedder.state == "ready"
            assert mem.recall("gripper slipped")["mode"] == "hybrid"
