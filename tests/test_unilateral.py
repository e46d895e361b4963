"""Unilateral constraints and ``prox_lcp`` (gen/algorithms/prox_lcp.py, Tedrake 2012 §3.1):
the ``3D+`` / ``6D+`` spec flag; on random trees (anchored and loop constraints), solo12's
feet normals, a joint-limit-like row (a prismatic joint's own rate) and humanoid30, the
converged (ddq, lam) against an independent reference written here, a brute-force
enumeration of the complementary active sets of the mixed LCP (w_B = 0,
0 <= lam_U _|_ w_U >= 0, w = G lam + g) on dense NumPy matrices; the complementarity
residual max |min(lam_U, w_U)| (measured and reported); without unilateral rows the solver
is prox_ltl iterate by iterate; lam fed back into ABA reproduces ddq at every iterate;
SX trace = NumPy; the traced and the compiled early-exit driver = NumPy."""
import itertools

import numpy as np
import pytest
from conftest import SOLVERS, load_or_skip, rel_err
from random_trees import random_inertia, random_tree
from test_constrained import states
from test_constraints import loop_tree
from test_driver import loop_in_python

import gen
from gen import RbdgenError
from gen.algorithms.aba import aba
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.model import SE3, Body, Frame, Model
from gen.robots.synthetic import humanoid30
from gen.trace import trace, trace_driver

CONVERGED = dict(tol=1e-12, max_iter=500)
LCP_TOL = 1e-8            # ddq, lam vs the brute-force MLCP solution (relative), converged
COMPLEMENTARITY_TOL = 1e-9    # max |min(lam_U, w_U)| and max |w_B|, from the outputs (relative to max(1, |g|))
REPORTED_TOL = 1e-11      # reported residual vs the one measured from the outputs (relative to |a_c*|)
AGREE_TOL = 1e-9          # vs prox_ltl without unilateral rows, per iterate
FEEDBACK_TOL = 1e-9       # lam fed back into ABA vs ddq
SX_TOL = 1e-10            # SX trace / traced driver vs NumPy
C_TOL = 1e-10             # compiled early-exit driver vs NumPy

FEET = "3D+:FL_FOOT,3D+:FR_FOOT,3D+:HL_FOOT,3D+:HR_FOOT"
HUMANOID = "6D+:left_foot,6D:right_foot,3D+:left_hand,3D+:right_hand"


def slider(seed: int) -> Model:
    """A random tree on a prismatic joint along z from the world: the normal row of
    ``3D+:slider`` (a frame at the joint's origin) is that joint's own rate, a joint limit
    ``q_0 >= 0`` with Baumgarte gains."""
    tree = random_tree(6, seed, kinds=("revolute", "prismatic"))
    base = Body("slide", "slider_link", -1, "prismatic", np.array([0.0, 0.0, 1.0]), SE3.identity(),
                random_inertia(np.random.default_rng(seed)))
    bodies = [base] + [Body(b.name, b.link, b.parent + 1, b.kind, b.axis, b.placement, b.inertia)
                       for b in tree.bodies]
    frames = [Frame("slider", 0, SE3.identity(), "body")] + [Frame(f.name, f.body + 1, f.placement, f.kind)
                                                             for f in tree.frames]
    return Model(f"slider{seed}", bodies, frames, source="slider tree")


# (name, model factory, spec, Kp, Kd, torque scale)
CASES = [
    ("random-tree", lambda: random_tree(10, 6), "6D+:tip9,3D+:tip7,3D+:tip8,3D:tip5", 0.0, 0.0, 5.0),
    ("random-tree-loop", lambda: loop_tree(4), "3D+:tip9~tip8,3D+:tip5,6D:tip3", 3.0, 1.0, 5.0),
    ("solo12-feet", lambda: load_or_skip("solo12"), FEET, 0.0, 0.0, 3.0),
    ("joint-limit", lambda: slider(5), "3D+:slider,3D:tip4", 10.0, 2.0, 60.0),
    ("humanoid30", humanoid30, HUMANOID, 5.0, 1.0, 30.0),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, spec, Kp, Kd, scale = request.param
    model = make()
    return model, parse_constraints(model, spec, Kp=Kp, Kd=Kd), scale


def samples(model, cset, scale, seed, n=4):
    return [(q, v, scale * tau) for q, v, tau in states(model, seed, n=n, cset=cset)]


def dual(model, cset, q, v, tau):
    """Dense NumPy: M, b, J, a_c*, G = J M^-1 J^T, g = J M^-1 (tau - b) - a_c*."""
    M, b = gen.run(model, "crba", q), gen.run(model, "nle", q, v)
    ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    a_star = ev.a_star.ravel()
    return M, b, ev.J, a_star, ev.J @ np.linalg.solve(M, ev.J.T), ev.J @ np.linalg.solve(M, tau - b) - a_star


def brute_force_mlcp(G, g, U):
    """Every complementary active set: B always active, each unilateral row either active
    (w = 0, lam >= 0) or not (lam = 0, w >= 0); the equality system of each set solved in
    the least-squares sense (zero Jacobian rows), kept when consistent and feasible.
    Returns the solutions found."""
    m = len(g)
    B = [r for r in range(m) if r not in U]
    scale = max(1.0, np.max(np.abs(g)))
    found = []
    for k in range(len(U) + 1):
        for S in itertools.combinations(U, k):
            A = sorted(B + list(S))
            lam = np.zeros(m)
            if A:
                lam[A] = np.linalg.lstsq(G[np.ix_(A, A)], -g[A], rcond=1e-12)[0]
            w = G @ lam + g
            if (np.max(np.abs(w[A]), initial=0.0) < 1e-9 * scale and all(lam[r] >= -1e-12 * scale for r in S)
                    and all(w[r] >= -1e-9 * scale for r in U if r not in S)):
                found.append(lam)
    return found


def complementarity(G, g, lam, U):
    """max |min(lam_U, w_U)| and max |w_B| of a candidate lam."""
    w = G @ lam + g
    B = [r for r in range(len(g)) if r not in U]
    comp = np.max(np.abs(np.minimum(lam[U], w[U])), initial=0.0)
    return max(comp, np.max(np.abs(w[B]), initial=0.0))


def test_spec_flag_marks_the_normal_rows():
    model = humanoid30()
    cset = parse_constraints(model, " 6d+:left_foot,3D:left_hand, 3D+:left_hand~right_hand")
    assert [c.unilateral for c in cset.constraints] == [True, False, True]
    assert cset.spec == "6D+:left_foot,3D:left_hand,3D+:left_hand~right_hand"
    assert cset.unilateral_rows() == [2, 11] and cset.m == 12
    assert parse_constraints(model, cset.spec).unilateral_rows() == [2, 11], "the spec round-trips"
    with pytest.raises(RbdgenError, match=r"unknown type '4D\+'.*3D, 6D.*trailing \+"):
        parse_constraints(model, "4D+:left_foot")


def test_converged_solution_is_the_brute_force_mlcp_solution(case):
    model, cset, scale = case
    U = cset.unilateral_rows()
    active = set()
    for q, v, tau in samples(model, cset, scale, 61, n=8):
        M, b, J, a_star, G, g = dual(model, cset, q, v, tau)
        found = brute_force_mlcp(G, g, U)
        assert len(found) == 1, f"{cset}: {len(found)} complementary solutions (G should be positive definite)"
        lam_ref = found[0]
        ddq_ref = np.linalg.solve(M, tau - b + J.T @ lam_ref)
        ddq, lam, it, res = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, **CONVERGED)
        assert it < CONVERGED["max_iter"], f"{cset}: no convergence"
        assert rel_err(lam, lam_ref) < LCP_TOL, f"{cset}: lam vs brute-force MLCP"
        assert rel_err(ddq, ddq_ref) < LCP_TOL, f"{cset}: ddq vs brute-force MLCP"
        measured = complementarity(G, g, lam, U)
        assert measured < COMPLEMENTARITY_TOL * max(1.0, np.max(np.abs(g))), f"{cset}: complementarity {measured:.1e}"
        assert np.min(lam[U]) >= 0.0, "unilateral forces are non-negative"
        w = J @ ddq - a_star                            # from the outputs
        natural = max(np.max(np.abs(np.minimum(lam[U], w[U])), initial=0.0),
                      np.max(np.abs(np.delete(w, U)), initial=0.0))
        assert res <= CONVERGED["tol"], f"{cset}: reported residual {res:.1e}"
        assert abs(res - natural) < REPORTED_TOL * max(1.0, np.max(np.abs(a_star))), \
            f"{cset}: reported residual {res:.1e}, from the outputs {natural:.1e}"
        active.add(int(np.sum(lam_ref[U] > 0)))
    assert len(active) > 1, f"{cset}: the samples should exercise several active sets, got {active}"


def test_without_unilateral_rows_it_is_prox_ltl(case):
    model, cset, scale = case
    bilateral = parse_constraints(model, cset.spec.replace("+", ""), Kp=cset.Kp, Kd=cset.Kd)
    for q, v, tau in samples(model, cset, scale, 62, n=1):
        for iterations in (1, 3):
            a = gen.run(model, "prox_lcp", q, v, tau, constraints=bilateral, iterations=iterations)
            b = gen.run(model, "prox_ltl", q, v, tau, constraints=bilateral, iterations=iterations)
            for k, name in enumerate(("ddq", "lam", "iterations", "residual")):
                assert rel_err(a[k], b[k]) < AGREE_TOL, f"{name} after {iterations} iterations vs prox_ltl"


@pytest.mark.parametrize("iterations", [1, 2, 5])
def test_lambda_fed_back_into_aba_reproduces_ddq(case, iterations):
    model, cset, scale = case
    for q, v, tau in samples(model, cset, scale, 63, n=1):
        ddq, lam, it, _ = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, iterations=iterations)
        assert it == iterations
        assert np.min(lam[cset.unilateral_rows()]) >= 0.0, "every iterate is projected"
        ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
        fext = cset.body_forces(model, ev, lam.reshape(-1, 1), NUMPY)
        (back,) = aba(model, NUMPY.asarray(q), NUMPY.asarray(v), NUMPY.asarray(tau), be=NUMPY, fext=fext)
        assert rel_err(back, ddq) < FEEDBACK_TOL, f"{cset}: ABA(tau, fext = K^T lam) != ddq"


def test_sx_trace_equals_numpy(case):
    model, cset, scale = case
    tr = trace(model, "prox_lcp", cset, iterations=4)
    f = tr.function()
    for q, v, tau in samples(model, cset, scale, 64, n=2):
        ref = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, iterations=4)
        for (name, _), got, want in zip(tr.outputs, f(q, v, tau), ref):
            assert rel_err(np.array(got).ravel(), want) < SX_TOL, f"{cset}: SX vs NumPy {name}"


def test_traced_early_exit_driver_equals_numpy(case):
    model, cset, scale = case
    dt = trace_driver(model, "prox_lcp", cset, tol=1e-10, max_iter=100)
    for q, v, tau in samples(model, cset, scale, 65, n=2):
        ddq, lam, k, res = loop_in_python(dt, q, v, tau)
        ref = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, tol=1e-10, max_iter=100)
        assert k == ref[2] and res <= 1e-10, f"{cset}: {k} iterations, NumPy {ref[2]:.0f}"
        assert rel_err(ddq, ref[0]) < SX_TOL and rel_err(lam, ref[1]) < SX_TOL, f"{cset}: traced driver vs NumPy"


def test_compiled_early_exit_driver_equals_numpy(tmp_path):
    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    opts = dict(tol=1e-10, max_iter=100)
    kernel = gen.build(model, "prox_lcp", FEET, out_dir=tmp_path / "lcp", cache=tmp_path / "cache", **opts)
    assert kernel.manifest["constraints"] == FEET and kernel.manifest["tolerance"] == 1e-10
    for q, v, tau in samples(model, cset, 3.0, 66, n=3):
        got = kernel(q, v, tau)
        ref = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, **opts)
        assert got[2] == ref[2], "iteration count, C vs NumPy"
        for k, name in enumerate(("ddq", "lam", "iterations", "residual")):
            assert rel_err(got[k], ref[k]) < C_TOL, f"solo12: compiled driver vs NumPy {name}"


@pytest.mark.parametrize("alg", [*SOLVERS, "impulse"])
def test_bilateral_solvers_refuse_one_sided_rows(alg):
    model = humanoid30()
    n = model.nv
    inputs = (model.random_q(np.random.default_rng(0)), np.zeros(n)) + (() if alg == "impulse" else (np.zeros(n),))
    with pytest.raises(RbdgenError, match=f"{alg} solves bilateral constraints only; 3D\\+:left_foot.*prox_lcp"):
        gen.run(model, alg, *inputs, constraints="3D+:left_foot,6D:right_foot")
