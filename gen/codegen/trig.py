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


#: sin r = r + r^3 P(r^2), cos r = 1 - r^2/2 + r^4 Q(r^2) on |r| <= pi/4: the coefficients
#: of P and Q (degree 5), :func:`fit_coefficients` rounded to doubles.  Their error there
#: (exact arithmetic, tests/test_batch.py against mpmath): 1.4e-17 (sin), 9e-19 (cos);
#: Taylor's series needs degree 7 (r^17, r^18) for the same, and a product more on the path
SIN_COEFFS = tuple(map(float.fromhex, ("-0x1.5555555555555p-3", "0x1.1111111110bb2p-7", "-0x1.a01a019e83816p-13",
                                         "0x1.71de379654304p-19", "-0x1.ae600aca92c64p-26", "0x1.5e0b05bff20f2p-33")))
COS_COEFFS = tuple(map(float.fromhex, ("0x1.5555555555555p-5", "-0x1.6c16c16c16967p-10", "0x1.a01a019f4e9b4p-16",
                                         "-0x1.27e4fa17bf139p-22", "0x1.1eeb68cd22f56p-29", "-0x1.907d8f29fe831p-37")))


def fit_coefficients(degree: int = 5, digits: int = 50) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The polynomials P and Q of :data:`SIN_COEFFS` and :data:`COS_COEFFS`: interpolation
    of (sin r - r) / r^3 and (cos r - 1 + r^2/2) / r^4 as functions of z = r^2 at the
    ``degree + 1`` Chebyshev nodes of [0, (pi/4)^2 (1 + 1e-4)] (near the minimax
    polynomial for functions this smooth), solved at ``digits`` decimal digits (mpmath,
    with sympy), rounded to doubles."""
    import mpmath

    with mpmath.workdps(digits):
        top = (mpmath.pi / 4) ** 2 * mpmath.mpf("1.0001")
        n = degree + 1
        nodes = [top / 2 * (1 - mpmath.cos(mpmath.pi * (2 * i + 1) / (2 * n))) for i in range(n)]
        a = mpmath.matrix([[z ** j for j in range(n)] for z in nodes])

        def fit(g):
            return tuple(float(c) for c in mpmath.lu_solve(a, mpmath.matrix([g(z) for z in nodes])))

        return (fit(lambda z: (mpmath.sin(mpmath.sqrt(z)) - mpmath.sqrt(z)) / z ** mpmath.mpf(1.5)),
                fit(lambda z: (mpmath.cos(mpmath.sqrt(z)) - 1 + z / 2) / z ** 2))


def routine(p: str, lanes: int) -> str:
    """``static`` C of ``void <p>_trig(const <p>_v *x, <p>_v *y, int cosine)``: ``*y`` =
    sin or cos of each of the ``lanes`` doubles of ``*x`` (which ``y`` may be).

    x = k pi/2 + r with k = round(2x/pi): 2x/pi + 1.5 * 2^52 rounds to the integer k in
    its low mantissa bits (|2x/pi| < 2^51; ties to even, any k within 1/2 + ulp of 2x/pi
    will do), whose low two bits are k mod 4; k as a double is those bits less 1.5 * 2^52
    (0 in the lanes libm takes).
    r = ((x - k C1) - k C2) - k C3 (:func:`pi_over_2_parts`; x - k C1 is exact by
    Sterbenz' lemma, and so is the next step where r is near 0: sin stays within 2 ulps
    of glibc's next to its zeros, where (x - k C1) - (k C2 + k C3), a step shorter, is
    1e9 ulps off), |r| <= pi/4 + an ulp; sin r and cos r by polynomials of degree 13 and 14
    (:data:`SIN_COEFFS`, :data:`COS_COEFFS`) as s = (r + r^3 A) + r^7 (B + r^4 C) and
    c = ((1 - r^2/2) + r^4 A') + r^8 (B' + r^4 C') with A, B, C pairs a + b r^2: 4
    dependent products and sums after r (Taylor's degree 17 in Estrin's scheme took 5;
    the routine heads every scalar kernel's critical path: ur5 nle 56.4 -> 54.7 ns,
    interleaved), the last sum rounding once more; the quadrant k mod 4 picks +-sin r or +-cos r
    by bit masks made by shifts of k's bits (cos x = sin(x + pi/2): quadrant k + 1).
    Measured against glibc's sin and cos (tests/test_batch.py): within 2.3e-16 absolute
    on |x| <= 1e6 (3 ulps of the result at most, 1 near the zeros; 4 million arguments).
    Lanes with |x| > :data:`TRIG_LIMIT`, inf or NaN (a test on the bits, off the path from
    x to r: k is 0 there and the lane's result is discarded) take libm's value.

    Immune to ``-ffast-math``: the rounding constant is added to 2x/pi and taken off again
    across a bit mask with the range test's lanes (``& near``), which
    ``-fassociative-math`` cannot fold away (without the mask it folds k to 2x/pi, then
    sin(0.3) = 0); the range test is on the bits, which ``-ffinite-math-only`` cannot
    assume away; reassociating the reduction costs a few ulps of r.  No integer
    conversion (two conversions and a widening per vector before); the quadrant's masks
    need no constants of their own.  Vectors pass by pointer: no function takes or returns
    one (:func:`gen.cwriter.vector_types`)."""
    c1, c2, c3 = pi_over_2_parts()
    def pairs(coeffs):               # (a + r2 b) of each pair of coefficients
        return [f"({c_double(a)} + r2 * {c_double(b)})" for a, b in zip(coeffs[::2], coeffs[1::2])]

    sa, sb, sc = pairs(SIN_COEFFS)
    ca_, cb, cc = pairs(COS_COEFFS)

    def splat(c):
        return "{" + ", ".join([c] * lanes) + "}"

    v, u, i64 = f"{p}_v", f"{p}_u64", f"{p}_i64"
    limit_bits, magic_bits = (f"0x{struct.unpack('<Q', struct.pack('<d', x))[0]:016x}ULL"
                              for x in (TRIG_LIMIT, 1.5 * 2.0 ** 52))
    all_near = " & ".join(f"near[{lane}]" for lane in range(lanes))
    return f"""/* sin and cos of each lane (see rbdgen's gen/codegen/trig.py, routine): Cody-Waite
 * reduction by pi/2 in three parts with k = round(2x/pi) by adding 1.5 * 2^52 (taken off
 * across a bit mask), polynomials of degree 13 and 14 on |r| <= pi/4, quadrant by bit
 * masks; |x| > {TRIG_LIMIT:g}, inf and NaN lanes through libm.  No test that -ffast-math
 * folds away. */
static void {p}_trig(const {v} *xp, {v} *yp, int cosine)
{{
    const {u} sign = {splat("0x8000000000000000ULL")}, limit = {splat(limit_bits)};
    const {u} magic = {splat(magic_bits)};      /* the bits of 1.5 * 2^52 */
    const {v} x = *xp;
    {u} near = ({u})((({u})x & ~sign) <= limit);  /* all ones where |x| <= limit (NaN: no) */
    {u} kb = ({u})(x * {c_double(2 / math.pi)} + ({v})magic) & near;  /* k in the low bits */
    {v} k = ({v})kb - ({v})(magic & near);      /* 0 in libm's lanes */
    {v} r = ((x - k * {c_double(c1)}) - k * {c_double(c2)}) - k * {c_double(c3)};
    {v} r2 = r * r, z2 = r2 * r2, r3 = r * r2, z4 = z2 * z2, r7 = r3 * z2;
    {v} s = (r + r3 * {sa}) + r7 * ({sb} + z2 * {sc});
    {v} c = ((1.0 - 0.5 * r2) + z2 * {ca_}) + z4 * ({cb} + z2 * {cc});
    {u} q = kb + ({u}){splat("(unsigned long long)cosine")};
    {u} odd = ({u})((({i64})(q << 63)) >> 63);  /* all ones in odd quadrants: +-cos r */
    {u} y = (({u})s & ~odd) | (({u})c & odd);
    {v} out;
    int l;
    y ^= (q << 62) & sign;                      /* quadrants 2, 3: -sin r, -cos r */
    out = ({v})y;
    if (~({all_near}))
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
