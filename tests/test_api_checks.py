"""gen.run and compiled kernels refuse what would be a silent wrong answer (issue 12 §4):
non-finite outputs, non-unit quaternions and (cos, sin) pairs, constraints given to an
unconstrained algorithm, options it does not take or out of range (named)."""
import numpy as np
import pytest
from random_trees import random_tree

import gen
from gen.api import UNIT_NORM_TOL


@pytest.fixture(scope="module")
def humanoid():
    return gen.load_robot("humanoid30")


def test_non_finite_output_is_an_error(humanoid):
    q = humanoid.random_q(np.random.default_rng(0))
    v = np.full(humanoid.nv, 1e160)
    with pytest.raises(gen.RbdgenError, match="output 'ddq' is NaN or inf"):
        gen.run(humanoid, "aba", q, v, np.zeros(humanoid.nv))


def test_non_unit_quaternion_is_refused(humanoid):
    q = humanoid.random_q(np.random.default_rng(1))
    q[3:7] *= 2.0
    with pytest.raises(gen.RbdgenError, match=r"quaternion of joint .* has norm 2"):
        gen.run(humanoid, "aba", q, np.zeros(humanoid.nv), np.zeros(humanoid.nv))
    q[3:7] *= 0.5 * (1.0 + 0.1 * UNIT_NORM_TOL)          # within the tolerance: accepted
    gen.run(humanoid, "rnea", q, np.zeros(humanoid.nv), np.zeros(humanoid.nv))


def test_zero_cos_sin_pair_is_refused():
    model = random_tree(5, seed=3, kinds=("revolute_unb",))
    unb = [b for b in model.bodies if b.kind == "revolute_unb"]
    q = model.random_q(np.random.default_rng(2))
    q[unb[0].idx_q:unb[0].idx_q + 2] = 0.0
    with pytest.raises(gen.RbdgenError, match=r"\(cos, sin\) pair .* has norm 0"):
        gen.run(model, "crba", q)


def test_constraints_given_to_an_unconstrained_algorithm_are_refused(humanoid):
    q = humanoid.random_q(np.random.default_rng(3))
    with pytest.raises(gen.RbdgenError, match="aba takes no constraints"):
        gen.run(humanoid, "aba", q, np.zeros(humanoid.nv), np.zeros(humanoid.nv), constraints="6D:left_foot")


@pytest.mark.parametrize("options,message", [
    (dict(iterations=float("nan")), "option iterations=nan must be finite"),
    (dict(iterations=2.5), "option iterations=2.5 must be an integer"),
    (dict(iterations=0), r"option iterations=0 is outside \[1, inf\)"),
    (dict(mu=-1.0), r"option mu=-1.0 is outside \(0, inf\)"),
    (dict(mu=float("inf")), "option mu=inf must be finite"),
    (dict(tol="small"), "option tol='small' is not a number"),
    (dict(speed=3), r"has no option speed \(options: iterations, mu, tol, max_iter, runtime_params\)"),
])
def test_option_errors_name_the_option(humanoid, options, message):
    q = humanoid.random_q(np.random.default_rng(4))
    z = np.zeros(humanoid.nv)
    with pytest.raises(gen.RbdgenError, match=message):
        gen.run(humanoid, "prox_ltl", q, z, z, constraints="6D:left_foot", **options)
