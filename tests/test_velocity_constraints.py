"""Bilateral velocity constraints psi(q, v) = J v = 0 (Tedrake 2012 §2): the ``3Dv`` /
``6Dv`` spec types, their stabilisation psi' = -Kv psi, against Pinocchio (a velocity
constraint with gain Kv is Pinocchio's constraint with corrector (Kp, Kd) = (0, Kv)) and
against a dense solve of the mixed position/velocity set with every proximal solver."""
import numpy as np
import pytest
from conftest import SOLVERS, needs_pin, rel_err
from test_constraints import (
    pin_constraint_dynamics,
    random_state,
    to_pinocchio,
)

import gen
from gen import RbdgenError
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.robots.synthetic import humanoid30

KIN_TOL = 1e-11          # a_c* vs Pinocchio / vs the formula (relative)
SOLVE_TOL = 1e-9         # converged solvers vs a dense KKT solve (relative)
MU = {"prox_ltl": 1e-6, "prox_pv": 1e-6, "prox_ltls": 1e-4, "constrained_aba": 1e-4}
MIXED = "6D:left_foot,3Dv:right_foot,6Dv:left_hand,3D:right_hand"


def test_spec_marks_velocity_constraints_and_prints_them_back():
    model = humanoid30()
    cset = parse_constraints(model, MIXED, Kp=4.0, Kd=2.0, Kv=3.0)
    assert [c.velocity for c in cset.constraints] == [False, True, True, False]
    assert cset.spec == MIXED and cset.m == 18
    assert [cset.gains(c) for c in range(4)] == [(4.0, 2.0), (0.0, 3.0), (0.0, 3.0), (4.0, 2.0)]


@pytest.mark.parametrize("spec, words", [
    ("3Dv+:left_foot", ["cannot be unilateral"]),
    ("4Dv:left_foot", ["unknown type '4Dv'", "3Dv"]),
])
def test_bad_velocity_tokens_name_the_problem(spec, words):
    with pytest.raises(RbdgenError) as e:
        parse_constraints(humanoid30(), spec)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value)


def test_negative_kv_is_refused():
    with pytest.raises(RbdgenError, match="Kv=-1.0"):
        parse_constraints(humanoid30(), "3Dv:left_foot", Kv=-1.0)


def test_velocity_rows_drop_the_position_feedback():
    """a_c* = -gamma - Kv J v on velocity rows, whatever the position error; position rows
    keep -gamma - Kd J v - Kp e."""
    model = humanoid30()
    rng = np.random.default_rng(3)
    q0 = model.random_q(rng)
    q, v, _ = random_state(model, rng)
    mixed = parse_constraints(model, MIXED, Kp=40.0, Kd=5.0, Kv=7.0, reference_q=q0)
    plain = parse_constraints(model, MIXED.replace("v:", ":"), reference_q=q0)       # no gains
    ev = mixed.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    ev0 = plain.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    assert rel_err(ev.J, ev0.J) < KIN_TOL and rel_err(ev.gamma, ev0.gamma) < KIN_TOL
    for c, con in enumerate(mixed.constraints):
        r = mixed.rows(c)
        if con.velocity:
            want = -ev0.gamma[r.start:r.stop] - 7.0 * ev0.Jv[r.start:r.stop]
            assert rel_err(ev.a_star[r.start:r.stop], want) < KIN_TOL, f"{con}: -gamma - Kv J v"
        else:
            assert np.max(np.abs(ev.a_star[r.start:r.stop] + ev0.gamma[r.start:r.stop]
                                 + 5.0 * ev0.Jv[r.start:r.stop])) > 1e-3, f"{con}: Kp e is there"


@needs_pin
@pytest.mark.parametrize("alg", SOLVERS)
def test_solvers_match_pinocchio_with_the_equivalent_corrector(alg):
    model = humanoid30()
    pm = to_pinocchio(model)
    rng = np.random.default_rng(11)
    q0 = model.random_q(rng)
    cset = parse_constraints(model, MIXED, Kp=30.0, Kd=4.0, Kv=9.0, reference_q=q0)
    for _ in range(2):
        q, v, tau = random_state(model, rng)
        ddq_p, lam_p, _, a_p = pin_constraint_dynamics(pm, cset, q, v, tau, mu=MU[alg])
        ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
        assert rel_err(ev.a_star, a_p) < KIN_TOL, "a_c* vs Pinocchio with corrector (0, Kv) on velocity rows"
        ddq, lam, it, res = gen.run(model, alg, q, v, tau, constraints=cset, mu=MU[alg], tol=1e-13, max_iter=300)
        assert rel_err(ddq, ddq_p) < 1e-8 and rel_err(lam, lam_p) < 1e-8, f"{alg} vs pin.constraintDynamics"


@pytest.mark.parametrize("alg", SOLVERS)
def test_velocity_constraint_is_met_at_the_acceleration_level(alg):
    """J ddq = -gamma - Kv J v on the velocity rows, so along the motion psi' = -Kv psi."""
    model = humanoid30()
    rng = np.random.default_rng(12)
    cset = parse_constraints(model, "6Dv:left_foot,3Dv:right_hand", Kv=6.0)
    q, v, tau = random_state(model, rng)
    ddq, lam, _, _ = gen.run(model, alg, q, v, tau, constraints=cset, mu=MU[alg], tol=1e-13, max_iter=300)
    ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    psi_dot = ev.J @ np.reshape(ddq, (-1, 1)) + ev.gamma    # d/dt (J v)
    assert rel_err(psi_dot, -6.0 * ev.Jv) < SOLVE_TOL
    M = gen.run(model, "crba", q)
    b = gen.run(model, "nle", q, v)
    K = np.block([[M, -ev.J.T], [ev.J, np.zeros((cset.m, cset.m))]])
    x = np.linalg.solve(K, np.concatenate([np.reshape(tau, (-1, 1)) - np.reshape(b, (-1, 1)), ev.a_star]))
    assert rel_err(ddq, x[:model.nv]) < SOLVE_TOL and rel_err(lam, x[model.nv:]) < SOLVE_TOL


def test_compiled_kernel_with_velocity_constraints_equals_numpy():
    model = humanoid30()
    cset = parse_constraints(model, MIXED, Kp=30.0, Kd=4.0, Kv=9.0)
    k = gen.build(model, "prox_ltl", cset, iterations=3)
    rng = np.random.default_rng(13)
    q, v, tau = random_state(model, rng)
    got = k(q, v, tau)
    ref = gen.run(model, "prox_ltl", q, v, tau, constraints=cset, iterations=3)
    for g, r in zip(got[:2], ref[:2]):
        assert rel_err(g, r) < 1e-10


@pytest.mark.slow
def test_benchmark_cross_checks_velocity_constraints_with_generic_c_and_pinocchio():
    """The harness gives the generic C and Pinocchio's constraint models the per-constraint
    gains, so the three implementations agree before timing."""
    from gen.bench.harness import benchmark

    model = gen.load_robot("solo12")
    cset = parse_constraints(model, "3Dv:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3Dv:HR_FOOT", Kp=20.0, Kd=3.0, Kv=7.0)
    r = benchmark(model, "prox_ltl", cset, rounds=2, batch=3, warmup=1, n_states=8)
    assert r["verify"]["ok"] and set(r["verify"]["max_rel_diff"]) >= {"generic"}
    assert all(d < 1e-10 for d in r["verify"]["max_rel_diff"].values())
