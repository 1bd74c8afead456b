"""Occupancy maps: a ROS ``map.yaml`` + image, stored as a perception of its own.

The map is stored once per content (sha256 of yaml + image) so a second ``--map`` with the
same files finds the first. Pixels are kept as 8-bit grey exactly as the image has them
(map_server's convention: dark = occupied, unless ``negate``); the viewer draws them as
they are, which is what a person who opened map.pgm would recognise.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ..errors import ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Memory

__all__ = ["MAX_CELLS_PER_SIDE", "latest_map", "load_ros_map", "read_pgm", "store_map"]

#: Larger maps are thinned by an integer stride (and their resolution scaled) to stay a
#: small payload; a viewer at screen size shows no more than this anyway.
MAX_CELLS_PER_SIDE = 1024
_MAP_FILTER = {"map.sha256": {"$exists": True}}


def read_pgm(data: bytes, field: str = "map image") -> np.ndarray:
    """A binary (P5) or ASCII (P2) PGM as a 2-D uint8 array, top row first."""
    tokens: list[bytes] = []
    position = 0
    while len(tokens) < 4:
        while position < len(data) and data[position:position + 1].isspace():
            position += 1
        if data[position:position + 1] == b"#":
            position = data.find(b"\n", position) + 1 or len(data)
            continue
        end = position
        while end < len(data) and not data[end:end + 1].isspace():
            end += 1
        if end == position:
            raise ValidationError("truncated PGM header", field=field)
        tokens.append(data[position:end])
        position = end
    magic, width, height, maxval = tokens[0], *(_int(t, field) for t in tokens[1:])
    if magic not in (b"P5", b"P2") or not 0 < maxval < 256 or width <= 0 or height <= 0:
        raise ValidationError("only 8-bit PGM images (P5 or P2) are read", field=field)
    if magic == b"P5":
        pixels = np.frombuffer(data, dtype=np.uint8, count=width * height, offset=position + 1) \
            if len(data) >= position + 1 + width * height else None
    else:
        values = data[position:].split()
        pixels = np.array([int(v) for v in values[: width * height]], dtype=np.uint8) \
            if len(values) >= width * height else None
    if pixels is None:
        raise ValidationError(f"PGM image shorter than its {width}x{height} header", field=field)
    return pixels.reshape(height, width)


def _int(token: bytes, field: str) -> int:
    try:
        return int(token)
    except ValueError as exc:
        raise ValidationError(f"bad PGM header value {token[:20]!r}", field=field) from exc


def load_ros_map(yaml_path: str | Path) -> dict[str, Any]:
    """Read a map_server ``map.yaml`` and its image into a storable description."""
    path = Path(yaml_path)
    try:
        raw = path.read_bytes()
        spec = yaml.safe_load(raw)
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}", field="map") from exc
    except yaml.YAMLError as exc:
        raise ValidationError(f"{path} is not YAML: {exc}", field="map") from exc
    if not isinstance(spec, dict) or not {"image", "resolution", "origin"} <= set(spec):
        raise ValidationError(f"{path} needs image, resolution and origin (a ROS map_server map.yaml)",
                              field="map")
    resolution, origin = spec["resolution"], spec["origin"]
    if not isinstance(resolution, (int, float)) or resolution <= 0:
        raise ValidationError("resolution must be a positive number", field="map.resolution")
    if not (isinstance(origin, list) and len(origin) >= 2 and all(isinstance(v, (int, float)) for v in origin)):
        raise ValidationError("origin must be [x, y, yaw]", field="map.origin")
    image_path = (path.parent / str(spec["image"])).resolve()
    try:
        image_bytes = image_path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read map image {image_path}: {exc.strerror}", field="map.image") from exc
    pixels = read_pgm(image_bytes, "map.image")
    stride = max(1, -(-max(pixels.shape) // MAX_CELLS_PER_SIDE))
    pixels = np.ascontiguousarray(pixels[::stride, ::stride])
    return {
        "source": path.name,
        "sha256": hashlib.sha256(raw + image_bytes).hexdigest(),
        "frame": str(spec.get("frame_id") or "map"),
        "resolution": float(resolution) * stride,
        "origin": [float(v) for v in origin[:3]] + [0.0] * (3 - len(origin[:3])),
        "negate": bool(spec.get("negate", 0)),
        "width": int(pixels.shape[1]),
        "height": int(pixels.shape[0]),
        "pixels": pixels,
    }


def _find(mem: Memory, sha256: str | None, collection: str | None) -> list[dict[str, Any]]:
    where: dict[str, Any] = {"map.sha256": sha256} if sha256 else dict(_MAP_FILTER)
    return list(mem.recall("", collection=collection, n=20, min_confidence=0.0, context_filter=where)["results"])


def store_map(mem: Memory, yaml_path: str | Path, *, robot_id: str | None = None,
              collection: str | None = None) -> dict[str, Any]:
    """Store the map once; ``{"memory_id", "status": "created" | "exists"}``."""
    loaded = load_ros_map(yaml_path)
    existing = _find(mem, loaded["sha256"], collection)
    if existing:
        return {"memory_id": existing[0]["id"], "status": "exists"}
    pixels = loaded.pop("pixels")
    context: dict[str, Any] = {"map": loaded}
    if robot_id:
        context["robot"] = {"id": robot_id}
    origin = loaded["origin"]
    description = (f"occupancy map {loaded['source']} {loaded['width']}x{loaded['height']} cells at "
                   f"{loaded['resolution']:g} m, origin ({origin[0]:.2f}, {origin[1]:.2f}) in frame {loaded['frame']}")
    data = {"encoding": "mono8", "width": loaded["width"], "height": loaded["height"],
            "base64": base64.b64encode(pixels.tobytes()).decode("ascii")}
    saved = mem.save_perception(description, "visual", data=data, metadata=context, collection=collection)
    return {"memory_id": saved["memory_id"], "status": "created"}


def latest_map(mem: Memory, collection: str | None = None) -> dict[str, Any] | None:
    """The most recently stored occupancy map: its ``map`` context plus ``pixels_base64``."""
    found = sorted(_find(mem, None, collection), key=lambda hit: hit.get("created_at") or 0, reverse=True)
    if not found:
        return None
    data = mem.get_data(found[0]["id"])
    spec = dict(mem.get(found[0]["id"])["context"]["map"])
    spec["memory_id"] = found[0]["id"]
    spec["pixels_base64"] = data.get("base64") if isinstance(data, dict) else None
    return spec
