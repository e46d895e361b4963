"""The spherical joint kind (gen/model.py: unit quaternion ``[qx qy qz qw]``, LOCAL angular
velocity, Pinocchio's ``JointModelSpherical``): against Pinocchio on random trees with
spherical, free, revolute and prismatic joints (unconstrained and constrained rows), the
configuration integrator against ``pinocchio.integrate``, traced SX = NumPy, and the
generic C = NumPy.  MJCF ball joints: tests/test_mjcf.py."""
import numpy as np
import pytest
from conftest import row_floor, rel_err
from random_trees import random_state, random_tree

import gen
from gen.backend import NUMPY
from gen.errors import RbdgenError
from gen.pinref import depth_first
from gen.simulate import integrate
from gen.trace import trace

pin = pytest.importorskip("pinocchio")
from gen.pinref import pin_model, reference  # noqa: E402

KINDS = ("revolute", "spherical", "prismatic", "free")
RTOL = 1e-9              # relative: max|rbdgen - pinocchio| / max(1, max|pinocchio|)
SX_TOL = 1e-12
SEEDS = [0, 4, 26]



def spherical_tree(seed):
    model = random_tree(8, seed, kinds=KINDS)
    assert any(b.kind == "spherical" for b in model.bodies)
    return model


@pytest.mark.parametrize("seed", SEEDS)
def test_against_pinocchio(seed):
    model = spherical_tree(seed)
    pm = pin_model(model)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        tau = gen.run(model, "rnea", q, v, a).ravel()
        assert rel_err(tau, pin.rnea(pm, pd, q, v, a)) < RTOL, "rnea"
        assert rel_err(gen.run(model, "aba", q, v, tau).ravel(), pin.aba(pm, pd, q, v, tau)) < RTOL, "aba"
        M = gen.run(model, "crba", q)
        assert rel_err(gen.run(model, "minv", q) @ M, np.eye(model.nv)) < RTOL, "minv M = 1"
        if depth_first(model):                  # Pinocchio's CRBA wants depth-first ids
            Mp = pin.crba(pm, pd, q)
            assert rel_err(M, np.triu(Mp) + np.triu(Mp, 1).T) < RTOL, "crba"
        L, D = gen.run(model, "ltdl", q)
        assert rel_err(L.T @ np.diag(D.ravel()) @ L, M) < RTOL, "L^T D L = M over the dof parents"


@pytest.mark.parametrize("algorithm", ["prox_ltl", "constrained_aba", "prox_pv"])
def test_constrained_against_pinocchio(algorithm):
    """A 6D and a 3D contact on bodies below spherical joints: the constrained solvers
    against Pinocchio's constraintDynamics (through the rows' references)."""
    model = spherical_tree(26)                  # depth-first: Pinocchio's reference applies
    spec = "6D:tip6,3D:tip2"
    rng = np.random.default_rng(5)
    q, v, tau = random_state(model, rng)
    got = gen.run(model, algorithm, q, v, tau, constraints=spec)
    ref = reference(model, algorithm, q, v, tau, cset=spec)
    assert ref is not None
    tol = row_floor(algorithm, model, spec, q, tol=RTOL)
    for g, r, what in zip(got, ref, ("ddq", "lam")):
        assert rel_err(np.ravel(g), np.ravel(r)) < tol, f"{algorithm} {what}"


def test_integrate_matches_pinocchio():
    model = spherical_tree(0)
    pm = pin_model(model)
    rng = np.random.default_rng(2)
    for scale in (1.0, 1e-3):                   # the exact and the Taylor branch
        q, dv = model.random_q(rng), scale * rng.normal(size=model.nv)
        got = integrate(model, q.reshape(-1, 1), dv.reshape(-1, 1), be=NUMPY).ravel()
        assert rel_err(got, pin.integrate(pm, q, dv)) < 1e-12


@pytest.mark.parametrize("seed", [3, 8])
def test_configuration_integrate_matches_pinocchio(seed):
    """gen.configuration.integrate (the tangent convention of the derivative rows) on trees
    of every joint kind, spherical joints among them: the exact and the Taylor branch."""
    from random_trees import every_kind_tree

    from gen import configuration
    model = every_kind_tree(12, seed)
    assert any(b.kind == "spherical" for b in model.bodies)
    pm = pin_model(model)
    rng = np.random.default_rng(seed)
    for scale in (1.0, 1e-7):
        q, dv = model.random_q(rng), scale * rng.normal(size=model.nv)
        assert rel_err(configuration.integrate(model, q, dv), pin.integrate(pm, q, dv)) < 1e-12


def test_traced_sx_equals_numpy():
    model = spherical_tree(9)
    rng = np.random.default_rng(3)
    for algorithm in ("rnea", "crba", "aba"):
        tr = trace(model, algorithm)
        f = tr.function()
        q, v, x = random_state(model, rng)
        args = [{"q": q, "v": v}.get(name, x) for name, _ in tr.inputs]
        got = np.array(f.call([np.reshape(a, (-1, 1)) for a in args])[0])
        ref = gen.run(model, algorithm, *args)
        assert rel_err(got.reshape(np.shape(ref)), ref) < SX_TOL, algorithm


def test_unit_quaternion_checked():
    model = spherical_tree(0)
    b = next(b for b in model.bodies if b.kind == "spherical")
    q = model.neutral()
    assert np.array_equal(q[b.idx_q:b.idx_q + 4], [0, 0, 0, 1])
    q[b.idx_q + 3] = 2.0
    with pytest.raises(RbdgenError, match=f"quaternion of joint '{b.name}'"):
        gen.run(model, "crba", q)


@pytest.mark.parametrize("seed", SEEDS)
def test_generic_c_equals_numpy(seed):
    """The generic C library (gen.generic; 3-DoF blocks for the spherical joints, which it
    takes as given, like a free joint's quaternion) = NumPy: the dynamics to 1e-12, the
    derivatives to 1e-10, prox_ltl and constrained_aba with a 3D frame."""
    from gen.generic import GenericModel
    model = spherical_tree(seed)
    g = GenericModel(model)
    rng = np.random.default_rng(seed)
    q, v, a = random_state(model, rng)
    for algorithm, args in (("rnea", (q, v, a)), ("crba", (q,)), ("aba", (q, v, a)), ("crba_solve", (q, a))):
        assert rel_err(g.call(algorithm, *args), gen.run(model, algorithm, *args)) < SX_TOL, algorithm
    for algorithm in ("rnea_derivatives", "aba_derivatives"):
        for got, ref in zip(g.call(algorithm, q, v, a), gen.run(model, algorithm, q, v, a)):
            assert rel_err(got, ref) < 1e-10, algorithm
    tip = "3D:tip7"
    g = GenericModel(model, tip)
    for algorithm, mu in (("prox_ltl", 1e-6), ("constrained_aba", 1e-3)):
        got = g.call(algorithm, q, v, a, mu=mu, iterations=4)
        ref = gen.run(model, algorithm, q, v, a, constraints=tip, mu=mu, iterations=4)
        for x, y, what in zip(got, ref, ("ddq", "lam")):
            assert rel_err(x, y) < SX_TOL, f"{algorithm} {what}"
