"""Pinocchio as an independent reference for ``rbdgen verify`` (docs/DESIGN.md §4, §6e).

:func:`pin_model` builds the Pinocchio model of a robot from what the rbdgen model was
built from, never by its name: for a model loaded from a URDF (named robots included),
``pin.buildModelFromUrdf`` on the same file (with a ``JointModelFreeFlyer`` root when
the rbdgen model floats) followed by ``pin.buildReducedModel`` at the neutral
configuration for the joints it locked (``Model.locked``: panda's fingers), with
``mimic=True`` when the rbdgen model honours ``<mimic>`` tags; for a
synthetic tree or an MJCF file, the model assembled joint by joint from the
:class:`~gen.model.Model` (same placements, axes and inertias; the MJCF conversion itself
is checked against MuJoCo in ``tests/test_mjcf.py``).  :func:`reference` calls the Pinocchio counterpart that the algorithm's
registry row names (:mod:`gen.algorithms.pinocchio`: which Pinocchio call, and how its
result becomes rbdgen's outputs) where :func:`supports` says it applies.

The Delassus matrix and the impulse read only ``joint1``'s side of a constraint: a set
with a constraint ``A~B`` whose frame A is fixed to the world has no reference there
(measured on fourbar ``3D:anchor~tip``: Pinocchio's v_plus is off the pseudo-inverse
formula by 7, rbdgen's by 3e-9; ``constraintDynamics`` handles it).  At the default
``mu = 1e-6`` the augmented-Lagrangian algorithms (``prox_ltls``, ``constrained_aba``,
``impulse``) show their rounding floor ``~eps / (mu lambda_min(M))`` against Pinocchio's
dual solves (:mod:`gen.algorithms.proximal`, "Accuracy"): worst seen 5e-7 relative
(prox_ltls, icub 6D soles), 8e-8 (converged impulse, ur5 6D), the dual solvers 4e-11.

No reference (n/a): ``prox_lcp`` (one-sided rows), the damped Delassus inverses
(``caba_osim``, ``caba_osimf``, ``ltl_osim``, ``kkt_osim``: pin 4.1's Python
``computeDampedDelassusMatrixInverse`` is wrong, the C++ shim of :mod:`gen.bench.pinshim`
covers them), sets with a unilateral row, and, for the solvers and the impulse, sets
with a weight other than 1 (Pinocchio has no per-constraint weights; the Delassus
matrix does not depend on them), and, for ``impulse_derivatives``, redundant sets
(rank-deficient J: Pinocchio's single damped solve there differentiates a Tikhonov
map, not the minimum-norm one, 0.5 relative apart on talos' soles constrained twice).

Algorithms whose row has no reference are reported as n/a.
Pinocchio's CRBA, sparse Cholesky and constrained algorithms assume joints numbered
depth-first (each subtree a contiguous range of ids, as its URDF loader gives them);
synthetic trees numbered otherwise (``bintree:N`` is breadth-first) only get the
recursive references (rnea, nle, aba), see :func:`supports`.

Continuous joints (``revolute_unb``) of a synthetic tree: pin 4.1's Python binding of
``JointModelRevoluteUnboundedUnaligned`` has only the default constructor (no axis), so
the joint model is taken from Pinocchio's own URDF parser on a one-joint URDF
(``RUBX``/``RUBY``/``RUBZ`` for a coordinate axis, the unaligned joint otherwise).

Pinocchio's ``aba``, ``computeMinverse`` and constrained algorithms refuse mimic joints; the
rows' references fall back to what it computes (see :mod:`gen.algorithms.pinocchio`).

Importing this module requires ``pinocchio`` (the ``pin`` wheel); :func:`available`
tells whether it is importable without raising.
"""
from __future__ import annotations

import functools

import numpy as np

from .algorithms import ALGORITHMS
from .backend import NUMPY
from .constraint_spec import as_constraint_set
from .errors import RbdgenError
from .model import Model
from .robots import load_robot


def available() -> bool:
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return False
    return True


def _pin():
    try:
        import pinocchio as pin
    except ImportError:
        raise RbdgenError("Pinocchio is not installed (pip install pin)") from None
    return pin


def depth_first(model: Model) -> bool:
    """Whether every subtree of ``model`` is a contiguous range of body indices."""
    size = [1] * model.nbodies
    for i in reversed(range(model.nbodies)):
        if model.bodies[i].parent >= 0:
            size[model.bodies[i].parent] += size[i]
    return all(i in model.ancestors(j) for i in range(model.nbodies) for j in range(i, i + size[i]))


def supports(model: Model, algorithm: str, cset=None, options=None) -> bool:
    """Whether :func:`reference` has a Pinocchio value for ``algorithm`` on ``model``
    (constrained algorithms: with the constraint set ``cset`` and the algorithm's
    ``options``), by the flags of the row's :class:`~gen.algorithms.registry.PinocchioRef`."""
    algo = ALGORITHMS[algorithm]
    ref = algo.pinocchio
    if ref is None or (ref.depth_first and not depth_first(model)):
        return False
    if model.has_mimic and (not ref.mimic or not depth_first(model)):   # aba/minv go through crba
        return False
    if not algo.constrained:
        return True
    if cset is None:
        return False
    cons = as_constraint_set(model, cset).constraints
    if not cons or any(c.unilateral for c in cons):
        return False
    if ref.joint1_only and any(c.body1 < 0 for c in cons):
        return False
    if ref.anchored_only and not all(c.anchored for c in cons):
        return False
    if ref.unit_weights and any(c.weight != 1.0 for c in cons):
        return False
    if ref.full_rank and not full_row_rank(model, as_constraint_set(model, cset)):
        return False
    return not (ref.iterate and (options or {}).get("tol") is not None)


def full_row_rank(model: Model, cset) -> bool:
    """Whether the constraint Jacobian has full row rank at a random configuration (its
    generic rank: a redundant set, such as a frame constrained twice, has less)."""
    q = model.random_q(np.random.default_rng(0))
    return bool(np.linalg.matrix_rank(cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)) == cset.m)


# --- models --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _from_urdf(path: str, floating_base: bool, lock_joints: tuple[str, ...] = (), mimic: bool = False):
    pin = _pin()
    model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer(), mimic=mimic) if floating_base \
        else pin.buildModelFromUrdf(path, mimic=mimic)
    if lock_joints:
        ids = [model.getJointId(j) for j in lock_joints]
        model = pin.buildReducedModel(model, ids, pin.neutral(model))
    return model


def _joint_model(pin, body):
    if body.kind == "free":
        return pin.JointModelFreeFlyer()
    if body.kind == "spherical":
        return pin.JointModelSpherical()
    if body.kind == "planar":
        return pin.JointModelPlanar()
    axis = np.asarray(body.axis, dtype=float)
    if body.kind == "helical":
        return pin.JointModelHelicalUnaligned(axis, float(body.pitch))
    if body.kind == "revolute":
        return pin.JointModelRevoluteUnaligned(axis)
    if body.kind == "prismatic":
        return pin.JointModelPrismaticUnaligned(axis)
    if body.kind == "revolute_unb":
        return _unbounded_joint(pin, tuple(float(a) for a in axis))
    raise RbdgenError(f"joint kind '{body.kind}' has no Pinocchio equivalent here")


URDF_CONTINUOUS = ('<robot name="continuous"><link name="parent"/><link name="child"/>'
                   '<joint name="joint" type="continuous"><parent link="parent"/><child link="child"/>'
                   '<axis xyz="{} {} {}"/></joint></robot>')


def _unbounded_joint(pin, axis: tuple):
    """Pinocchio's continuous joint about ``axis``, as its URDF parser builds it (the
    Python class has no axis constructor in pin 4.1; ``repr`` keeps every bit)."""
    urdf = URDF_CONTINUOUS.format(*(repr(a) for a in axis))
    return pin.buildModelFromXML(urdf).joints[1]


def _from_model(pin, model: Model):
    pm = pin.Model()
    pm.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
    ids = []
    turned = [b for b in model.bodies if b.angle_offset]
    if turned:      # only gen.canonical_frames' traced copies have one; the references take the model
        raise RbdgenError(f"{model.name}: Pinocchio's joints have no angle offset (joint '{turned[0].name}')")
    for b in model.bodies:
        parent = 0 if b.parent == -1 else ids[b.parent]
        placement = pin.SE3(np.asarray(b.placement.R, float), np.asarray(b.placement.p, float))
        jid = pm.addJoint(parent, _joint_model(pin, b), placement, b.name)
        inertia = pin.Inertia(float(b.inertia.mass), np.asarray(b.inertia.com, float),
                              np.asarray(b.inertia.I_c, float))
        pm.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
        ids.append(jid)
    for i, b in enumerate(model.bodies):          # mimic joints: added as their kind, then turned
        if b.mimic is not None:
            pm = pin.transformJointIntoMimic(pm, ids[b.mimic.primary], ids[i], float(b.mimic.multiplier),
                                             float(b.mimic.offset))
    return pm


def pin_model(robot: Model | str):
    """The Pinocchio model matching ``robot`` (an rbdgen Model or a robot spec): from the
    same file with the same options (floating base, locked joints), see the module
    docstring; the caller's own copy."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    if str(model.source).lower().endswith(".urdf"):
        floating = bool(model.bodies) and model.bodies[0].kind == "free"
        # a copy: the parsed model is cached, and a caller may add frames or change it
        pm = _from_urdf(str(model.source), floating, tuple(model.locked), model.has_mimic).copy()
        if (pm.nq, pm.nv) != (model.nq, model.nv):
            raise RbdgenError(f"{model.source}: Pinocchio's model has nq={pm.nq}, nv={pm.nv}, rbdgen's "
                              f"nq={model.nq}, nv={model.nv}; no reference")
        return pm
    return _from_model(_pin(), model)


def reference(robot, algorithm: str, *inputs, pmodel=None, cset=None, options=None):
    """Pinocchio's value of ``algorithm`` at ``inputs``, in rbdgen's output shapes, or
    ``None`` when there is no Pinocchio counterpart (:func:`supports`).  Constrained
    algorithms take the constraint set ``cset`` (a :class:`~gen.constraints.ConstraintSet`
    or a spec) and the algorithm's ``options`` (``iterations``, ``max_iter``, ``mu``,
    ``restitution``); their reference is the leading outputs ((ddq, lam), (v_plus,
    impulse), the matrix).  A derivative row's reference is every output: the derivatives,
    then the value they are taken at, which Pinocchio leaves in ``data`` (``tau``, ``ddq``,
    ``lambda_c``, ``dq_after``, ``impulse_c``)."""
    pin = _pin()
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = ALGORITHMS[algorithm]
    if algo.constrained and cset is not None:
        cset = as_constraint_set(model, cset)
    if not supports(model, algorithm, cset, options):
        return None
    pm = pmodel if pmodel is not None else pin_model(model)
    xs = [np.asarray(x, dtype=float).reshape(-1) for x in inputs]
    extra = {"cset": cset, "options": options or {}} if algo.constrained else {}
    return algo.pinocchio.fn(pin, pm, pm.createData(), *xs, **extra)
