"""Images -> small thumbnails plus metadata; never full-resolution frames.

Raw ``sensor_msgs/Image``: a thumbnail whose longest side is ``image_thumbnail_px``
(nearest-neighbour sampling, RGB or grey uint8, stored as bytes with its shape) for the
encodings rgb8, bgr8, rgba8, bgra8, mono8, 8UC1, 8UC3, mono16, 16UC1 and 32FC1 (depth
images are scaled to their own finite range). Other encodings (Bayer, YUV) keep metadata only.
``sensor_msgs/CompressedImage``: the compressed bytes are kept when they are at most
``compressed_image_max_bytes``, else metadata only (we do not decode JPEG/PNG).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import BridgeConfig, TopicRule
from ..messages import RosMessage
from .base import PerMessageConverter

__all__ = ["ImageConverter", "thumbnail"]

# encoding -> (dtype, channels, channel order to get RGB)
_ENCODINGS: dict[str, tuple[str, int, tuple[int, ...] | None]] = {
    "rgb8": ("u1", 3, (0, 1, 2)),
    "bgr8": ("u1", 3, (2, 1, 0)),
    "8UC3": ("u1", 3, (0, 1, 2)),
    "rgba8": ("u1", 4, (0, 1, 2)),
    "bgra8": ("u1", 4, (2, 1, 0)),
    "mono8": ("u1", 1, None),
    "8UC1": ("u1", 1, None),
    "mono16": ("u2", 1, None),
    "16UC1": ("u2", 1, None),
    "32FC1": ("f4", 1, None),
}


class ImageConverter(PerMessageConverter):
    def __init__(self, topic: str, msgtype: str, rule: TopicRule, config: BridgeConfig) -> None:
        super().__init__(topic, msgtype, rule, config, "image")
        self._compressed = msgtype.endswith("/CompressedImage")

    def convert(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        return self._compressed_image(msg) if self._compressed else self._raw_image(msg)

    def _raw_image(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        data = msg.data
        width, height = int(data["width"]), int(data["height"])
        encoding = str(data["encoding"])
        pixels = data["data"]
        if not isinstance(pixels, (bytes, bytearray)):
            raise TypeError("Image.data must be bytes (rosbridge base64 must be decoded first)")
        frame = _frame_id(data)
        info = {"width": width, "height": height, "encoding": encoding, "frame_id": frame}
        payload: dict[str, Any] = dict(info)
        if encoding in _ENCODINGS:
            thumb = thumbnail(bytes(pixels), width, height, int(data["step"]), encoding, bool(data.get("is_bigendian")),
                              self.config.image_thumbnail_px)
            payload.update({"thumbnail": thumb.tobytes(), "thumbnail_shape": list(thumb.shape), "thumbnail_dtype": "uint8"})
            note = f"thumbnail {thumb.shape[1]}x{thumb.shape[0]}"
        else:
            note = "metadata only (encoding not thumbnailed)"
        return f"image {self.topic} {width}x{height} {encoding} ({note})", payload, {"perception": info}

    def _compressed_image(self, msg: RosMessage) -> tuple[str, Any, dict[str, Any]]:
        data = msg.data
        blob = data["data"]
        if not isinstance(blob, (bytes, bytearray)):
            raise TypeError("CompressedImage.data must be bytes (rosbridge base64 must be decoded first)")
        fmt = str(data.get("format", ""))
        info = {"format": fmt, "bytes": len(blob), "frame_id": _frame_id(data)}
        payload: dict[str, Any] = dict(info)
        if len(blob) <= self.config.compressed_image_max_bytes:
            payload["compressed"] = bytes(blob)
            note = "compressed frame kept"
        else:
            note = "metadata only (frame larger than the cap)"
        return f"compressed image {self.topic} {fmt} {len(blob)} bytes ({note})", payload, {"perception": info}


def _frame_id(data: dict[str, Any]) -> str:
    header = data.get("header")
    return str(header.get("frame_id", "")) if isinstance(header, dict) else ""


def thumbnail(pixels: bytes, width: int, height: int, step: int, encoding: str, bigendian: bool, size: int) -> np.ndarray:
    """A uint8 thumbnail (h, w, 3) or (h, w) whose longest side is at most ``size``."""
    dtype_code, channels, order = _ENCODINGS[encoding]
    dtype = np.dtype(dtype_code).newbyteorder(">" if bigendian else "<")
    if width <= 0 or height <= 0 or step < width * channels * dtype.itemsize:
        raise ValueError(f"image geometry {width}x{height} step {step} does not fit encoding {encoding}")
    if len(pixels) < step * height:
        raise ValueError(f"image data has {len(pixels)} bytes, expected {step * height}")
    rows = np.frombuffer(pixels, dtype=np.uint8, count=step * height).reshape(height, step)
    image = rows[:, : width * channels * dtype.itemsize].copy().view(dtype).reshape(height, width, channels)
    scale = max(width, height) / size
    out_w, out_h = max(1, round(width / max(scale, 1.0))), max(1, round(height / max(scale, 1.0)))
    sampled = image[np.linspace(0, height - 1, out_h).astype(int)][:, np.linspace(0, width - 1, out_w).astype(int)]
    if order is not None:
        return np.ascontiguousarray(sampled[:, :, list(order)].astype(np.uint8))
    return _to_uint8(sampled[:, :, 0])


def _to_uint8(grey: np.ndarray) -> np.ndarray:
    if grey.dtype == np.uint8:
        return np.ascontiguousarray(grey)
    values = grey.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(grey.shape, dtype=np.uint8)
    low, high = float(values[finite].min()), float(values[finite].max())
    scaled = np.where(finite, (values - low) / (high - low if high > low else 1.0) * 255.0, 0.0)
    return scaled.round().astype(np.uint8)
