"""The same algorithm traced with CasADi SX and evaluated numerically equals the NumPy
run (docs/DESIGN.md §6b), for every unconstrained algorithm in the registry."""
import numpy as np
import pytest
from conftest import row_floor
from random_trees import random_state, random_tree

import gen
from gen.algorithms import ALGORITHMS
from gen.robots.synthetic import bintree, humanoid30
from gen.trace import trace

SX_TOL = 1e-12          # relative: max|sx - numpy| / max(1, max|numpy|)
UNCONSTRAINED = [a for a, alg in ALGORITHMS.items() if not alg.constrained]


@pytest.mark.parametrize("model", [random_tree(9, 7), bintree(7), humanoid30()], ids=lambda m: m.name)
@pytest.mark.parametrize("algorithm", UNCONSTRAINED)
def test_sx_trace_equals_numpy(model, algorithm):
    # gen.run runs a derivative row's analytical algorithm: trace that route (the AD
    # route is checked against it in tests/test_derivatives.py)
    tr = trace(model, algorithm, **({"route": "analytical"} if ALGORITHMS[algorithm].ad else {}))
    f = tr.function()
    rng = np.random.default_rng(11)
    for _ in range(3):
        q, v, x = random_state(model, rng)
        pool = {"q": q, "v": v}
        args = [pool.get(name, x) for name, _ in tr.inputs]
        ref = gen.run(model, algorithm, *args)
        ref = ref if isinstance(ref, tuple) else (ref,)
        got = f.call([np.reshape(a, (-1, 1)) for a in args])
        for (name, _), g, r in zip(tr.outputs, got, ref):
            g = np.array(g).reshape(np.shape(r))
            err = np.max(np.abs(g - r)) / max(1.0, np.max(np.abs(r)))
            tol = row_floor(algorithm, model, None, q, tol=SX_TOL)     # the row's floor, with its reason
            assert err < tol, f"{algorithm}/{name} on {model.name}: SX vs NumPy error {err:.2e}"


def test_trace_records_phases():
    tr = trace(humanoid30(), "aba")
    assert [name for name, _ in tr.phases] == ["forward", "backward", "acceleration"]


def test_axis_aligned_joint_costs_fewer_operations_than_unaligned():
    """Structure exploitation: a rotation about +z is built without Rodrigues' terms."""
    from gen.model import SE3, Body, Inertia, Model

    def one_joint(axis):
        inertia = Inertia(1.0, np.array([0.1, 0.2, 0.3]), np.diag([0.1, 0.2, 0.3]))
        return Model("one", [Body("j", "l", -1, "revolute", np.asarray(axis, float), SE3.identity(), inertia)])

    aligned = trace(one_joint([0, 0, 1]), "rnea").function().n_instructions()
    unaligned = trace(one_joint(np.array([1, 1, 1]) / np.sqrt(3)), "rnea").function().n_instructions()
    assert aligned < unaligned
