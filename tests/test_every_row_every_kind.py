"""Every registered algorithm on every joint kind, by iterating the registry: a new row is
covered here without being named.

For each joint kind (spherical, planar, helical, universal, revolute about an unaligned
axis, prismatic, a free joint mid-tree) two depth-first trees carry it three times: one on
a free-flyer root, one with the kind itself at the root.  Each row runs through NumPy
(``gen.run``, the row's default options, constraints ``3D`` on two branches' tips) and is
compared with Pinocchio's value of the same quantity (``gen.pinref.reference``, the row's
``PinocchioRef``) at the tolerance ``gen verify`` holds it to (``gen.verify.tolerances``:
``VERIFY_TOL`` floored by the row's rounding floor at the state).  A row that does not
apply to a model (its registry ``refuses``) must refuse it with one line.

Mimic joints: tests/test_mimic_solvers.py (Pinocchio refuses them in most algorithms; the
reference there is the KKT system from its CRBA, RNEA and frame Jacobians)."""
import numpy as np
import pytest
from random_trees import random_inertia, random_rotation

import gen
from gen.algorithms import ALGORITHMS
from gen.errors import RbdgenError
from gen.model import SE3, Body, Frame, Model, universal_joint
from gen.verify import VERIFY_TOL, kappas, random_inputs, relerr, tolerances

pin = pytest.importorskip("pinocchio")
from gen.pinref import depth_first, pin_model, reference, supports  # noqa: E402

KINDS = ("spherical", "planar", "helical", "universal", "revolute_unb", "prismatic", "free")
ROOTS = ("free", "kind")
#: the kinds around the one under test, and the chain/branch shape (parent of body i)
FILLERS = ("revolute", "prismatic", "revolute")


def _body(kind, name, parent, rng, inertia):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    pose = SE3(random_rotation(rng), rng.normal(scale=0.3, size=3))
    body = Body(name, f"{name}_link", parent, kind, axis, pose, inertia)
    if kind == "helical":
        body.pitch = float(rng.uniform(-0.5, 0.5))
    return body


def kind_tree(kind: str, root: str, seed: int = 0) -> Model:
    """A depth-first tree: root (free-flyer, or ``kind``), then two branches from it, each
    ``kind`` -> filler -> ``kind`` (the second branch's last joint a filler), a frame
    ``tip<i>`` off every body."""
    rng = np.random.default_rng(seed)
    bodies: list[Body] = []

    def add(k, parent):
        name = f"j{len(bodies)}"
        if k == "universal":
            a1, a2 = (v / np.linalg.norm(v) for v in rng.normal(size=(2, 3)))
            bodies.extend(universal_joint(name, f"{name}_link", parent, len(bodies), a1, a2,
                                          SE3(random_rotation(rng), rng.normal(scale=0.3, size=3)),
                                          random_inertia(rng)))
        else:
            bodies.append(_body(k, name, parent, rng, random_inertia(rng)))
        return len(bodies) - 1

    base = add("free" if root == "free" else kind, -1)
    for branch, last in enumerate((kind, FILLERS[2])):
        parent = add(kind, base)
        parent = add(FILLERS[branch], parent)
        add(last, parent)
    frames = [Frame(b.link, i, SE3.identity(), "body") for i, b in enumerate(bodies)]
    frames += [Frame(f"tip{i}", i, SE3(random_rotation(rng), rng.normal(scale=0.2, size=3)), "fixed_joint")
               for i in range(len(bodies))]
    model = Model(f"{kind}_{root}", bodies, frames, source=f"test tree: {kind} joints, {root} root")
    assert depth_first(model) and sum(kind in (b.kind, "universal") for b in bodies) >= 3
    return model


#: one constraint on each branch's tip (the two last bodies of the branches)
def constraint_spec(model: Model) -> str:
    leaves = [i for i in range(model.nbodies) if not any(b.parent == i for b in model.bodies)]
    return ",".join(f"3D:tip{i}" for i in leaves[-2:])


MODELS = {(k, r): kind_tree(k, r, seed=KINDS.index(k)) for k in KINDS for r in ROOTS}


@pytest.fixture(scope="module")
def pin_models():
    return {key: pin_model(m) for key, m in MODELS.items()}


@pytest.mark.parametrize("name", list(ALGORITHMS))
@pytest.mark.parametrize("key", list(MODELS), ids=[f"{k}-{r}" for k, r in MODELS])
def test_row_on_kind_against_pinocchio(key, name, pin_models):
    model, row = MODELS[key], ALGORITHMS[name]
    spec = constraint_spec(model) if row.constrained else None
    cset = row.constraint_set(model, spec) if row.constrained else None
    why = row.refuses(model, cset) if row.refuses else None
    rng = np.random.default_rng(7)
    inputs = random_inputs(model, name, rng, cset)
    if why:
        with pytest.raises(RbdgenError) as err:
            gen.run(model, name, *inputs, constraints=spec)
        assert "\n" not in str(err.value) and name in str(err.value)
        return
    assert supports(model, name, cset, {}), f"{name} has no Pinocchio reference on {model.name}"
    got = gen.run(model, name, *inputs, constraints=spec)
    converged = row.pinocchio.converged
    if converged:          # Pinocchio's value is the converged solution: compare a converged run
        got = gen.run(model, name, *inputs, constraints=spec, **converged)
    ref = reference(model, name, *inputs, pmodel=pin_models[key], cset=cset, options={})
    kappa = kappas(name, model, cset, inputs[0], {})
    tol = tolerances(name, VERIFY_TOL, kappa)["numpy_pinocchio"]
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(ref) >= 1 and relerr(got[:len(ref)], ref) <= tol, f"{name} on {model.name}: tol {tol:.1e}"
