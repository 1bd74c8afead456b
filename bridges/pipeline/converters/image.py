"""Images -> small thumbnails plus metadata; never full-resolution frames.

Raw ``sensor_msgs/Image``: a thumbnail whose longest side is ``image_thumbnail_px``
(nearest-neighbour sampling, RGB or grey uint8, stored as bytes with its shape) for the
encodings rgb8, bgr8, rgba8, bgra8, mono8, 8UC1, 8UC3, mono16, 16UC1 and 32FC1 (depth
images are scaled to their own finite range). Other encodings (Bayer, YUV) keep metadata only.
``sensor_msgs/CompressedImage``: metadata only by default - format, size in bytes, frame
id, and width/height read from the PNG or JPEG header (no decoding: that would need an
image library we do not depend on). ``compressed_image_max_bytes`` (default 0) opts in to
keeping frames up to that many compressed bytes as they are.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..config import BridgeConfig, TopicRule
from ..messages import RosMessage
from .base import PerMessageConverter

__all__ = ["ImageConverter", "compressed_image_size", "thumbnail"]

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
        info: dict[str, Any] = {"format": fmt, "bytes": len(blob), "frame_id": _frame_id(data)}
        size = compressed_image_size(bytes(blob[:_HEADER_SCAN_BYTES]))
        if size is not None:
            info.update({"width": size[0], "height": size[1]})
        payload: dict[str, Any] = dict(info)
        if 0 < len(blob) <= self.config.compressed_image_max_bytes:
            payload["compressed"] = bytes(blob)
            note = "compressed frame kept"
        else:
            note = "metadata only"
        shown = f" {size[0]}x{size[1]}" if size is not None else ""
        return f"compressed image {self.topic}{shown} {fmt} {len(blob)} bytes ({note})", payload, {"perception": info}


#: JPEG headers (EXIF thumbnails included) put the frame size within the first bytes
_HEADER_SCAN_BYTES = 256 * 1024
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: JPEG start-of-frame markers (all SOFn but DHT C4, JPG C8 and DAC CC)
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def compressed_image_size(blob: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG or JPEG header, without decoding; None for other data."""
    if blob.startswith(_PNG_SIGNATURE) and len(blob) >= 24 and blob[12:16] == b"IHDR":
        width, height = struct.unpack(">II", blob[16:24])
        return int(width), int(height)
    if not blob.startswith(b"\xff\xd8"):
        return None
    at = 2
    while at + 4 <= len(blob):
        if blob[at] != 0xFF:
            return None
        marker = blob[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", blob[at + 2 : at + 4])
        if marker in _JPEG_SOF and at + 9 <= len(blob):
            height, width = struct.unpack(">HH", blob[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


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
    return np.asarray(scaled.round(), dtype=np.uint8)
