"""Float arithmetic on short Python lists, in the order numpy did it, so results are bit-for-bit numpy's.

The round simulator and the policies' closed forms work on vectors of a few numbers (one per GPU
type, or one per active job): numpy's import (~0.1 s of CPU) cost more than all their arithmetic.
Element-wise operations are the same IEEE operations in Python; what differs is the order of a sum,
so the sums here follow numpy's:

- :func:`fsum_np` is ``np.sum`` / ``np.add.reduce`` over a contiguous float64 vector: pairwise
  summation, eight accumulators per block of up to 128 numbers (numpy's ``pairwise_sum``);
- :func:`dot` is ``a @ b`` for two float64 vectors, which numpy hands to BLAS (``ddot``): each product
  added with one rounding (a fused multiply-add), in vector lanes over the whole blocks of 16 and one
  by one after (OpenBLAS's kernel on this project's x86-64 machines, AVX-512; checked against numpy
  for every length up to 200 in the tests). Below 16 numbers (every per-GPU-type vector) it is the
  plain loop of fused multiply-adds on any machine;
- :func:`median` is ``np.median`` (the mean of the two middle numbers of an even count).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for float64


def _fma_exact(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once: the product split exactly into two floats (Dekker), the three summed
    by ``math.fsum`` (which rounds once)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return math.fsum((p, e, c))


fma = getattr(math, "fma", None) or _fma_exact  # math.fma from Python 3.13


def fsum_np(values: Sequence[float]) -> float:
    """``float(np.sum(np.array(values, dtype=float)))``, in numpy's order."""
    return 0.0 + _pairwise(values, 0, len(values)) if len(values) else 0.0


def _pairwise(a: Sequence[float], lo: int, n: int) -> float:
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = [float(v) for v in a[lo:lo + 8]]
        i = 8
        whole = n - n % 8
        while i < whole:
            base = lo + i
            for j in range(8):
                r[j] += a[base + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)


def mean_np(values: Sequence[float]) -> float:
    """``float(np.mean(values))``."""
    return fsum_np(values) / len(values)


def median(values: Sequence[float]) -> float:
    """``float(np.median(values))``."""
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return float(s[mid]) if n % 2 else (0.0 + s[mid - 1] + s[mid]) / 2


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """``float(np.array(a) @ np.array(b))`` for float64 vectors, in BLAS's order (see the module)."""
    n = len(a)
    whole = n & -16  # the blocks of 16 go to the vector kernel, the rest one by one
    acc = 0.0
    if whole:
        # 4 accumulators of 8 lanes over each block of 32, folded to 4 of 4 lanes (lane j + lane j+4),
        # which take the last block of 16 if there is one; then summed across
        wide = [0.0] * 32
        i = 0
        while i + 32 <= whole:
            for j in range(32):
                wide[j] = fma(a[i + j], b[i + j], wide[j])
            i += 32
        lanes = [wide[8 * q + j] + wide[8 * q + j + 4] for q in range(4) for j in range(4)]
        while i < whole:
            for j in range(16):
                lanes[j] = fma(a[i + j], b[i + j], lanes[j])
            i += 16
        v = [((lanes[j] + lanes[4 + j]) + lanes[8 + j]) + lanes[12 + j] for j in range(4)]
        acc = (v[0] + v[2]) + (v[1] + v[3])
    for i in range(whole, n):
        acc = fma(b[i], a[i], acc)
    return acc
