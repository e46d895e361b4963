"""Identities between independent algorithms on random branched trees (docs/DESIGN.md §6a):
ABA = CRBA + LTDL solve, RNEA(ABA(tau)) = tau, L^T D L = M with no fill-in outside the
branch-induced pattern, L^T L = M, the L products against dense algebra."""
import numpy as np
import pytest
from conftest import rel_err
from random_trees import random_state, random_tree

import gen
from gen.algorithms.ltdl import mul_L, mul_Lt, solve_L, solve_Lt
from gen.backend import NUMPY
from gen.robots.synthetic import bintree, chain, humanoid30

REL_TOL = 1e-10        # exact algorithms in float64 on well-conditioned random trees
SEEDS = range(6)


def models():
    yield from (random_tree(12, s) for s in SEEDS)
    yield random_tree(10, 99, kinds=("prismatic", "revolute"))
    yield chain(8)
    yield bintree(15)
    yield humanoid30()


@pytest.fixture(params=list(models()), ids=lambda m: m.name)
def model(request):
    return request.param


def test_inverse_then_forward_dynamics(model):
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, v, a = random_state(model, rng)
        tau = gen.run(model, "rnea", q, v, a)
        ddq = gen.run(model, "aba", q, v, tau)
        assert rel_err(ddq, a) < REL_TOL, "aba(rnea(a)) != a"
        assert rel_err(gen.run(model, "rnea", q, v, ddq), tau) < REL_TOL, "rnea(aba(tau)) != tau"


def test_aba_equals_crba_ltdl_solve(model):
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, v, tau = random_state(model, rng)
        b = gen.run(model, "nle", q, v)
        x = gen.run(model, "crba_solve", q, tau - b)
        assert rel_err(gen.run(model, "aba", q, v, tau), x) < REL_TOL, "aba != M^-1 (tau - b)"
        M = gen.run(model, "crba", q)
        assert rel_err(M @ x + b, tau) < REL_TOL, "M x + b != tau"


def test_crba_is_symmetric_positive_definite_and_matches_rnea(model):
    rng = np.random.default_rng(3)
    q, v, _ = random_state(model, rng)
    M = gen.run(model, "crba", q)
    assert np.array_equal(M, M.T), "M not exactly symmetric"
    assert np.linalg.eigvalsh(M).min() > 0, "M not positive definite"
    b = gen.run(model, "nle", q, v)
    cols = np.column_stack([gen.run(model, "rnea", q, v, e) - b for e in np.eye(model.nv)])
    assert rel_err(M, cols) < REL_TOL, "crba != columns of rnea"


def branch_pattern(model):
    """True where (i, j) has j an ancestor-or-self dof of i, or the reverse."""
    lam = model.dof_parents()
    P = np.zeros((model.nv, model.nv), dtype=bool)
    for i in range(model.nv):
        j = i
        while j != -1:
            P[i, j] = P[j, i] = True
            j = lam[j]
    return P


def test_ltdl_reconstructs_M_without_fill_in(model):
    rng = np.random.default_rng(4)
    q = model.random_q(rng)
    M = gen.run(model, "crba", q)
    L, D = gen.run(model, "ltdl", q)
    assert rel_err(L.T @ np.diag(D) @ L, M) < REL_TOL, "L^T D L != M"
    P = branch_pattern(model)
    assert np.all(L[~P] == 0.0), "LTDL fill-in outside the branch-induced pattern"
    assert np.all(M[~P] == 0.0), "CRBA non-zero outside the branch-induced pattern"
    assert np.all(np.triu(L, 1) == 0.0) and np.all(np.diag(L) == 1.0), "L not unit lower triangular"
    Lc = gen.run(model, "ltl", q)
    assert rel_err(Lc.T @ Lc, M) < REL_TOL, "L^T L != M"
    assert np.all(Lc[~P] == 0.0), "LTL fill-in"


def test_sparse_products_match_dense(model):
    rng = np.random.default_rng(5)
    q = model.random_q(rng)
    L, _ = gen.run(model, "ltdl", q)
    Lc = gen.run(model, "ltl", q)
    lam = model.dof_parents()
    x = rng.normal(size=(model.nv, 1))
    for mat, unit in ((L, True), (Lc, False)):
        Lb = NUMPY.asarray(mat)
        assert rel_err(mul_L(lam, Lb, x, NUMPY, unit), mat @ x) < REL_TOL, "L x"
        assert rel_err(mul_Lt(lam, Lb, x, NUMPY, unit), mat.T @ x) < REL_TOL, "L^T x"
        assert rel_err(solve_L(lam, Lb, x, NUMPY, unit), np.linalg.solve(mat, x)) < REL_TOL, "L^-1 x"
        assert rel_err(solve_Lt(lam, Lb, x, NUMPY, unit), np.linalg.solve(mat.T, x)) < REL_TOL, "L^-T x"


def test_expanded_parent_array_of_free_flyer():
    lam = humanoid30().dof_parents()
    assert lam[:7] == [-1, 0, 1, 2, 3, 4, 5], "free-flyer dofs must form a chain"
    assert lam.count(5) == 4, "the four limbs hang from the base's last dof"


@pytest.mark.parametrize("name", ["talos", "solo12", "bintree:12"])
def test_placed_inertia_equals_the_transformed_6x6_inertia(name):
    """``spatial.placed_inertia`` (the centre-of-mass form the world pass uses) equals
    ``X^* I X^-1`` formed from 6x6 matrices (``X`` the motion transform ``(v, w) -> (R v +
    p x R w, R w)``, ``X^* = X^-T``: an independent route) at a random placement of every
    body, and of a massless one (``rigid_transform``'s route)."""
    from gen.model import Inertia
    from gen.spatial import inertia_matrix, placed_inertia, skew3

    model = gen.load_robot(name)
    rng = np.random.default_rng(3)
    inertias = [b.inertia for b in model.bodies] + [Inertia(0.0, np.zeros(3), np.diag([0.1, 0.2, 0.3]))]
    for inertia in inertias:
        R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        R *= np.sign(np.linalg.det(R))
        p = rng.standard_normal((3, 1))
        X = np.zeros((6, 6))
        X[0:3, 0:3] = X[3:6, 3:6] = R
        X[0:3, 3:6] = skew3(p, NUMPY) @ R
        Xi = np.linalg.inv(X)
        ref = Xi.T @ np.asarray(inertia_matrix(inertia, NUMPY)) @ Xi
        m, h, Ib = placed_inertia((R, p), inertia, NUMPY)
        H = skew3(np.asarray(h).reshape(3, 1), NUMPY)
        got = np.block([[m * np.eye(3), H.T], [H, Ib]])
        assert np.abs(got - ref).max() <= 1e-13 * max(1.0, np.abs(ref).max()), f"{name}: mass {inertia.mass}"
