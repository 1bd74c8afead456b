"""``robotmem ui`` refuses what it must before it writes anything, with one line naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _map_yaml(folder: Path) -> Path:
    (folder / "map.pgm").write_bytes(b"P5 4 4 255\n" + bytes([254] * 16))
    (folder / "map.yaml").write_text("image: map.pgm\nresolution: 0.1\norigin: [0.0, 0.0, 0.0]\n")
    return folder / "map.yaml"


def test_binding_beyond_loopback_without_a_token_stores_no_map_first(capsys, tmp_path: Path) -> None:
    with Memory(embedder=None) as mem:
        mem.learn("the lab door is heavy")
    code, out, err = run(capsys, "ui", "--host", "0.0.0.0", "--port", "0", "--map", str(_map_yaml(tmp_path)))
    assert code == 1 and out == "" and "without a token" in err and err.count("\n") == 1
    with Memory(embedder=None) as mem:
        assert mem.stats()["memories"] == 1  # the map was not stored


def test_a_missing_store_is_refused_not_created(capsys, tmp_path: Path) -> None:
    mistyped = tmp_path / "mistyped"
    code, out, err = run(capsys, "--home", str(mistyped), "ui", "--port", "0")
    assert code == 1 and out == ""
    assert err.startswith("error (--home): no memory store at ") and err.count("\n") == 1
    assert not mistyped.exists()


@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
def test_a_port_outside_0_to_65535_is_a_one_line_error(capsys, port: str) -> None:
    code, out, err = run(capsys, "ui", "--port", port)
    assert code == 1 and out == "" and err == f"error (--port): --port must be between 0 and 65535, got {port}\n"
    code, out, err = run(capsys, "serve", "--transport", "http", "--port", port)
    assert code == 2 and err == f"robotmem serve: --port must be between 0 and 65535, got {port}\n"
