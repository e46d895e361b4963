"""Bad input through the Python API gets one clear RbdgenError naming what is wrong."""
import numpy as np
import pytest

import gen
from gen import RbdgenError
from gen.robots.synthetic import chain


def test_wrong_array_size_names_the_input():
    m = chain(3)
    with pytest.raises(RbdgenError, match=r"input 'v' must have 3 entries, got shape \(4,\)"):
        gen.run(m, "rnea", np.zeros(3), np.zeros(4), np.zeros(3))


def test_wrong_number_of_inputs():
    with pytest.raises(RbdgenError, match=r"aba on chain:3 takes 3 inputs \(q, v, tau\), got 2"):
        gen.run(chain(3), "aba", np.zeros(3), np.zeros(3))


def test_nan_input_is_rejected_not_propagated():
    q = np.zeros(3)
    q[1] = np.nan
    with pytest.raises(RbdgenError, match=r"input 'q' contains NaN"):
        gen.run(chain(3), "crba", q)


def test_unknown_algorithm_lists_the_choices():
    with pytest.raises(RbdgenError, match=r"unknown algorithm 'abba' \(choose from rnea, nle, crba"):
        gen.run(chain(3), "abba", np.zeros(3))


@pytest.mark.parametrize("spec, message", [
    ("chain:x", r"synthetic robot 'chain:x': expected chain:N"),
    ("chain:0", r"synthetic robot 'chain:0': expected chain:N"),
    ("robotnik", r"unknown robot 'robotnik' \(choose from .*humanoid30"),
])
def test_unknown_robot(spec, message):
    with pytest.raises(RbdgenError, match=message):
        gen.load_robot(spec)


def test_unknown_frame_suggests_similar_names():
    with pytest.raises(RbdgenError, match=r"unknown frame 'link2_ti'; similar: link2_tip"):
        chain(3).frame("link2_ti")


def test_massless_subtree_is_detected_and_named():
    from gen.model import SE3, Body, Inertia, Model

    z = np.array([0.0, 0.0, 1.0])
    heavy = Inertia(1.0, np.zeros(3), np.eye(3))
    m = Model("m", [Body("j1", "a", -1, "revolute", z, SE3.identity(), heavy),
                    Body("j2", "b", 0, "revolute", z, SE3.identity(), Inertia.zero())])
    with pytest.raises(RbdgenError, match=r"joint\(s\) 'j2' move links with zero mass and inertia.*lock"):
        m.check_singular_inertia()


# --- iterations and residual (issue 32 §5) ---------------------------------------------------------

#: a well-posed problem: the tip of a 6-link chain held in place (J has full row rank)
SOLVED = "3D:link5_tip"


@pytest.mark.parametrize("options", [{"iterations": 4}, {"tol": 1e-10, "max_iter": 50}])
def test_iterations_and_residual_are_python_numbers(options):
    """One state: the iteration count is an int and the residual a float (arrays of shape
    (1,) made float() warn under NumPy 2; the filter turns any warning into an error)."""
    import warnings

    m = chain(6)
    rng = np.random.default_rng(1)
    q, v, tau = m.random_q(rng), rng.normal(size=6), rng.normal(size=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ddq, lam, it, res = gen.run(m, "prox_ltl", q, v, tau, constraints=SOLVED, **options)
        float(res), int(it)
    assert type(it) is int and type(res) is float and ddq.shape == (6,) and lam.shape == (3,)
    if "iterations" in options:
        assert it == options["iterations"]
    else:
        assert 1 <= it < options["max_iter"] and 0.0 <= res <= options["tol"]
