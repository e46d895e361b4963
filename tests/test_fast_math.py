"""Generated C under -ffast-math (issue 32 §7): the kernels users build with it compute
what the plain build computes, and every documented return code survives it.

-ffast-math brings -fassociative-math, which folds the vectorised sin/cos's rounding by
adding and subtracting 1.5 * 2^52 away (sin(0.3) was 0: solo12 aba with vector trig off
by 7.3x, talos batch-8 aba by 1e-1), and -ffinite-math-only, which folds isfinite() and
NaN comparisons away (a NaN lane of a batch went unreported, NaN gains or weights gave -1
instead of -3, tol = NaN was accepted).  The kernels now round by an integer conversion
and test inf and NaN on the bits (gen/codegen/trig.py, routine; the wrappers).

FAST_TOL: -ffast-math lets the compiler reassociate sums and contract multiply-adds,
which moves results by a few ulps times the conditioning (the dual proximal solver here,
aba and crba: ~1e-15 measured); the old failures were 1e-1 and more.
"""
import numpy as np
import pytest
from conftest import load_or_skip, rel_err
from test_constrained import states

import gen


def ptr(k, a):
    """A ``double *`` of kernel ``k``'s cffi to the contiguous float64 array ``a``."""
    return k.ffi.from_buffer("double[]", a)


#: -O1: gcc applies -ffast-math's folds from -O1 on (checked on the two hazards above: at
#: -O1 -ffast-math ``(x + 0x1.8p52) - 0x1.8p52`` compiles to ``x``, ``isfinite(x)`` to 1
#: and ``x != x`` to 0, as at -O2), and compiles a batch-8 aba twice as fast as -O2
FAST = "-O1 -ffast-math"
PLAIN = "-O1"
FAST_TOL = 1e-12
SOLO = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"


def pair(*args, **options):
    """The kernel built with FAST and with PLAIN."""
    return gen.build(*args, flags=FAST, **options), gen.build(*args, flags=PLAIN, **options)


def raw(k, inputs, work=None):
    """(return code, outputs) of the C function on float64 copies of ``inputs``."""
    outs = [np.empty(o["size"] * (k.batch or 1)) for o in k.function["outputs"]]
    return k.call_raw([np.array(a, dtype=float) for a in inputs], outs, work), outs


def assert_same(fast, plain, what):
    for f, p in zip(fast, plain):
        err = rel_err(f, p)
        assert err <= FAST_TOL, f"{what}: -ffast-math vs plain build off by {err:.2e}"


def test_vector_trig_scalar_kernel():
    model = load_or_skip("solo12")
    fast, plain = pair(model, "aba", scalar_trig="vector")
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        assert_same([fast(q, v, tau)], [plain(q, v, tau)], "solo12 aba, scalar_trig=vector")
    tau[3] = np.nan
    rc, outs = raw(fast, [q, v, tau])
    assert rc == -1 and np.isnan(outs[0]).all()


def test_batched_kernel_and_its_lanes():
    """solo12 aba, 8 lanes: values, a NaN lane (-1, its outputs NaN, the others computed),
    and a lane whose outputs overflow (-2) next to it: <symbol>_status reports both.  The
    hazards are in the batched trig routine and the lane wrapper, which every robot with a
    revolute joint has: solo12's batch-8 aba (12 revolute joints) is a quarter of talos's
    C (120 kB against 457 kB), and with the trig routine's mask taken off (the rounding
    constant then folded away) its -ffast-math lanes are 0.93 off."""
    model = load_or_skip("solo12")
    fast, plain = pair(model, "aba", batch=8)
    rng = np.random.default_rng(2)
    n = 8
    qs = np.array([model.random_q(rng) for _ in range(n)])
    vs, taus = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    assert_same(fast(qs, vs, taus), plain(qs, vs, taus), "solo12 aba, batch 8")
    taus[2, 5] = np.nan                      # lane 2: a non-finite input
    taus[5, :] = 1e308                       # lane 5: finite inputs, overflowing outputs
    inputs = [np.ascontiguousarray(x.T).ravel() for x in (qs, vs, taus)]    # lanes innermost
    for k in (fast, plain):
        rc, (ddq,) = raw(k, inputs)
        assert rc == -1, f"{k.symbol}: a NaN lane must give -1, got {rc}"
        status = k.ffi.new("int[8]")
        out = np.empty(model.nv * n)
        rc = getattr(k.lib, f"{k.symbol}_status")(*[ptr(k, a) for a in inputs], ptr(k, out), k.ffi.NULL, status)
        lanes = out.reshape(model.nv, n)
        assert rc == -1 and list(status) == [0, 0, -1, 0, 0, -2, 0, 0], list(status)
        assert np.isnan(lanes[:, 2]).all() and not np.isfinite(lanes[:, 5]).all()
        assert np.isfinite(np.delete(lanes, [2, 5], axis=1)).all()
    ref = plain(np.delete(qs, [2, 5], 0), np.delete(vs, [2, 5], 0), np.delete(taus, [2, 5], 0))
    assert_same([np.delete(lanes, [2, 5], axis=1).T], [ref], "solo12 aba, the finite lanes")


def test_driver_with_tol():
    """An early-exit driver: values and iterations, tol = NaN refused (-3), NaN input -1."""
    model = load_or_skip("solo12")
    fast, plain = pair(model, "prox_ltl", SOLO, tol=1e-10, max_iter=50, mu=1e-6)
    cset = gen.parse_constraints(model, SOLO)
    for q, v, tau in states(model, 3, n=3, cset=cset):
        f, p = fast(q, v, tau), plain(q, v, tau)
        assert np.ravel(f[2])[0] == np.ravel(p[2])[0], "iteration counts differ"
        assert_same(f[:2], p[:2], "solo12 prox_ltl driver")
    opts = getattr(fast.lib, f"{fast.symbol}_opts")
    for tol, max_iter, want in ((np.nan, 50, -3), (-1e-9, 50, -3), (1e-10, 0, -3), (np.inf, 50, 0)):
        outs = [np.empty(o["size"]) for o in fast.function["outputs"]]
        work = np.empty(fast.work_size)
        rc = opts(*[ptr(fast, np.ascontiguousarray(a)) for a in (q, v, tau)], *[ptr(fast, o) for o in outs],
                  ptr(fast, work), tol, max_iter, fast.ffi.NULL)
        assert rc == want, f"tol={tol}, max_iter={max_iter}: {rc}, documented {want}"
        assert np.isnan(outs[0]).all() == (want == -3)
    rc, outs = raw(fast, [q, v, np.full(model.nv, np.inf)])
    assert rc == -1 and all(np.isnan(o).all() for o in outs)


@pytest.mark.parametrize("bad", ["mu", "gains", "weights"])
def test_runtime_parameters(bad):
    """A kernel with run-time mu, gains and weights: values; a NaN parameter is -3."""
    model = load_or_skip("solo12")
    fast, plain = pair(model, "prox_ltl", SOLO, iterations=3, runtime_params=True)
    (q, v, tau), = states(model, 4, n=1, cset=gen.parse_constraints(model, SOLO))
    params = {"mu": np.array([1e-4]), "gains": np.array([10.0, 3.0, 5.0]), "weights": np.array([1.0, 2.0, 0.5, 4.0])}
    assert_same(fast(q, v, tau, *params.values())[:2], plain(q, v, tau, *params.values())[:2],
                "solo12 prox_ltl with run-time parameters")
    params[bad][-1] = np.nan
    for k in (fast, plain):
        rc, outs = raw(k, [q, v, tau, *params.values()])
        assert rc == -3, f"{k.symbol}: NaN {bad} gave {rc}, documented -3"
        assert all(np.isnan(o).all() for o in outs)
