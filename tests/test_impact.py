"""The impact map ``impulse`` (gen/algorithms/impulse.py, Tedrake 2012 §3.2): v+ and the
impulse against the dense pseudo-inverse formula on regular sets (ur5 6D tool, solo12
four 3D feet, talos 6D soles, humanoid30 contacts), the target J v+ = -e J v-, the
momentum balance M (v+ - v-) = J^T impulse at every iterate, redundant (duplicated) sets
finite and equal to the least-squares solution, Pinocchio's impulseDynamics, SX trace =
NumPy, compiled C = NumPy, options and errors.

mu: the map runs constrainedABA's augmented-Lagrangian sweeps, whose rounding floor is
~eps / (mu lambda_min(M)) (~5e-9 relative at the default 1e-6 on solo12), so the tight
comparisons run at mu = 1e-4, as tests/test_constrained.py does for the ALM solvers."""
import numpy as np
import pytest
from conftest import needs_pin, rel_err
from test_constrained import states
from test_constraints import (
    HUMANOID_CONTACTS,
    named,
    pin,
    pin_constraints,
)

import gen
from gen import RbdgenError
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.constraints import ConstraintSet
from gen.trace import trace, trace_driver

MU = 1e-4
CONVERGED = dict(mu=MU, tol=1e-13, max_iter=300)

PINV_TOL = 1e-9         # v+ and impulse vs the dense pseudo-inverse formula (relative), regular sets
LSQ_TOL = 1e-8          # the same on redundant sets (least squares, minimum norm)
TARGET_TOL = 1e-9       # |J v+ + e J v-|_inf / max(1, |J v-|_inf), converged
MOMENTUM_TOL = 1e-9     # M (v+ - v-) vs J^T impulse at any iterate (relative)
PIN_TOL = 1e-8          # vs Pinocchio's impulseDynamics (damping 1e-12, relative)
SX_TOL = 1e-10          # SX trace evaluated numerically vs NumPy (relative)
C_TOL = 1e-10           # compiled C vs NumPy (relative)

FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLES = "6D:left_sole_link,6D:right_sole_link"
REGULAR = [("ur5", "6D:tool0"), ("solo12", FEET), ("talos", SOLES), ("humanoid30", HUMANOID_CONTACTS)]
REDUNDANT = [("humanoid30", "6D:left_foot,6D:right_foot,6D:left_foot,6D:right_foot"),
             ("talos", SOLES + "," + SOLES)]


def load(robot):
    return named(robot)[0] if robot in ("ur5", "solo12", "talos") else gen.load_robot(robot)


def dense(model, cset, q):
    M = gen.run(model, "crba", q)
    J = cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)
    return M, J


def pinv_impact(model, cset, q, v, e):
    """Tedrake 2012 §3.2 with a dense pseudo-inverse: impulse = -(1 + e) (J M^-1 J^T)^+ J v-."""
    M, J = dense(model, cset, q)
    G = J @ np.linalg.solve(M, J.T)
    imp = -(1.0 + e) * np.linalg.pinv(G, rcond=1e-10) @ (J @ v)
    return v + np.linalg.solve(M, J.T @ imp), imp


def impact(model, cset, q, v, **options):
    return gen.run(model, "impulse", q, v, constraints=cset, **options)


@pytest.mark.parametrize("e", [0.0, 0.5])
@pytest.mark.parametrize("robot, spec", REGULAR)
def test_impact_map_is_the_pseudo_inverse_formula(robot, spec, e):
    model = load(robot)
    cset = parse_constraints(model, spec)
    for q, v, _ in states(model, 51, cset=cset):
        v_ref, imp_ref = pinv_impact(model, cset, q, v, e)
        v_plus, imp, it, res = impact(model, cset, q, v, restitution=e, **CONVERGED)
        assert rel_err(v_plus, v_ref) < PINV_TOL, f"{robot} {spec} e={e}: v+ vs pinv formula"
        assert rel_err(imp, imp_ref) < PINV_TOL, f"{robot} {spec} e={e}: impulse vs pinv formula"
        J = dense(model, cset, q)[1]
        target = np.max(np.abs(J @ v_plus + e * (J @ v)))
        assert target / max(1.0, np.max(np.abs(J @ v))) < TARGET_TOL, f"{robot}: |J v+ + e J v-| = {target:.1e}"
        assert abs(res - target) < TARGET_TOL, f"{robot}: reported residual {res:.1e} vs {target:.1e}"
        assert 1 <= it < CONVERGED["max_iter"]


@pytest.mark.parametrize("iterations", [1, 3])
def test_momentum_balance_holds_at_every_iterate(iterations):
    model = gen.load_robot("humanoid30")
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    for q, v, _ in states(model, 52, cset=cset):
        v_plus, imp, it, _ = impact(model, cset, q, v, restitution=0.3, iterations=iterations)
        M, J = dense(model, cset, q)
        assert it == iterations
        assert rel_err(M @ (v_plus - v), J.T @ imp) < MOMENTUM_TOL, "M (v+ - v-) != J^T impulse"


@pytest.mark.parametrize("robot, spec", REDUNDANT)
def test_redundant_sets_give_the_least_squares_impulse(robot, spec):
    model = load(robot)
    cset = parse_constraints(model, spec)
    assert cset.m == 24
    for q, v, _ in states(model, 53, n=1):
        G = (lambda M, J: J @ np.linalg.solve(M, J.T))(*dense(model, cset, q))
        assert np.linalg.matrix_rank(G) == 12, "duplicated rows make J M^-1 J^T singular"
        v_ref, imp_ref = pinv_impact(model, cset, q, v, 0.0)
        for options in (dict(iterations=10), CONVERGED):
            v_plus, imp, _, res = impact(model, cset, q, v, **options)
            assert np.all(np.isfinite(v_plus)) and np.all(np.isfinite(imp)), f"{robot}: non-finite {options}"
        assert rel_err(v_plus, v_ref) < LSQ_TOL, f"{robot}: v+ vs least squares"
        assert rel_err(imp, imp_ref) < LSQ_TOL, f"{robot}: impulse vs minimum-norm least squares"
        assert rel_err(imp[:12], imp[12:]) < LSQ_TOL, f"{robot}: duplicates share the impulse"
        assert res < TARGET_TOL


@needs_pin
@pytest.mark.parametrize("e", [0.0, 0.7])
@pytest.mark.parametrize("robot, spec", REGULAR[:3])
def test_impact_map_matches_pinocchio_impulse_dynamics(robot, spec, e):
    model, pm = named(robot)
    cset = parse_constraints(model, spec)
    for q, v, _ in states(model, 54, cset=cset):
        data = pm.createData()
        cms, cds = pin_constraints(pm, cset)
        pin.initConstraintDynamics(pm, data, cms, cds)
        v_pin = pin.impulseDynamics(pm, data, q, v, cms, cds, e, pin.ProximalSettings(1e-14, 1e-12, 1)).copy()
        v_plus, imp, _, _ = impact(model, cset, q, v, restitution=e, **CONVERGED)
        assert rel_err(v_plus, v_pin) < PIN_TOL, f"{robot} {spec} e={e}: v+ vs Pinocchio"
        assert rel_err(imp, data.impulse_c) < PIN_TOL, f"{robot} {spec} e={e}: impulse vs Pinocchio"


@pytest.mark.parametrize("robot, spec", [("humanoid30", HUMANOID_CONTACTS), ("solo12", FEET)])
def test_sx_trace_equals_numpy(robot, spec):
    model = load(robot)
    cset = parse_constraints(model, spec)
    options = dict(iterations=3, mu=MU, restitution=0.5)
    tr = trace(model, "impulse", cset, **options)
    assert [n for n, _ in tr.inputs] == ["q", "v_minus"]
    assert [n for n, _ in tr.outputs] == ["v_plus", "impulse", "iterations", "residual"]
    f = tr.function()
    for q, v, _ in states(model, 55):
        ref = impact(model, cset, q, v, **options)
        for (name, _), got, want in zip(tr.outputs, f(q, v), ref):
            assert rel_err(np.array(got).ravel(), want) < SX_TOL, f"{robot}: SX vs NumPy {name}"


def test_compiled_c_equals_numpy(tmp_path):
    model = load("solo12")
    options = dict(iterations=3, mu=MU, restitution=0.5)
    kernel = gen.build(model, "impulse", FEET, out_dir=tmp_path / "impulse", cache=tmp_path / "cache", **options)
    fn = kernel.manifest["functions"][0]
    assert [x["name"] for x in fn["inputs"]] == ["q", "v_minus"]
    assert [x["name"] for x in fn["outputs"]] == ["v_plus", "impulse", "iterations", "residual"]
    assert kernel.manifest["iterations"] == 3
    for q, v, _ in states(model, 56):
        got = kernel(q, v)
        ref = impact(model, FEET, q, v, **options)
        for name, g, r in zip(("v_plus", "impulse", "iterations", "residual"), got, ref):
            assert rel_err(g, r) < C_TOL, f"solo12: compiled C vs NumPy {name}"


def test_traced_early_exit_driver_equals_numpy():
    """The driver's setup, step and finish (gen.trace.trace_driver) looped as the C driver
    loops them, against the NumPy run with the same tolerance (default restitution)."""
    model = gen.load_robot("humanoid30")
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    opts = dict(mu=MU, tol=1e-10, max_iter=50)
    dt = trace_driver(model, "impulse", cset, **opts)
    setup, step, finish = (getattr(dt, n).function() for n in ("setup", "step", "finish"))
    for q, v, _ in states(model, 60, n=2, cset=cset):
        c, s = setup(q, v)
        k = 0
        while True:
            nxt, res = step(c, s)
            k += 1
            if float(res) <= dt.tol or k >= dt.max_iter:
                break
            s = nxt
        v_plus, imp, res = (np.array(x).ravel() for x in finish(c, s))     # res: true residual of v_plus
        ref = impact(model, cset, q, v, **opts)
        assert k == ref[2], f"{k} iterations traced, {ref[2]} in NumPy"
        assert rel_err(v_plus, ref[0]) < SX_TOL and rel_err(imp, ref[1]) < SX_TOL, "traced driver vs NumPy"


# --- options and errors --------------------------------------------------------------------

def test_without_constraints_the_velocity_is_unchanged():
    model = gen.load_robot("humanoid30")
    for q, v, _ in states(model, 57):
        v_plus, imp, it, res = impact(model, ConstraintSet(model, []), q, v)
        assert rel_err(v_plus, v) < 1e-15 and imp.shape == (0,) and it == 0 and res == 0


def test_early_exit_on_a_tolerance_counts_iterations():
    model = gen.load_robot("humanoid30")
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    (q, v, _), = states(model, 58, n=1, cset=cset)
    fixed = impact(model, cset, q, v, iterations=7)
    assert fixed[2] == 7
    early = impact(model, cset, q, v, mu=MU, tol=1e-10, max_iter=50)
    assert 1 <= early[2] < 7 and early[3] <= 1e-10


def test_bad_options_and_sets_raise_one_line_errors():
    model = gen.load_robot("humanoid30")
    (q, v, _), = states(model, 59, n=1)
    with pytest.raises(RbdgenError, match=r"restitution=1\.5 is outside \[0, 1\]"):
        impact(model, HUMANOID_CONTACTS, q, v, restitution=1.5)
    with pytest.raises(RbdgenError, match="takes 2 inputs"):
        gen.run(model, "impulse", q, v, v, constraints=HUMANOID_CONTACTS)


def test_registry_row():
    model = gen.load_robot("humanoid30")
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    row = ALGORITHMS["impulse"]
    assert row.constrained
    assert row.inputs(model, cset) == [("q", 31), ("v_minus", 30)]
    assert row.outputs(model, cset) == [("v_plus", 30, 1), ("impulse", 18, 1), ("iterations", 1, 1),
                                        ("residual", 1, 1)]
