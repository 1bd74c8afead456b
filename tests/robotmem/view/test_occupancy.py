"""Occupancy maps: read as Pillow reads them, stored once, refused clearly when malformed."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from robotmem import Memory, ValidationError
from robotmem.view import latest_map, load_ros_map, store_map
from robotmem.view.occupancy import read_pgm


def _write_map(folder: Path, pixels: np.ndarray, *, binary: bool = True, yaml_extra: str = "") -> Path:
    height, width = pixels.shape
    if binary:
        (folder / "map.pgm").write_bytes(b"P5\n# made by a test\n%d %d\n255\n" % (width, height) + pixels.tobytes())
    else:
        body = " ".join(str(int(v)) for v in pixels.ravel())
        (folder / "map.pgm").write_text(f"P2\n{width} {height}\n255\n{body}\n")
    (folder / "map.yaml").write_text(f"image: map.pgm\nresolution: 0.05\norigin: [-1.25, -2.39, 0]\n{yaml_extra}")
    return folder / "map.yaml"


def test_the_shared_turtlebot_map_reads_as_pillow_reads_it(shared_datasets: Path) -> None:
    folder = shared_datasets / "turtlebot3_nav_ros1_bag"
    loaded = load_ros_map(folder / "map.yaml")
    expected = np.asarray(Image.open(folder / "map.pgm"))
    assert loaded["pixels"].shape == expected.shape == (loaded["height"], loaded["width"])
    assert np.array_equal(loaded["pixels"], expected)
    assert loaded["resolution"] == 0.05 and loaded["origin"] == [-1.25, -2.39, 0.0]


def test_ascii_and_binary_pgm_agree(tmp_path: Path) -> None:
    pixels = np.random.default_rng(3).integers(0, 256, size=(7, 11), dtype=np.uint8)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    binary = load_ros_map(_write_map(tmp_path / "a", pixels))["pixels"]
    ascii_ = load_ros_map(_write_map(tmp_path / "b", pixels, binary=False))["pixels"]
    assert np.array_equal(binary, pixels) and np.array_equal(ascii_, pixels)


def test_a_map_is_stored_once_and_read_back(tmp_path: Path) -> None:
    pixels = np.arange(6 * 9, dtype=np.uint8).reshape(6, 9)
    path = _write_map(tmp_path, pixels)
    with Memory(embedder=None) as mem:
        first = store_map(mem, path, robot_id="tb3")
        assert first["status"] == "created"
        assert store_map(mem, path)["status"] == "exists"
        found = latest_map(mem)
    assert found is not None and found["memory_id"] == first["memory_id"]
    assert (found["width"], found["height"], found["frame"]) == (9, 6, "map")
    assert np.array_equal(np.frombuffer(base64.b64decode(found["pixels_base64"]), np.uint8).reshape(6, 9), pixels)


def test_no_map_stored_means_none() -> None:
    with Memory(embedder=None) as mem:
        assert latest_map(mem) is None


@pytest.mark.parametrize(("content", "field"), [
    ("resolution: 0.05\norigin: [0, 0, 0]\n", "map"),                       # no image
    ("image: map.pgm\nresolution: -1\norigin: [0, 0, 0]\n", "map.resolution"),
    ("image: map.pgm\nresolution: 0.05\norigin: nowhere\n", "map.origin"),
    ("image: missing.pgm\nresolution: 0.05\norigin: [0, 0, 0]\n", "map.image"),
    (": : not yaml [", "map"),
])
def test_a_malformed_map_is_refused_naming_the_field(tmp_path: Path, content: str, field: str) -> None:
    (tmp_path / "map.pgm").write_bytes(b"P5\n2 2\n255\n\x00\x01\x02\x03")
    (tmp_path / "map.yaml").write_text(content)
    with pytest.raises(ValidationError) as caught:
        load_ros_map(tmp_path / "map.yaml")
    assert caught.value.field == field


@pytest.mark.parametrize("data", [b"P6\n2 2\n255\n" + bytes(12), b"P5\n4 4\n255\n\x00", b"P5\n2", b"P5\nx 2\n255\n"])
def test_a_bad_pgm_is_a_validation_error(data: bytes) -> None:
    with pytest.raises(ValidationError):
        read_pgm(data)
