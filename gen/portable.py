"""Arithmetic for model constants that gives the same bits on every machine (issue 12 §1).

Model constants (placements, axes, inertias) are computed once, before tracing, and
become literals of the emitted C; CSE merges equal literals, so a last-bit difference
also changes the graph.  Two common tools are CPU-dependent on x86-64 and must not
compute them:

* NumPy's ``@``, ``dot`` and ``linalg.norm`` call BLAS, and OpenBLAS picks a kernel for
  the running CPU (Haswell, SkylakeX, ...) with its own summation order and fused
  multiply-adds, even for 3x3 products;
* glibc picks an FMA, AVX or SSE2 build of ``sin`` / ``cos`` for the running CPU (so does
  Python's ``math``, which calls it); the builds disagree in the last bit on about one
  argument in a thousand, and libm results also vary between libm versions.

What is safe: single IEEE-754 operations on doubles (``+ - * /`` and ``sqrt``, one
correct rounding each), whether on Python floats, ``math.sqrt`` or NumPy element-wise
ufuncs, since SIMD does not change their results; and arbitrary-precision software
arithmetic (:mod:`decimal`).  :func:`matmul` and :func:`cos_sin` build on those.
"""
from __future__ import annotations

import math
import operator
from decimal import Decimal, localcontext
from functools import cache, reduce

import numpy as np

DIGITS = 80     # decimal digits after the point to which cos_sin works


def matmul(A, B):
    """``A @ B`` for small constant arrays, 1-D or 2-D with NumPy's ``@`` semantics (a
    1-D left operand is a row, a 1-D right operand a column, and their axes are dropped
    from the result; 1-D @ 1-D is a float).  Each entry is ``a_0 b_0 + a_1 b_1 + ...``
    summed left to right in Python floats, one rounding per operation and no fused
    multiply-add, so the result is the same on every CPU.  The inner dimension must not
    be empty."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    a = A.reshape(1, -1) if A.ndim == 1 else A
    b = B.reshape(-1, 1) if B.ndim == 1 else B
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.shape[1] == 0:
        raise ValueError(f"matmul: shapes {A.shape} and {B.shape} do not multiply")
    out = np.array([[reduce(operator.add, [float(x) * float(y) for x, y in zip(row, col)])
                     for col in b.T] for row in a]).reshape(a.shape[0], b.shape[1])
    shape = A.shape[:-1] + B.shape[1:]
    return out.reshape(shape) if shape else float(out[0, 0])


def norm(x) -> float:
    """Euclidean norm of a 1-D array, ``sqrt(matmul(x, x))``: the same on every CPU."""
    return math.sqrt(matmul(x, x))


def _series(r: Decimal, first: int) -> Decimal:
    """``sum_j (-1)^j r^(2j + first) / (2j + first)!``: cos r for ``first = 0``, sin r for
    ``first = 1``, to ``DIGITS`` digits after the point for ``|r| <= pi/4``."""
    term = r if first else Decimal(1)
    total, n, r2 = term, first, r * r
    tiny = Decimal(10) ** -(DIGITS + 5)
    while abs(term) > tiny:
        term = -term * r2 / ((n + 1) * (n + 2))
        total += term
        n += 2
    return total


@cache
def _half_pi(digits: int) -> Decimal:
    """pi / 2 to ``digits`` (and a few more) significant digits, by Machin's formula
    ``pi = 16 atan(1/5) - 4 atan(1/239)`` with ``atan(1/n) = sum_j (-1)^j / ((2j+1) n^(2j+1))``."""
    with localcontext() as ctx:
        ctx.prec = digits + 5

        def atan_inv(n: int) -> Decimal:
            total, power, j = Decimal(0), Decimal(1) / n, 0
            while power > Decimal(10) ** -(digits + 5):
                total += (-1) ** j * power / (2 * j + 1)
                power /= n * n
                j += 1
            return total

        return (16 * atan_inv(5) - 4 * atan_inv(239)) / 2


def cos_sin(x: float) -> tuple[float, float]:
    """``(cos x, sin x)`` of a finite double, each the double nearest the exact value
    (correctly rounded), computed in decimal software arithmetic: ``x`` is reduced to
    ``r = x - k pi/2``, ``|r| <= pi/4``, with pi/2 to ``DIGITS`` digits plus the digits of
    ``x``'s integer part (so the reduction keeps ``DIGITS`` digits after the point); cos r
    and sin r are summed as Taylor series; the quadrant ``k mod 4`` maps them to cos x and
    sin x; each is rounded once to a double (``float`` of a ``Decimal`` rounds correctly).
    The ~60 digits left even when ``r`` is as close to 0 as a double allows are far more
    than correct rounding needs in practice.  No CPU feature, libm or Python version
    enters, so the result is the same everywhere."""
    with localcontext() as ctx:
        ctx.prec = DIGITS + max(0, math.frexp(x)[1]) // 3 + 1
        d = Decimal(float(x))                 # exact
        half_pi = _half_pi(ctx.prec)
        k = int((d / half_pi).to_integral_value())
        r = d - k * half_pi
        c, s = float(_series(r, 0)), float(_series(r, 1))
    return [(c, s), (-s, c), (-c, -s), (s, -c)][k % 4]
