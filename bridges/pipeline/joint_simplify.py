"""Shape-preserving downsampling of joint trajectories (radians against time).

Even decimation loses what matters most in a joint trace: a 10 ms excursion at 1 kHz falls
between kept samples. Instead, samples are chosen by Ramer-Douglas-Peucker on every joint at
once: a sample is kept when any joint deviates from the straight line (in time) between the
kept neighbours by more than the tolerance. Reconstructing by linear interpolation between
stored samples is then within the tolerance of every raw sample, for every joint. Each
joint's minimum and maximum are always kept exactly (they split the chunk first).

The number of samples is bounded: when the signal needs more than ``max_samples`` at the
requested tolerance (noise above the tolerance), the tolerance is doubled until it fits;
the tolerance actually met is returned, so the record can say what it guarantees.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

__all__ = ["simplify_joints"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def simplify_joints(t: FloatArray, positions: FloatArray, tolerance: float,
                    max_samples: int) -> tuple[IntArray, float]:
    """(sorted row indices to keep, the tolerance they meet) for ``positions`` of shape (n, joints)."""
    n = len(t)
    if n <= 2 or n <= max_samples and tolerance <= 0:
        return np.arange(n, dtype=np.int64), 0.0
    seeds = _seeds(positions, max_samples)
    # Above the signal's full range no sample deviates: the seeds alone always fit.
    ceiling = float(np.ptp(positions, axis=0).max()) if positions.size else 0.0
    current = max(tolerance, 1e-9)
    while True:
        keep = _rdp(t, positions, seeds, current, max_samples)
        if keep is not None:
            return np.flatnonzero(keep).astype(np.int64), current
        if current > ceiling:  # cannot happen (see above); guards the loop against float surprises
            return np.asarray(sorted(seeds), dtype=np.int64), current
        current *= 2.0


def _seeds(positions: FloatArray, max_samples: int) -> list[int]:
    """First, last, and each joint's minimum and maximum (when that many fit)."""
    n = len(positions)
    ends = {0, n - 1}
    if positions.size == 0:
        return sorted(ends)
    extremes = ends | set(np.argmin(positions, axis=0).tolist()) | set(np.argmax(positions, axis=0).tolist())
    return sorted(extremes if len(extremes) <= max_samples else ends)


def _rdp(t: FloatArray, positions: FloatArray, seeds: list[int], tolerance: float,
         max_samples: int) -> NDArray[np.bool_] | None:
    """RDP (largest deviation over joints) between the seeds; None as soon as more than
    ``max_samples`` would be kept (the caller retries with a larger tolerance)."""
    keep = np.zeros(len(t), dtype=bool)
    keep[seeds] = True
    kept = len(seeds)
    stack = list(itertools.pairwise(seeds))
    while stack:
        first, last = stack.pop()
        if last - first < 2:
            continue
        worst, deviation = _worst(t, positions, first, last)
        if deviation > tolerance:
            kept += 1
            if kept > max_samples:
                return None
            keep[worst] = True
            stack.append((first, worst))
            stack.append((worst, last))
    return keep


def _worst(t: FloatArray, positions: FloatArray, first: int, last: int) -> tuple[int, float]:
    """The sample between ``first`` and ``last`` farthest (any joint) from the line joining them."""
    span = t[last] - t[first]
    inner = t[first + 1 : last]
    if span > 0:
        fraction = (inner - t[first]) / span
    else:  # equal stamps: interpolate by position in the buffer
        fraction = np.arange(1, last - first) / (last - first)
    line = positions[first] + fraction[:, None] * (positions[last] - positions[first])
    deviation = np.abs(positions[first + 1 : last] - line).max(axis=1)
    index = int(np.argmax(deviation))
    return first + 1 + index, float(deviation[index])
