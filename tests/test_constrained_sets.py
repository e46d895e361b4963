"""The four proximal constrained-dynamics solvers on every named constraint set of issue 5
that tests/test_constrained.py does not already cover (panda 3D/6D on panda_hand_tcp,
solo12 3D on two feet, anymal_c and go1 3D on four feet, talos 6D on both soles and both
arm_*_7_link, icub 6D on both soles), with that file's approach and tolerances:
ddq and lam against Pinocchio's constraintDynamics (converged, same mu), the constraint
residual, the four solvers against each other, with no constraints = ABA, lam fed back as
external forces into ABA reproduces ddq.

Carpentier 2021 §V-F's redundant set (talos, 6D on both soles and on the left hand
``arm_left_7_link``, each duplicated: m = 36): every proximal solver returns finite
accelerations that solve the constraints in the least-squares sense (here exactly: the
duplicates are consistent) and the minimum-norm forces, while the mu = 0 KKT system is
singular (rank-deficient by 18) and a plain solve of it fails.  (talos with both soles
duplicated, m = 24, is in tests/test_constrained.py.)"""
import numpy as np
import pytest
from conftest import needs_pin, rel_err
from test_constrained import (
    ABA_TOL,
    AGREE_DEFAULT_TOL,
    AGREE_TOL,
    CONVERGED,
    FEEDBACK_TOL,
    MU,
    PIN_TOL,
    RESIDUAL_TOL,
    SOLVERS,
    dense_kkt,
    evaluate,
    solve,
    states,
)
from test_constraints import named, pin_constraint_dynamics

import gen
from gen.algorithms.aba import aba
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.constraints import ConstraintSet

SETS = [("panda", "3D:panda_hand_tcp"),
        ("panda", "6D:panda_hand_tcp"),
        ("solo12", "3D:FL_FOOT,3D:HR_FOOT"),
        ("anymal_c", "3D:LF_FOOT,3D:RF_FOOT,3D:LH_FOOT,3D:RH_FOOT"),
        ("go1", "3D:FL_foot,3D:FR_foot,3D:RL_foot,3D:RR_foot"),
        ("talos", "6D:left_sole_link,6D:right_sole_link,6D:arm_left_7_link,6D:arm_right_7_link"),
        ("icub", "6D:l_sole,6D:r_sole")]
IDS = [f"{r}-{s.split(',')[0]}-x{s.count(',') + 1}" for r, s in SETS]

FEET_AND_HAND = "6D:left_sole_link,6D:right_sole_link,6D:arm_left_7_link"
M36 = FEET_AND_HAND + "," + FEET_AND_HAND            # Carpentier 2021 §V-F
RANK_GAP = 1e-12        # sigma_min / sigma_max of a numerically singular KKT matrix
LSQ_TOL = 1e-9          # ddq of the redundant set vs the well-posed single set (relative)
MIN_NORM_TOL = 1e-7     # lam of the redundant set vs half the single set's force (relative)
# Converged on the redundant set: the primal residual's rounding floor there is ~1e-13
# (prox_ltl), so tol = 1e-13 would run to the cap while the null-space part of lam (not
# damped by the iteration) random-walks by rounding (1.4e-7 after 200 steps); 1e-12 is met.
REDUNDANT_CONVERGED = dict(tol=1e-12, max_iter=200)
# The augmented-Lagrangian solvers round at ~eps / (mu x the smallest constrained-space
# inertia) (gen/algorithms/proximal.py "Accuracy"): on icub's light legs at mu = 1e-4 that
# reaches 1.3e-7 relative on some states (1.6e-9 at 1e-2, 1.4e-11 at 1e-1), so its comparisons
# run at mu = 1e-1 (same mu on both sides; the converged solution does not
# depend on mu)
ALM_MU = {"icub": 1e-1}


def mu_for(model, alg):
    return ALM_MU.get(model.name, MU[alg]) if alg in ("prox_ltls", "constrained_aba") else MU[alg]


@pytest.fixture(scope="module", params=SETS, ids=IDS)
def named_set(request):
    robot, spec = request.param
    model, pm = named(robot)
    cset = parse_constraints(model, spec)
    return model, pm, cset, states(model, 51, n=3, cset=cset) + states(model, 3, n=2, cset=cset)


# --- references ------------------------------------------------------------------------

@needs_pin
def test_solvers_match_pinocchio_and_solve_the_constraints(named_set):
    model, pm, cset, sts = named_set
    for q, v, tau in sts:
        for alg in SOLVERS:
            ddq, lam, J, a_star = pin_constraint_dynamics(pm, cset, q, v, tau, mu=mu_for(model, alg))
            got = solve(model, alg, q, v, tau, cset, mu=mu_for(model, alg), **CONVERGED)
            assert rel_err(got[0], ddq) < PIN_TOL, f"{alg} {model.name} {cset}: ddq vs Pinocchio"
            assert rel_err(got[1], lam) < PIN_TOL, f"{alg} {model.name} {cset}: lam vs Pinocchio"
            r = np.max(np.abs(J @ got[0] - a_star))
            assert r < RESIDUAL_TOL, f"{alg} {model.name}: |J ddq - a_c*| = {r:.1e} (Pinocchio's J, a_c*)"
            assert abs(got[3] - r) < RESIDUAL_TOL, f"{alg} {model.name}: reported residual {got[3]:.1e}"


# --- identities ------------------------------------------------------------------------

def test_the_four_solvers_agree(named_set):
    """Iterate by iterate at equal mu (1 and 3 iterations), and converged at the default mu."""
    model, _, cset, sts = named_set
    q, v, tau = sts[0]
    for iterations in (1, 3):
        outs = {a: solve(model, a, q, v, tau, cset, mu=1e-4, iterations=iterations) for a in SOLVERS}
        for a, out in outs.items():
            for k, name in ((0, "ddq"), (1, "lam")):
                assert rel_err(out[k], outs["prox_ltl"][k]) < AGREE_TOL, \
                    f"{a} vs prox_ltl on {model.name}: {name} after {iterations} iterations"
    outs = {a: gen.run(model, a, q, v, tau, constraints=cset, **CONVERGED) for a in SOLVERS}
    for a, out in outs.items():
        for k, name in ((0, "ddq"), (1, "lam")):
            assert rel_err(out[k], outs["prox_ltl"][k]) < AGREE_DEFAULT_TOL, f"{a} on {model.name}: {name} at mu = 1e-6"


def test_lambda_fed_back_into_aba_reproduces_ddq(named_set):
    """M ddq_k + b = tau + J^T lam_k at every iterate (here the second), for each solver."""
    model, _, cset, sts = named_set
    for q, v, tau in sts:
        fext_of = (lambda lam: cset.body_forces(model, evaluate(model, cset, q, v), lam.reshape(-1, 1), NUMPY))
        for alg in SOLVERS:
            ddq, lam, _, _ = solve(model, alg, q, v, tau, cset, mu=mu_for(model, alg), iterations=2)
            (back,) = aba(model, NUMPY.asarray(q), NUMPY.asarray(v), NUMPY.asarray(tau), be=NUMPY, fext=fext_of(lam))
            assert rel_err(back, ddq) < FEEDBACK_TOL, f"{alg} {model.name} {cset}: ABA(tau, fext = K^T lam) != ddq"


def test_with_no_constraints_each_solver_is_aba(named_set):
    model, _, _, sts = named_set
    q, v, tau = sts[0]
    ref = gen.run(model, "aba", q, v, tau)
    for alg in SOLVERS:
        ddq, lam, it, res = gen.run(model, alg, q, v, tau, constraints=ConstraintSet(model, []))
        assert rel_err(ddq, ref) < ABA_TOL, f"{alg} on {model.name}: no constraints != ABA"
        assert lam.shape == (0,) and it == 0 and res == 0


# --- Carpentier 2021 §V-F: six 6D constraints, each of three duplicated (m = 36) -----------

@pytest.fixture(scope="module")
def m36():
    model, pm = named("talos")
    cset, single = parse_constraints(model, M36), parse_constraints(model, FEET_AND_HAND)
    assert (cset.m, single.m) == (36, 18)
    return model, pm, cset, single, states(model, 52, n=2, cset=single)


def test_m36_kkt_at_mu_zero_is_singular_and_a_plain_solve_fails(m36):
    model, pm, cset, single, sts = m36
    for q, v, tau in sts:
        _, _, K0 = dense_kkt(model, cset, q, v, tau)
        s = np.linalg.svd(K0, compute_uv=False)
        assert s[-1] / s[0] < RANK_GAP, f"sigma_min / sigma_max = {s[-1] / s[0]:.1e}: KKT should be singular"
        assert np.sum(s < RANK_GAP * s[0]) == cset.m - single.m, "one null direction per duplicated row"
        b = gen.run(model, "nle", q, v)
        rhs = np.concatenate([tau - b, evaluate(model, cset, q, v).a_star.ravel()])
        try:
            x = np.linalg.solve(K0, rhs)
        except np.linalg.LinAlgError:
            x = None
        assert x is None or not np.all(np.isfinite(x)) or np.max(np.abs(K0 @ x - rhs)) > 1e-6, \
            "a plain LU solve of the singular KKT system should fail"
        if pm is not None:                       # Pinocchio's KKT factorisation at mu = 0
            ddq0 = pin_constraint_dynamics(pm, cset, q, v, tau, mu=0.0, max_iter=1)[0]
            ddq_single = dense_kkt(model, single, q, v, tau)[0]
            assert not np.all(np.isfinite(ddq0)) or rel_err(ddq0, ddq_single) > 1e-3, \
                "Pinocchio's constraintDynamics at mu = 0 should fail on the redundant set"


@pytest.mark.parametrize("alg", SOLVERS)
def test_m36_every_solver_returns_the_least_squares_solution(m36, alg):
    """After 10 iterations and converged: finite; ddq the (unique) least-squares solution,
    i.e. that of the well-posed single set; lam the minimum-norm forces (each duplicate
    half of the single set's force); the same ddq as a dense least-squares KKT solve."""
    model, _, cset, single, sts = m36
    for q, v, tau in sts:
        ddq1, lam1, _ = dense_kkt(model, single, q, v, tau)
        ddq_ls = dense_kkt(model, cset, q, v, tau)[0]
        ev = evaluate(model, cset, q, v)
        for options in (dict(iterations=10), REDUNDANT_CONVERGED):
            ddq, lam, it, res = solve(model, alg, q, v, tau, cset, **options)
            assert np.all(np.isfinite(ddq)) and np.all(np.isfinite(lam)), f"{alg} {options}: non-finite"
            assert it <= 20, f"{alg} {options}: {it} iterations"
            r = np.max(np.abs(ev.J @ ddq - ev.a_star.ravel()))
            assert r < RESIDUAL_TOL and res < RESIDUAL_TOL, f"{alg} {options}: least-squares residual {r:.1e}"
            assert rel_err(ddq, ddq1) < LSQ_TOL, f"{alg} {options}: ddq vs the single set's KKT solve"
            assert rel_err(ddq, ddq_ls) < LSQ_TOL, f"{alg} {options}: ddq vs a dense least-squares KKT solve"
            half = np.concatenate([lam1, lam1]) / 2
            assert rel_err(lam, half) < MIN_NORM_TOL, f"{alg} {options}: lam vs the minimum-norm split"


@needs_pin
def test_m36_matches_pinocchio_at_the_same_mu(m36):
    model, pm, cset, _, sts = m36
    for q, v, tau in sts:
        for alg in SOLVERS:
            ddq = pin_constraint_dynamics(pm, cset, q, v, tau, mu=MU[alg])[0]
            got = solve(model, alg, q, v, tau, cset, **REDUNDANT_CONVERGED)
            assert rel_err(got[0], ddq) < PIN_TOL, f"{alg}: ddq vs Pinocchio on the m = 36 set"
