"""Vectorised geometry for pose paths: yaw, path length, Ramer-Douglas-Peucker, summaries."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_COORDINATE_M", "bbox", "check_position", "path_length", "rdp_mask", "representative_point", "yaw_from_quaternions"]

FloatArray = NDArray[np.float64]

#: The largest coordinate (metres, on any axis) a pose or a transform may have; beyond it the
#: message is malformed (docs/replay.md, "Malformed messages"). Far enough for UTM (northing up to
#: 1e7 m) and ECEF frames, 2.5 times the geostationary orbit; while points stay within it, squared
#: distances between them (motion checks, path lengths) stay far from float overflow: a stored
#: x = 1e308 made the next valid message's motion check raise OverflowError.
MAX_COORDINATE_M = 1e8


def check_position(x: float, y: float, z: float) -> None:
    """ValueError unless every coordinate is finite and within ``MAX_COORDINATE_M``."""
    if not (abs(x) <= MAX_COORDINATE_M and abs(y) <= MAX_COORDINATE_M and abs(z) <= MAX_COORDINATE_M):  # NaN too
        raise ValueError(f"position ({x:g}, {y:g}, {z:g}) is not finite or beyond {MAX_COORDINATE_M:g} m")


def yaw_from_quaternions(qx: FloatArray, qy: FloatArray, qz: FloatArray, qw: FloatArray) -> FloatArray:
    """Heading (rotation about z, radians) of each quaternion."""
    return np.arctan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))


def path_length(points: FloatArray) -> float:
    """Sum of the straight segments between consecutive points (rows of an (n, 3) array)."""
    if len(points) < 2:
        return 0.0
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def rdp_mask(points: FloatArray, tolerance: float) -> NDArray[np.bool_]:
    """Which points Ramer-Douglas-Peucker keeps at ``tolerance`` (distance to the simplified path).

    Iterative (no recursion limit on long paths); each step is one vectorised distance
    computation over the points of one segment. First and last points are always kept.
    """
    n = len(points)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    if n < 3 or tolerance <= 0:
        keep[:] = True
        return keep
    keep[0] = keep[-1] = True
    stack = [(0, n - 1)]
    while stack:
        first, last = stack.pop()
        if last - first < 2:
            continue
        distances = _segment_distances(points[first + 1 : last], points[first], points[last])
        worst = int(np.argmax(distances))
        if distances[worst] > tolerance:
            split = first + 1 + worst
            keep[split] = True
            stack.append((first, split))
            stack.append((split, last))
    return keep


def _segment_distances(points: FloatArray, start: FloatArray, end: FloatArray) -> FloatArray:
    """Distance of each point to the segment start-end."""
    direction = end - start
    length_sq = float(direction @ direction)
    offsets = points - start
    if length_sq == 0.0:
        return np.asarray(np.linalg.norm(offsets, axis=1), dtype=np.float64)
    along = np.clip(offsets @ direction / length_sq, 0.0, 1.0)
    return np.asarray(np.linalg.norm(offsets - along[:, None] * direction, axis=1), dtype=np.float64)


def representative_point(points: FloatArray) -> FloatArray:
    """The point of the path closest to its centroid (always a place the robot actually was)."""
    centroid = points.mean(axis=0)
    return np.asarray(points[int(np.argmin(((points - centroid) ** 2).sum(axis=1)))], dtype=np.float64)


def bbox(points: FloatArray) -> list[list[float]]:
    """[[minx, miny, minz], [maxx, maxy, maxz]]."""
    return [points.min(axis=0).tolist(), points.max(axis=0).tolist()]
