"""Pass ``trig``: how the kernel's sines and cosines are written, and the vectorised sin /
cos routine itself (:func:`routine`, shared by the batched kernels and the scalar ones).

A scalar kernel's ``config.scalar_trig`` (:data:`gen.codegen.config.SCALAR_TRIG`):
"hoisted" (the joint angles' through the routine, :data:`gen.cwriter.TRIG_LANES` at a
time, :func:`gen.cwriter.hoist_trig`) becomes glibc's ("libm") with ``avoid_stack`` or
without lanes (hoisting keeps vectors in locals; ``--no-lanes`` is plain C99); "vector"
(every sin and cos through the routine on one lane) and "libm" are written as asked.  A
batched kernel's are ``config.batch_trig``, written by :mod:`gen.codegen.batched`.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import casadi as ca

from ..cwriter import TRIG_LANES, c_double
from .plan import KernelPlan

#: |x| above which the vectorised sin/cos hand a lane to libm: the reduction's products
#: k*C1, k*C2 are exact while |k| < 2^21 (k = round(2x/pi), C1, C2 of 32 bits)
TRIG_LIMIT = 1e6


def run(plan: KernelPlan) -> None:
    """Record ``plan.trig`` (the scalar kernel's sin and cos as written) and
    ``plan.trig_code`` (the scalar writers' ``preamble``, ``trig_vector``, ``calls``)."""
    c = plan.config
    if plan.batch:
        plan.trig, plan.trig_code = c.scalar_trig, {}
        return
    trig = c.scalar_trig
    if trig == "hoisted" and (c.avoid_stack or not c.lanes):
        trig = "libm"       # hoisting keeps vectors in locals; --no-lanes: plain C99
    plan.trig = trig
    plan.trig_code = {"hoisted": hoisted, "vector": one_lane}.get(trig, lambda p: {})(f"{plan.prefix}_cg")


def pi_over_2_parts() -> tuple[float, float, float]:
    """pi/2 = C1 + C2 + C3 (+ O(2^-118)): C1 and C2 with 32 significant bits (so k*C1 and
    k*C2 are exact for |k| < 2^21), C3 the rounded rest (Cody & Waite, "Software Manual for
    the Elementary Functions", 1980, ch. 8).  pi to 50 digits, exact rational arithmetic."""
    half_pi = Fraction("1.5707963267948966192313216916397514420985846996875529")

    def chop(x: Fraction, bits: int) -> float:
        e = math.floor(math.log2(x)) if x > 0 else 0
        scale = Fraction(2) ** (bits - 1 - e)
        return float(Fraction(math.floor(x * scale)) / scale)

    c1 = chop(half_pi, 32)
    c2 = chop(half_pi - Fraction(c1), 32)
    c3 = float(half_pi - Fraction(c1) - Fraction(c2))
    return c1, c2, c3


def routine(p: str, lanes: int) -> str:
    """``static`` C of ``void <p>_trig(const <p>_v *x, <p>_v *y, int cosine)``: ``*y`` =
    sin or cos of each of the ``lanes`` doubles of ``*x`` (which ``y`` may be).

    x = k pi/2 + r with k = round(2x/pi) as an integer (``__builtin_convertvector`` of
    2x/pi +- 1/2, truncated; its low bits are k mod 4) and r = ((x - k C1) - k C2) - k C3
    (:func:`pi_over_2_parts`; x - k C1 is exact by Sterbenz' lemma), |r| <= pi/4; sin r
    and cos r by their Taylor series to r^17 and r^18 (the first term left out is below
    1e-19 on |r| <= pi/4), Horner's scheme; the quadrant k mod 4 picks +-sin r or +-cos r
    by bit masks (cos x = sin(x + pi/2): quadrant k + 1).  Measured against glibc's sin
    and cos (tests/test_batch.py): within 2.3e-16 absolute on |x| <= 1e6.  Lanes with
    |x| > :data:`TRIG_LIMIT`, inf or NaN (a test on the bits) take libm's value; the
    reduction sees 0 there, so the conversion is always in range.

    Immune to ``-ffast-math``: k is an integer conversion, where rounding by adding and
    subtracting 1.5 * 2^52 is folded away by ``-fassociative-math`` (then sin(0.3) = 0),
    and the range test is on the bits, which ``-ffinite-math-only`` cannot assume away;
    reassociating the reduction there costs a few ulps of r.  Vectors pass by pointer:
    no function takes or returns one (:func:`gen.cwriter.vector_types`)."""
    c1, c2, c3 = pi_over_2_parts()
    sin_c = [(-1) ** (j // 2) / math.factorial(j) for j in range(3, 18, 2)]     # r^3 .. r^17
    cos_c = [(-1) ** (j // 2) / math.factorial(j) for j in range(4, 19, 2)]     # r^4 .. r^18

    def horner(coeffs):
        expr = c_double(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            expr = f"{c_double(c)} + r2 * ({expr})"
        return expr

    def splat(c):
        return "{" + ", ".join([c] * lanes) + "}"

    v, u, i32, i64 = f"{p}_v", f"{p}_u64", f"{p}_i32", f"{p}_i64"
    limit_bits = f"0x{struct.unpack('<Q', struct.pack('<d', TRIG_LIMIT))[0]:016x}ULL"
    return f"""/* sin and cos of each lane (see rbdgen's gen/codegen/trig.py, routine): Cody-Waite
 * reduction by pi/2 in three parts with k = round(2x/pi) an integer conversion, Taylor
 * series on |r| <= pi/4, quadrant by bit masks; |x| > {TRIG_LIMIT:g}, inf and NaN lanes through
 * libm.  No rounding trick and no test that -ffast-math folds away. */
static void {p}_trig(const {v} *xp, {v} *yp, int cosine)
{{
    const {u} sign = {splat("0x8000000000000000ULL")}, limit = {splat(limit_bits)};
    const {u} half = {splat("0x3fe0000000000000ULL")};     /* the bits of 0.5 */
    const {v} x = *xp;
    {u} near = ({u})((({u})x & ~sign) <= limit);  /* all ones where |x| <= limit (NaN: no) */
    {v} xr = ({v})(({u})x & near);               /* 0 in the lanes libm takes */
    {v} kd = xr * {c_double(2 / math.pi)};
    {i32} ki = __builtin_convertvector(kd + ({v})((({u})kd & sign) | half), {i32});
    {v} k = __builtin_convertvector(ki, {v});
    {v} r = ((xr - k * {c_double(c1)}) - k * {c_double(c2)}) - k * {c_double(c3)};
    {v} r2 = r * r;
    {v} s = r + (r * r2) * ({horner(sin_c)});
    {v} c = (1.0 - 0.5 * r2) + (r2 * r2) * ({horner(cos_c)});
    {u} q = ({u})__builtin_convertvector(ki, {i64}) + ({u}){splat("(unsigned long long)cosine")};
    {u} odd = -(q & 1);                         /* all ones in odd quadrants: +-cos r */
    {u} y = (({u})s & ~odd) | (({u})c & odd);
    {v} out;
    int l, any = 0;
    y ^= (q & 2) << 62;                         /* quadrants 2, 3: -sin r, -cos r */
    out = ({v})y;
    for (l = 0; l < {lanes}; ++l) any |= near[l] == 0;
    if (any)
        for (l = 0; l < {lanes}; ++l)
            if (near[l] == 0) out[l] = cosine ? cos(x[l]) : sin(x[l]);
    *yp = out;
}}
"""


def vector_typedefs(p: str, lanes: int) -> list[str]:
    """C typedefs of ``<p>_v`` (``lanes`` doubles), ``<p>_u64``, ``<p>_i64`` and
    ``<p>_i32`` (as many 64- and 32-bit integers, for :func:`routine`'s bit masks
    and its integer k)."""
    return [f"typedef double {p}_v __attribute__((vector_size({8 * lanes})));",
            f"typedef unsigned long long {p}_u64 __attribute__((vector_size({8 * lanes})));",
            f"typedef long long {p}_i64 __attribute__((vector_size({8 * lanes})));",
            f"typedef int {p}_i32 __attribute__((vector_size({4 * lanes})));"]


def hoisted(p: str) -> dict:
    """``write_functions``' ``preamble`` and ``trig_vector`` for :func:`gen.cwriter.hoist_trig`:
    the joint angles' sin and cos through :func:`routine`,
    :data:`gen.cwriter.TRIG_LANES` at a time."""
    preamble = "\n".join([*vector_typedefs(p, TRIG_LANES), "", routine(p, TRIG_LANES)])
    return {"preamble": preamble, "trig_vector": p}


def one_lane(p: str) -> dict:
    """``write_functions``' ``calls`` and ``preamble`` for a scalar kernel whose sin and
    cos are :func:`routine` on a vector of one double: the same IEEE
    operations in the same order as every lane of a batched kernel."""
    code = "\n".join([*vector_typedefs(p, 1), "", routine(p, 1),
                         f"static double {p}_trig1(double x, int cosine) {{ {p}_v v = {{x}}; {p}_trig(&v, &v, cosine); "
                         "return v[0]; }"])
    return {"calls": {ca.OP_SIN: f"{p}_trig1({{0}}, 0)", ca.OP_COS: f"{p}_trig1({{0}}, 1)"}, "preamble": code}
