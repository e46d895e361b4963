"""Batched kernels (issue 15 §1; gen/emit.py "batched kernels", gen/build.py): every lane of
an N-state call equals the scalar kernel on that state, the vectorised sin/cos against
libm, the per-lane return codes, the layout, and the refusals."""
import json
import math

import casadi as ca
import numpy as np
import pytest

import gen
from gen.algorithms import ALGORITHMS
from gen.build import build, compile_cached, compile_flags
from gen.cli import main as cli_main
from gen.codegen.batched import write as write_batched
from gen.codegen.trig import COS_COEFFS, SIN_COEFFS, TRIG_LIMIT, fit_coefficients
from gen.errors import RbdgenError
from conftest import load_or_skip, rel_err

LANE_TOL = 1e-14         # relative: max|lane - scalar| / max(1, max|scalar|), the bound
ALM_LANE_TOL = 1e-7     # constrained_aba at mu = 1e-6, default build: its floor (see its test)
TRIG_TOL = 2.3e-16       # absolute, vectorised sin/cos against glibc on |x| <= TRIG_LIMIT
#: the routine's polynomials in exact arithmetic against sin and cos on |r| <= pi/4: a tenth
#: of an ulp of 0.7 (the rounding of the evaluation and of the reduction comes on top)
POLY_TOL = 2e-17
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLES = "6D:left_sole_link,6D:right_sole_link"


def stacked_inputs(model, algorithm, k, rng, cset=None):
    """k random states per input: q a random configuration (with angles far beyond pi for
    revolute joints, to exercise the trigonometric reduction), the others normal."""
    out = []
    for name, n in ALGORITHMS[algorithm].inputs(model, cset):
        if name == "q":
            out.append(np.array([model.random_q(rng) for _ in range(k)]))
        else:
            out.append(rng.normal(size=(k, n)))
    return out


def check_lanes(model, algorithm, lanes, kernel_cache, spec=None, k=None, tol=LANE_TOL, flags=None,
                batch_trig="vector", scalar_trig="libm", **options):
    """k states (not a multiple of the lanes: the last call is padded) through the batched
    kernel equal the scalar kernel state by state to ``tol``; returns the largest difference."""
    cset = ALGORITHMS[algorithm].constraint_set(model, spec) if spec else None
    scalar = build(model, algorithm, cset, cache=kernel_cache, flags=flags, scalar_trig=scalar_trig, **options)
    batched = build(model, algorithm, cset, cache=kernel_cache, batch=lanes, flags=flags, batch_trig=batch_trig,
                    **options)
    assert batched.batch == lanes and f"_b{lanes}" in batched.symbol
    rng = np.random.default_rng(lanes + len(algorithm))
    k = k or lanes + 3
    ins = stacked_inputs(model, algorithm, k, rng, cset)
    got = batched(*ins)
    got = got if isinstance(got, tuple) else (got,)
    worst = 0.0
    for j in range(k):
        ref = scalar(*[x[j] for x in ins])
        ref = ref if isinstance(ref, tuple) else (ref,)
        for name, g, r in zip([o["name"] for o in scalar.function["outputs"]], got, ref):
            assert g[j].shape == np.shape(r), f"{algorithm} output {name}: shape {g[j].shape} vs {np.shape(r)}"
            e = rel_err(g[j], r)
            assert e <= tol, f"{model.name}/{algorithm} batch={lanes}: state {j} output {name} differs by {e:.3g}"
            worst = max(worst, e)
    return worst


@pytest.mark.parametrize("lanes", [4, 8])
@pytest.mark.parametrize("robot", ["ur5", "solo12"])
@pytest.mark.parametrize("algorithm", ["rnea", "aba", "crba"])
def test_lanes_equal_scalar_kernel(robot, algorithm, lanes, kernel_cache):
    check_lanes(load_or_skip(robot), algorithm, lanes, kernel_cache)


@pytest.mark.parametrize("lanes", [4, 8])
@pytest.mark.parametrize("robot,spec", [("ur5", "6D:tool0"), ("solo12", FEET)])
def test_constrained_aba_fixed_iterations(robot, spec, lanes, kernel_cache):
    """constrained_aba (K = 3, mu = 1e-6) amplifies a rounding difference by ~1 / (mu
    lambda_min(M)) (its Floor in the registry; ur5 6D tool0: one ulp in sin/cos or one
    FMA contraction decided differently moves lam by ~1e-10 relative).  Lanes therefore
    equal the scalar kernel to 1e-14 when both round alike -- contraction off and libm's
    sin/cos in the lanes: bit for bit -- and by default (vector sin/cos, gcc's
    contraction) within ALM_LANE_TOL, the kernel's own floor against NumPy
    (tests/test_build.py ALM_TOL; measured: ur5 6e-11, solo12 4 feet 1.4e-9)."""
    model = load_or_skip(robot)
    for trig in ({"batch_trig": "libm"}, {"scalar_trig": "vector"}):   # one sin/cos in both kernels
        exact = check_lanes(model, "constrained_aba", lanes, kernel_cache, spec=spec, iterations=3,
                            flags="-O3 -march=native -ffp-contract=off", **trig)
        assert exact == 0.0
    check_lanes(model, "constrained_aba", lanes, kernel_cache, spec=spec, iterations=3, tol=ALM_LANE_TOL)


def test_scalar_kernel_with_the_batched_sin_cos(kernel_cache):
    """scalar_trig="vector": the scalar kernel's sin and cos are the batched kernels'
    routine on one lane (symbol ..._vtrig, recorded in the manifest); "libm": glibc's
    (..._libmtrig); the default, "hoisted": the joint angles' through the routine four at
    a time (not recorded).  All within the routine's accuracy of the glibc build (solo12
    aba); the lanes against the one-lane form: test_constrained_aba_fixed_iterations."""
    model = load_or_skip("solo12")
    plain = build(model, "aba", cache=kernel_cache)
    libm = build(model, "aba", cache=kernel_cache, scalar_trig="libm")
    vtrig = build(model, "aba", cache=kernel_cache, scalar_trig="vector")
    assert vtrig.symbol == plain.symbol + "_vtrig" and vtrig.manifest["scalar_trig"] == "vector"
    assert libm.symbol == plain.symbol + "_libmtrig" and libm.manifest["scalar_trig"] == "libm"
    assert "scalar_trig" not in plain.manifest
    assert "_trig1(" in (vtrig.path / f"{vtrig.symbol}_kernel.c").read_text()
    assert "_trig1(" not in (plain.path / f"{plain.symbol}_kernel.c").read_text()
    assert "sin(" in (libm.path / f"{libm.symbol}_kernel.c").read_text()
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        assert rel_err(vtrig(q, v, tau), libm(q, v, tau)) <= 1e-13
        assert rel_err(plain(q, v, tau), libm(q, v, tau)) <= 1e-13
    with pytest.raises(RbdgenError, match="scalar_trig sets the scalar kernel"):
        build(model, "aba", cache=kernel_cache, batch=4, scalar_trig="vector")
    with pytest.raises(RbdgenError, match="scalar_trig='fast': choose from hoisted, vector, libm"):
        build(model, "aba", cache=kernel_cache, scalar_trig="fast")


def test_talos_aba(kernel_cache):
    check_lanes(load_or_skip("talos"), "aba", 8, kernel_cache, k=16)


def test_vectorised_sin_cos_against_libm(kernel_cache):
    """The kernel's own sin and cos (gen.codegen.trig.routine) within TRIG_TOL of glibc's
    on |x| <= TRIG_LIMIT, including near multiples of pi/2; libm's value beyond, for inf
    and NaN."""
    lanes = 8
    x = ca.SX.sym("x", 1)
    f = ca.Function("f", [x], [ca.vertcat(ca.sin(x), ca.cos(x))])
    code = "#include <math.h>\n" + write_batched(f, "trigtest", lanes, "trigtest_kernel")
    files = {"trigtest.c": code.encode(), "trigtest.h": b"int trigtest_kernel(const double **arg, double **res);\n"}
    mod = compile_cached("_rbdgen_trigtest", files, "int trigtest_kernel(const double **arg, double **res);",
                         "trigtest.h", ["trigtest.c"], compile_flags(), cache=kernel_cache, what="compiling the trig test")
    ffi, lib = mod.ffi, mod.lib
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(-4, 4, 4000), rng.uniform(-200, 200, 4000),
                         rng.uniform(-TRIG_LIMIT, TRIG_LIMIT, 4000),
                         np.arange(-2000, 2000) * (math.pi / 2) + rng.uniform(-1e-9, 1e-9, 4000),
                         rng.uniform(-1e-6, 1e-6, 800), [0.0, -0.0, 1e-300, math.pi, -math.pi / 2],
                         [TRIG_LIMIT * 1.5, -3e7, 1e300, math.inf, -math.inf, math.nan, 2.0 ** 60]])
    xs = np.concatenate([xs, np.zeros((-len(xs)) % lanes)])
    sins, coss = np.empty_like(xs), np.empty_like(xs)
    for start in range(0, len(xs), lanes):
        inp = np.ascontiguousarray(xs[start:start + lanes])
        out = np.empty(2 * lanes)
        arg = ffi.new("const double *[1]", [ffi.cast("double *", inp.ctypes.data)])
        res = ffi.new("double *[1]", [ffi.cast("double *", out.ctypes.data)])
        lib.trigtest_kernel(arg, res)
        sins[start:start + lanes], coss[start:start + lanes] = out[:lanes], out[lanes:]
    finite = np.isfinite(xs)
    assert np.all(np.isnan(sins[~finite])) and np.all(np.isnan(coss[~finite]))
    ds = np.abs(sins[finite] - np.sin(xs[finite]))
    dc = np.abs(coss[finite] - np.cos(xs[finite]))
    assert ds.max() <= TRIG_TOL and dc.max() <= TRIG_TOL, f"sin {ds.max():.3g}, cos {dc.max():.3g}"


def test_sin_cos_polynomials_against_mpmath():
    """SIN_COEFFS and COS_COEFFS are what fit_coefficients derives, and in exact
    arithmetic (mpmath, 40 digits) r + r^3 P(r^2) and 1 - r^2/2 + r^4 Q(r^2) are within
    POLY_TOL of mpmath's sin and cos on [0, pi/4] (both are odd / even in r); Taylor's
    polynomials of the same degree are 1e-14 off at pi/4."""
    import mpmath
    assert fit_coefficients() == (SIN_COEFFS, COS_COEFFS)
    with mpmath.workdps(40):
        worst_s = worst_c = worst_taylor = mpmath.mpf(0)
        for i in range(801):
            r = mpmath.pi / 4 * i / 800
            z = r * r
            s = r + r ** 3 * sum(mpmath.mpf(c) * z ** j for j, c in enumerate(SIN_COEFFS))
            c = 1 - z / 2 + z ** 2 * sum(mpmath.mpf(c) * z ** j for j, c in enumerate(COS_COEFFS))
            t = sum((-1) ** j * r ** (2 * j + 1) / mpmath.factorial(2 * j + 1) for j in range(7))
            worst_s = max(worst_s, abs(s - mpmath.sin(r)))
            worst_c = max(worst_c, abs(c - mpmath.cos(r)))
            worst_taylor = max(worst_taylor, abs(t - mpmath.sin(r)))
    assert worst_s <= POLY_TOL and worst_c <= POLY_TOL, (float(worst_s), float(worst_c))
    assert worst_taylor > 100 * POLY_TOL


def test_layout_and_nonfinite_lane(kernel_cache):
    """Lanes innermost (element i of state l at [i*N + l]); a NaN in one lane's input
    voids that lane only (RBDGEN_ERR_NONFINITE_INPUT), the other lanes are computed."""
    model = load_or_skip("ur5")
    lanes = 4
    scalar = build(model, "rnea", cache=kernel_cache)
    k = build(model, "rnea", cache=kernel_cache, batch=lanes)
    man = k.manifest
    assert man["batch"] == lanes and man["functions"][0]["inputs"][0] == {"name": "q", "size": model.nq}
    header = k.header_path.read_text()
    assert f"#define {k.symbol.upper()}_BATCH {lanes}" in header and "lanes innermost" in header
    rng = np.random.default_rng(7)
    q, v, a = stacked_inputs(model, "rnea", lanes, rng)
    ins = [np.ascontiguousarray(x.T).reshape(-1) for x in (q, v, a)]
    ins[1][2 * lanes + 1] = math.nan                       # element 2 of v in lane 1
    out = np.empty(model.nv * lanes)
    assert k.call_raw(ins, [out]) == -1
    tau = out.reshape(model.nv, lanes)
    assert np.all(np.isnan(tau[:, 1]))
    for lane in (0, 2, 3):
        assert rel_err(tau[:, lane], scalar(q[lane], v[lane], a[lane])) <= LANE_TOL


def test_refusals(kernel_cache):
    model = gen.load_robot("chain:3")
    for bad in (1, 3, 32, "8"):
        with pytest.raises(RbdgenError, match="states per call"):
            build(model, "aba", cache=kernel_cache, batch=bad)
    solo = load_or_skip("solo12")
    with pytest.raises(RbdgenError, match="fixed number of iterations"):
        build(solo, "prox_ltl", FEET, cache=kernel_cache, batch=4, tol=1e-10, max_iter=20)
    with pytest.raises(RbdgenError, match="avoid_stack"):
        build(model, "aba", cache=kernel_cache, batch=4, avoid_stack=True)
    k = build(model, "aba", cache=kernel_cache, batch=4)
    with pytest.raises(RbdgenError, match=r"\(k, n\)"):
        k(np.zeros(3), np.zeros(3), np.zeros(3))


def test_cli_batch(tmp_path, capsys):
    assert cli_main(["build", "chain:3", "-a", "rnea", "--batch", "8", "--out", str(tmp_path / "k"),
                     "--format", "json", "--quiet"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["symbol"] == "rbd_chain3_rnea_b8" and row["batch"] == 8
    man = json.loads((tmp_path / "k" / "manifest.json").read_text())
    assert man["batch"] == 8 and "#pragma" not in (tmp_path / "k" / "rbd_chain3_rnea_b8_kernel.c").read_text()
