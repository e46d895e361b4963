"""The early-exit C driver of the four proximal solvers (gen.trace.trace_driver, gen/emit.py,
templates/wrapper.c.j2; docs/DESIGN.md §3.3): the compiled driver equals the NumPy run with the
same tolerance, iteration count included (§6c); it stops at the residual test or at
max_iter; non-finite input gives -1; the traced setup, step and finish looped in Python
equal NumPy and compose to the fixed-K kernel (§6b); a step costs one unrolled iteration
(loop-invariant work is in setup); manifest, header, standalone Makefile build.

mu: as in tests/test_constrained.py, the dual solvers at 1e-6, the augmented-Lagrangian
ones at 1e-4.  Their compiled-vs-NumPy gap is the fixed-K kernel's too: at mu = 1e-4
prox_ltls reaches ~2e-10 on solo12 whatever the compiler flags (eps / (mu lambda_min(M)),
gen/algorithms/proximal.py "Accuracy"), hence ALM_TOL."""
import json

import numpy as np
import pytest
from conftest import SOLVERS, load_or_skip, rel_err
from test_constrained import states
from test_emit import needs_cc, standalone_program

import gen
from gen import RbdgenError
from gen.constraint_spec import parse_constraints
from gen.constraints import ConstraintSet
from gen.emit import emit
from gen.trace import trace, trace_driver


def ptr(k, a):
    """A ``double *`` of kernel ``k``'s cffi to the contiguous float64 array ``a``."""
    return k.ffi.from_buffer("double[]", a)


DUAL = {"prox_ltl", "prox_pv"}
MU = {a: (1e-6 if a in DUAL else 1e-4) for a in SOLVERS}
SOLO = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SETS = [("solo12", SOLO, SOLVERS), ("ur5", "6D:tool0", SOLVERS),
        ("fourbar", "3D:tip~anchor", ["prox_ltl", "prox_ltls"])]          # a loop: not for cABA/PV
CASES = [(r, s, a) for r, s, algs in SETS for a in algs]
TOL, MAX_ITER = 1e-10, 50

DUAL_TOL = 1e-12         # ddq, lam: compiled driver vs NumPy (relative)
ALM_TOL = 1e-9           # the same for prox_ltls / constrained_aba at mu = 1e-4 (see above)
RES_TOL = 1e-12          # residual: compiled vs NumPy (absolute; both ~TOL)
SX_TOL = 1e-10           # traced setup/step/finish evaluated by CasADi vs NumPy (relative)


def c_tol(alg):
    return DUAL_TOL if alg in DUAL else ALM_TOL


def res_tol(alg):
    """The residual, compiled vs NumPy: RES_TOL, or for the augmented-Lagrangian rows,
    whose residual includes the relative dynamics residual (computed from ddq and lam,
    which agree to ALM_TOL), ALM_TOL."""
    return RES_TOL if alg in DUAL else ALM_TOL


def driver(robot, spec, alg, kernel_cache, **options):
    model = load_or_skip(robot)
    opts = {"tol": TOL, "max_iter": MAX_ITER, "mu": MU[alg]} | options
    return gen.build(model, alg, spec, cache=kernel_cache, **opts), model, parse_constraints(model, spec), opts


def _straddles(model, alg, cset, opts, x, m):
    """Whether the iteration counts of C and NumPy may differ by rounding: by one, where
    NumPy's residual after the first ``m`` iterations is within :func:`res_tol` of TOL (the
    augmented-Lagrangian rows' residuals agree to ALM_TOL only, more than TOL itself)."""
    if alg in DUAL:
        return False
    r = gen.run(model, alg, *x, constraints=cset, **(opts | {"tol": 0.0, "max_iter": m}))[3]
    return abs(r - TOL) < res_tol(alg)


# --- compiled driver == NumPy -------------------------------------------------------------------

@pytest.mark.parametrize("robot, spec, alg", CASES, ids=[f"{r}-{a}" for r, _, a in CASES])
def test_compiled_driver_equals_numpy(robot, spec, alg, kernel_cache):
    k, model, cset, opts = driver(robot, spec, alg, kernel_cache)
    assert k.manifest["tolerance"] == TOL and k.manifest["max_iter"] == MAX_ITER and k.manifest["iterations"] is None
    for q, v, tau in states(model, 51, n=3, cset=cset):
        ddq, lam, it, res = k(q, v, tau)
        ref = gen.run(model, alg, q, v, tau, constraints=cset, **opts)
        by_rounding = abs(it - ref[2]) == 1 and _straddles(model, alg, cset, opts, (q, v, tau), min(it, ref[2]))
        assert it == ref[2] or by_rounding, f"{alg} {robot}: {it} iterations in C, {ref[2]} in NumPy"
        assert 1 <= it < MAX_ITER, f"{alg} {robot}: no convergence in {MAX_ITER} iterations"
        assert res <= TOL, f"{alg} {robot}: converged with residual {res:.2e} > tol"
        assert abs(res - ref[3]) < res_tol(alg), f"{alg} {robot}: residual {res:.3e} vs NumPy {ref[3]:.3e}"
        assert rel_err(ddq, ref[0]) < c_tol(alg), f"{alg} {robot}: ddq, driver vs NumPy"
        assert rel_err(lam, ref[1]) < c_tol(alg), f"{alg} {robot}: lam, driver vs NumPy"


@pytest.mark.parametrize("alg", SOLVERS)
def test_unreachable_tolerance_runs_max_iter(alg, kernel_cache):
    """tol = 0: the driver stops at max_iter (here the papers' 3; later a dual iterate can
    reach an exact fixed point, residual 0), with the iterate of the fixed-K run."""
    k, model, cset, opts = driver("solo12", SOLO, alg, kernel_cache, tol=0.0, max_iter=3)
    (q, v, tau), = states(model, 52, n=1, cset=cset)
    ddq, lam, it, res = k(q, v, tau)
    fixed = gen.run(model, alg, q, v, tau, constraints=cset, mu=MU[alg], iterations=3)
    assert it == 3 and fixed[2] == 3 and res > 0
    assert gen.run(model, alg, q, v, tau, constraints=cset, **opts)[2] == 3
    assert rel_err(ddq, fixed[0]) < c_tol(alg) and rel_err(lam, fixed[1]) < c_tol(alg), f"{alg}: 3 steps vs fixed K=3"
    assert abs(res - fixed[3]) < res_tol(alg)


#: tol of the refinement test: the rounding floor of proxLTL's true residual on solo12,
#: where its dual-difference test can pass while |J ddq - a_c*| is still above tol
FINE_TOL = 1e-13
#: a test value this close to tol is not classified (its reconstruction from lam is
#: accurate to ~rho eps |lam|, ~1e-21 here)
AMBIGUOUS = 1e-18


def test_driver_iterates_while_the_true_residual_falls(kernel_cache):
    """proxLTL tests the dual difference rho |lam_{k-1} - lam_k|, which can pass while the
    true residual |J ddq - a_c*| is above tol (issue 32 §7: the driver returned -4 after 3
    of 50 steps).  The driver now finishes each iterate whose test passes and stops when
    its true residual is <= tol, at max_iter, or when it did not fall below the previous
    finished iterate's.  Checked against that rule replayed from the driver's own iterates:
    iterate j and its residual are what a call with max_iter = j returns (the same C, the
    same arithmetic), its test value is rho |lam_{j-1} - lam_j|_inf (lam_0 = 0)."""
    mu, cap = 1e-6, 50
    k, model, cset, _ = driver("solo12", SOLO, "prox_ltl", kernel_cache, tol=FINE_TOL, max_iter=cap, mu=mu)
    opts = getattr(k.lib, f"{k.symbol}_opts")
    n_iter = k.ffi.new("int *")

    def call(q, v, tau, max_iter):
        outs = [np.empty(o["size"]) for o in k.function["outputs"]]
        work = np.empty(max(1, k.work_size))
        rc = opts(*[ptr(k, np.ascontiguousarray(a)) for a in (q, v, tau)], *[ptr(k, o) for o in outs],
                  ptr(k, work), FINE_TOL, max_iter, n_iter)
        return rc, outs

    continued = 0
    for q, v, tau in states(model, 51, n=6, cset=cset):
        rc, (ddq, lam, it, res) = call(q, v, tau, cap)
        got = int(it[0])
        assert rc == (0 if res[0] <= FINE_TOL else -4) and 1 <= got <= cap == k.manifest["max_iter"]
        # the rule, replayed: (lam_j, r_j) of iterate j from a call stopped at j
        lams, last, want = [np.zeros(cset.m)], None, None
        for j in range(1, got + 1):
            rc_j, (_, lam_j, it_j, res_j) = call(q, v, tau, j)
            assert int(it_j[0]) == j, f"a call capped at {j} stopped at {int(it_j[0])}: the rule stopped earlier"
            test = mu * np.max(np.abs(lams[-1] - lam_j))
            lams.append(lam_j)
            assert abs(test - FINE_TOL) > AMBIGUOUS, "a test value at tol: not classified"
            if test <= FINE_TOL or j == cap:
                r = res_j[0]
                if r <= FINE_TOL or j == cap or (last is not None and not r < last):
                    want = j
                    break
                continued += last is None            # the test passed, the residual was still above tol
                last = r
        assert got == want, f"stopped at {got}, the rule says {want}"
        assert rel_err(lam, lams[-1]) == 0 and rel_err(ddq, call(q, v, tau, got)[1][0]) == 0
    assert continued, "no state had a passing test with a residual above tol: the case is not exercised"


def test_nonfinite_input_returns_error_code(kernel_cache):
    k, model, cset, _ = driver("ur5", "6D:tool0", "prox_ltl", kernel_cache)
    (q, v, tau), = states(model, 53, n=1, cset=cset)
    outs = [np.zeros(o["size"]) for o in k.function["outputs"]]
    assert k.call_raw([q, v, tau], outs) == 0 and outs[2][0] >= 1
    tau[2] = np.nan
    assert k.call_raw([q, v, tau], outs) == -1
    assert all(np.all(np.isnan(o)) for o in outs), "outputs must be NaN after a rejected input"


# --- the traced functions ------------------------------------------------------------------------

TRACE_SETS = [("humanoid30", "6D:left_foot,6D:right_foot,3D:left_hand,3D:right_hand"),
              ("humanoid30", "6D:left_foot,3D:left_hand~right_hand"), ("fourbar", "3D:tip~anchor")]


def loop_in_python(dt, q, v, tau, steps=None):
    """The C driver's loop over the traced functions, evaluated by CasADi."""
    setup, step, finish = (getattr(dt, n).function() for n in ("setup", "step", "finish"))
    c, s = setup(q, v, tau)
    k = 0
    while True:
        nxt, res = step(c, s)
        k += 1
        if (steps is None and float(res) <= dt.tol) or k >= (steps or dt.max_iter):
            break
        s = nxt
    ddq, lam, res = finish(c, s)          # res: the true residual of the returned ddq
    return np.array(ddq).ravel(), np.array(lam).ravel(), k, float(res)


@pytest.mark.parametrize("robot, spec", TRACE_SETS)
@pytest.mark.parametrize("alg", SOLVERS)
def test_traced_driver_equals_numpy_and_the_fixed_kernel(robot, spec, alg):
    model = gen.load_robot(robot)
    cset = parse_constraints(model, spec, Kd=1.0)
    dt = trace_driver(model, alg, cset, tol=TOL, max_iter=MAX_ITER, mu=MU[alg])
    fixed = trace(model, alg, cset, iterations=3, mu=MU[alg]).function()
    for q, v, tau in states(model, 54, n=2, cset=cset):
        ddq, lam, k, res = loop_in_python(dt, q, v, tau)
        ref = gen.run(model, alg, q, v, tau, constraints=cset, tol=TOL, max_iter=MAX_ITER, mu=MU[alg])
        assert k == ref[2] and res <= TOL, f"{alg} {spec}: {k} iterations, NumPy {ref[2]}"
        assert rel_err(ddq, ref[0]) < SX_TOL and rel_err(lam, ref[1]) < SX_TOL, f"{alg} {spec}: traced driver vs NumPy"
        ddq3, lam3, _, res3 = loop_in_python(dt, q, v, tau, steps=3)
        want = [np.array(x).ravel() for x in fixed(q, v, tau)]
        assert rel_err(ddq3, want[0]) < SX_TOL and rel_err(lam3, want[1]) < SX_TOL, f"{alg}: 3 steps vs fixed K=3"
        assert abs(res3 - want[3][0]) < RES_TOL


@pytest.mark.parametrize("alg", SOLVERS)
def test_a_step_costs_one_unrolled_iteration(alg):
    """What does not depend on the loop state is computed once, in setup: a step costs the
    marginal cost of one more iteration of the fixed-K kernel, plus what the driver needs
    every iteration and the unrolled graph does not: the residual vector and its norm
    (5 m - 1 operations) and the loop state itself (e.g. proxLTL's ``lam_k = -x``, whose
    negation the unrolled graph folds into the next iteration's constants): at most 7 m;
    prox_ltls iterates in correction form with tol (the fixed-K graph in plain form): its
    step also forms the dynamics residual ``M ddq`` and ``J^T lam`` (2 nnz(M) + 2 nnz(J))
    and tests it relative to the equation's terms (at most 7 nv).
    (Without the hoisting a proxLTL step costs twice the marginal iteration.)"""
    import opcount
    model = gen.load_robot("humanoid30")
    cset = parse_constraints(model, TRACE_SETS[0][1])
    dt = trace_driver(model, alg, cset, tol=TOL, max_iter=MAX_ITER)
    step = opcount.count_trace(dt.step)["total"]["total"]
    marginal = (gen.opcount(model, alg, constraints=cset, iterations=3)["total"]
                - gen.opcount(model, alg, constraints=cset, iterations=2)["total"])
    extra = 7 * cset.m
    if alg == "prox_ltls":
        q = model.random_q(np.random.default_rng(0))
        M, J = gen.run(model, "crba", q), cset.jacobian(model, q.reshape(-1, 1), be=gen.backend.NUMPY)
        extra += 2 * np.count_nonzero(M) + 2 * np.count_nonzero(J) + 7 * model.nv
    assert step <= marginal + extra, f"{alg}: step {step} ops, one more unrolled iteration {marginal}"
    assert dt.state_size <= cset.m + 6 * model.nbodies, f"{alg}: loop state of {dt.state_size} doubles"


def test_driver_user_errors():
    model = gen.load_robot("fourbar")
    with pytest.raises(RbdgenError, match="aba has no option tol"):
        gen.build(model, "aba", tol=1e-3)
    with pytest.raises(RbdgenError, match="does not iterate"):
        trace_driver(model, "prox_ltl", ConstraintSet(model, []), tol=1e-3)
    with pytest.raises(RbdgenError, match="finite tolerance"):
        trace_driver(model, "prox_ltl", "3D:tip~anchor", tol=float("inf"))
    with pytest.raises(RbdgenError, match="tol=-1"):
        trace_driver(model, "prox_ltl", "3D:tip~anchor", tol=-1.0)


# --- the build folder ----------------------------------------------------------------------------

def test_manifest_header_and_abi(tmp_path):
    import opcount
    spec = "6D:tool0"
    bf = emit("ur5", "prox_pv", spec, out_dir=tmp_path / "driver", tol=TOL, max_iter=MAX_ITER)
    fixed = emit("ur5", "prox_pv", spec, out_dir=tmp_path / "fixed", iterations=3)
    man = json.loads((bf.path / "manifest.json").read_text())
    assert man == bf.manifest
    assert (man["iterations"], man["tolerance"], man["max_iter"]) == (None, TOL, MAX_ITER)
    (f,), (g,) = man["functions"], fixed.manifest["functions"]
    for key in ("inputs", "outputs"):
        assert f[key] == g[key], f"driver and fixed-K kernel differ in {key}"
    assert f["symbol"].startswith(g["symbol"] + "_v"), "a driver's symbol names its variant (tol, max_iter)"
    oc = f["opcount"]
    dt = trace_driver(gen.load_robot("ur5"), "prox_pv", parse_constraints(gen.load_robot("ur5"), spec),
                      tol=TOL, max_iter=MAX_ITER)
    for part in ("setup", "step", "finish"):
        assert oc[part]["total"] == opcount.count_trace(getattr(dt, part))["total"]["total"] > 0
    assert oc["total"] == oc["setup"]["total"] + MAX_ITER * oc["step"]["total"] + oc["finish"]["total"]
    assert f["work_size"] >= dt.const_size + 2 * dt.state_size
    h = bf.files[man["header"]]
    sym = f["symbol"].upper()
    assert f"#define {sym}_TOL 1e-10" in h and f"#define {sym}_MAX_ITER 50" in h
    for part in ("setup", "step", "finish"):
        assert f"{f['symbol']}_{part} (" in h, f"header lacks the op counts of {part}"
    decl = [[ln for ln in x.cdef.splitlines() if ln.startswith("int ")] for x in (bf, fixed)]
    assert decl[0][0].replace(f["symbol"], g["symbol"]) == decl[1][0], \
        "driver and fixed-K kernel differ in their C declaration (other than the name)"
    assert len(decl[1]) == 1 and decl[0][1].startswith(f"int {f['symbol']}_opts(") \
        and decl[0][1].endswith("double *work, double tol, int max_iter, int *n_iter);"), "the run-time-options entry"
    code = bf.files[f"{f['symbol']}_kernel.c"]
    assert all(f"void {f['symbol']}_{p}(" in code for p in ("setup", "step", "finish"))


@needs_cc
def test_standalone_program_built_with_the_makefile(tmp_path):
    model = gen.load_robot("ur5")
    cset = parse_constraints(model, "6D:tool0")
    bf = emit(model, "prox_ltl", cset, out_dir=tmp_path / "kernel", tol=TOL, max_iter=MAX_ITER)
    (q, v, tau), = states(model, 55, n=1, cset=cset)
    got = standalone_program(bf, [q, v, tau], tmp_path)
    ref = gen.run(model, "prox_ltl", q, v, tau, constraints=cset, tol=TOL, max_iter=MAX_ITER)
    assert got["iterations"] == [ref[2]]
    assert rel_err(got["ddq"], ref[0]) < DUAL_TOL and rel_err(got["lam"], ref[1]) < DUAL_TOL
    assert got["residual"][0] <= TOL



CANARY, N_CANARY = -7.25e301, 16


@pytest.mark.parametrize("avoid_stack", [False, True])
def test_workspace_size_is_honoured(avoid_stack, kernel_cache, tmp_path):
    """const, both loop states (and CasADi's work with avoid_stack) fit in work_size: a
    buffer exactly that long between canaries, outputs between canaries."""
    model = gen.load_robot("humanoid30")
    spec = TRACE_SETS[0][1]
    k = gen.build(model, "constrained_aba", spec, cache=kernel_cache, avoid_stack=avoid_stack, out_dir=tmp_path / "k",
                  tol=TOL, max_iter=MAX_ITER, mu=MU["constrained_aba"])
    ws = k.work_size
    buf = np.full(ws + 2 * N_CANARY, CANARY)
    outbufs = [np.full(o["size"] + 2 * N_CANARY, CANARY) for o in k.function["outputs"]]
    outs = [b[N_CANARY:N_CANARY + o["size"]] for b, o in zip(outbufs, k.function["outputs"])]
    (q, v, tau), = states(model, 56, n=1, cset=parse_constraints(model, spec))
    assert k.call_raw([q, v, tau], outs, work=buf[N_CANARY:N_CANARY + ws]) == 0
    for b, name in [(buf, "work")] + [(b, o["name"]) for b, o in zip(outbufs, k.function["outputs"])]:
        assert np.all(b[:N_CANARY] == CANARY) and np.all(b[-N_CANARY:] == CANARY), f"{name} canaries overwritten"
    ref = gen.run(model, "constrained_aba", q, v, tau, constraints=spec, tol=TOL, max_iter=MAX_ITER,
                  mu=MU["constrained_aba"])
    assert outs[2][0] == ref[2] and rel_err(outs[0], ref[0]) < ALM_TOL and rel_err(outs[1], ref[1]) < ALM_TOL


def test_emitting_a_driver_twice_gives_identical_bytes(tmp_path):
    a = emit("fourbar", "prox_ltls", "3D:tip~anchor", out_dir=tmp_path / "a", tol=TOL, max_iter=MAX_ITER)
    b = emit("fourbar", "prox_ltls", "3D:tip~anchor", out_dir=tmp_path / "b", tol=TOL, max_iter=MAX_ITER)
    assert a.files == b.files


def test_driver_passes_a_solver_own_option_and_names_unknown_ones():
    """``restitution`` is the impact map's own option: the early-exit driver traces setup
    with it; an option no solver takes is a one-line user error."""
    import gen
    from gen import RbdgenError

    model = gen.load_robot("solo12")
    spec = "3D:FL_FOOT,3D:FR_FOOT"
    k = gen.build(model, "impulse", spec, tol=1e-10, max_iter=20, restitution=0.5, mu=1e-4)
    rng = np.random.default_rng(4)
    q, v = model.random_q(rng), rng.normal(size=model.nv)
    got = k(q, v)
    ref = gen.run(model, "impulse", q, v, constraints=spec, tol=1e-10, max_iter=20, restitution=0.5, mu=1e-4)
    assert np.ravel(got[2])[0] == np.ravel(ref[2])[0]
    scale = max(1.0, np.max(np.abs(ref[0])))
    assert np.max(np.abs(got[0].ravel() - np.ravel(ref[0]))) / scale < 1e-8
    with pytest.raises(RbdgenError, match="prox_ltl has no option foo"):
        gen.run(model, "prox_ltl", q, v, v, constraints=spec, foo=1)
