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
