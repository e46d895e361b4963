"""Pinocchio as an independent reference for ``rbdgen verify`` (DESIGN §4, §6e).

:func:`pin_model` builds the Pinocchio model of a robot the way rbdgen builds its own:
for a named robot, ``pin.buildModelFromUrdf`` on the same URDF (with a
``JointModelFreeFlyer`` root when floating) followed by ``pin.buildReducedModel`` at the
neutral configuration for its locked joints (panda's fingers); for a URDF path, the
same with a free-flyer when the rbdgen model has one; for a synthetic tree, the model
assembled joint by joint from the :class:`~gen.model.Model` (same placements, axes and
inertias).  :data:`PIN_ALGORITHMS` maps rbdgen algorithm names to Pinocchio calls that
return rbdgen's outputs (vectors 1-D, matrices 2-D, tuples for several outputs):

==============  ============================================================
rnea            ``pin.rnea``
nle             ``pin.nonLinearEffects``
crba            ``pin.crba``, upper triangle symmetrised
aba             ``pin.aba``
ltdl            ``pin.cholesky.decompose``: Pinocchio's ``M = U D U^T`` is
                rbdgen's ``L^T D L`` with ``L = U^T``
ltl             ``L = sqrt(D) U^T``
crba_solve      ``pin.cholesky.solve`` on the decomposed ``M``
==============  ============================================================

Algorithms missing from the table have no Pinocchio reference (reported as n/a).
Pinocchio's CRBA and sparse Cholesky assume joints numbered depth-first (each subtree a
contiguous range of ids, as its URDF loader gives them); synthetic trees numbered
otherwise (``bintree:N`` is breadth-first) only get the recursive references (rnea, nle,
aba), see :func:`supports`.
Importing this module requires ``pinocchio`` (the ``pin`` wheel); :func:`available`
tells whether it is importable without raising.
"""
from __future__ import annotations

import functools

import numpy as np

from .errors import RbdgenError
from .model import Model


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


def _symmetrise(M: np.ndarray) -> np.ndarray:
    return np.triu(M) + np.triu(M, 1).T


def _crba(pin, pm, pd, q):
    return _symmetrise(np.array(pin.crba(pm, pd, q)))


def _ltdl(pin, pm, pd, q):
    pin.crba(pm, pd, q)
    pin.cholesky.decompose(pm, pd)
    return np.array(pd.U).T.copy(), np.array(pd.D).copy()


def _ltl(pin, pm, pd, q):
    L, D = _ltdl(pin, pm, pd, q)
    return (np.sqrt(D)[:, None] * L,)


def _crba_solve(pin, pm, pd, q, b):
    pin.crba(pm, pd, q)
    pin.cholesky.decompose(pm, pd)
    return np.array(pin.cholesky.solve(pm, pd, np.array(b, dtype=float)))


PIN_ALGORITHMS = {
    "rnea": lambda pin, pm, pd, q, v, a: np.array(pin.rnea(pm, pd, q, v, a)),
    "nle": lambda pin, pm, pd, q, v: np.array(pin.nonLinearEffects(pm, pd, q, v)),
    "crba": _crba,
    "aba": lambda pin, pm, pd, q, v, tau: np.array(pin.aba(pm, pd, q, v, tau)),
    "ltdl": _ltdl,
    "ltl": lambda pin, pm, pd, q: _ltl(pin, pm, pd, q)[0],
    "crba_solve": _crba_solve,
}


RECURSIVE_ONLY = ("rnea", "nle", "aba")


def depth_first(model: Model) -> bool:
    """Whether every subtree of ``model`` is a contiguous range of body indices."""
    size = [1] * model.nbodies
    for i in reversed(range(model.nbodies)):
        if model.bodies[i].parent >= 0:
            size[model.bodies[i].parent] += size[i]
    return all(i in model.ancestors(j) for i in range(model.nbodies) for j in range(i, i + size[i]))


def supports(model: Model, algorithm: str) -> bool:
    """Whether :func:`reference` has a Pinocchio value for ``algorithm`` on ``model``."""
    if algorithm not in PIN_ALGORITHMS:
        return False
    return algorithm in RECURSIVE_ONLY or depth_first(model)


# --- models --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _named_model(name: str):
    from .robots.named import NAMED_ROBOTS, robots_dir

    pin = _pin()
    rel, floating_base, lock_joints, _ = NAMED_ROBOTS[name]
    return _from_urdf(pin, str(robots_dir() / rel), floating_base, lock_joints)


def _from_urdf(pin, path: str, floating_base: bool, lock_joints=()):
    model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base \
        else pin.buildModelFromUrdf(path)
    if lock_joints:
        ids = [model.getJointId(j) for j in lock_joints]
        model = pin.buildReducedModel(model, ids, pin.neutral(model))
    return model


def _joint_model(pin, body):
    if body.kind == "free":
        return pin.JointModelFreeFlyer()
    axis = np.asarray(body.axis, dtype=float)
    if body.kind == "revolute":
        return pin.JointModelRevoluteUnaligned(axis)
    if body.kind == "prismatic":
        return pin.JointModelPrismaticUnaligned(axis)
    if body.kind == "revolute_unb":
        return pin.JointModelRevoluteUnboundedUnaligned(axis)
    raise RbdgenError(f"joint kind '{body.kind}' has no Pinocchio equivalent here")


def _from_model(pin, model: Model):
    pm = pin.Model()
    pm.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
    ids = []
    for b in model.bodies:
        parent = 0 if b.parent == -1 else ids[b.parent]
        placement = pin.SE3(np.asarray(b.placement.R, float), np.asarray(b.placement.p, float))
        jid = pm.addJoint(parent, _joint_model(pin, b), placement, b.name)
        inertia = pin.Inertia(float(b.inertia.mass), np.asarray(b.inertia.com, float),
                              np.asarray(b.inertia.I_c, float))
        pm.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
        ids.append(jid)
    return pm


def pin_model(robot: Model | str):
    """The Pinocchio model matching ``robot`` (an rbdgen Model or a robot spec)."""
    from .robots import load_robot
    from .robots.named import NAMED_ROBOTS

    pin = _pin()
    name = robot.name if isinstance(robot, Model) else str(robot)
    if name in NAMED_ROBOTS:
        return _named_model(name)
    model = robot if isinstance(robot, Model) else load_robot(robot)
    if str(model.source).endswith(".urdf"):
        floating = bool(model.bodies) and model.bodies[0].kind == "free"
        return _from_urdf(pin, str(model.source), floating)
    return _from_model(pin, model)


def reference(robot, algorithm: str, *inputs, pmodel=None):
    """Pinocchio's value of ``algorithm`` at ``inputs``, in rbdgen's output shapes, or
    ``None`` when there is no Pinocchio counterpart."""
    from .robots import load_robot

    pin = _pin()
    model = robot if isinstance(robot, Model) else load_robot(robot)
    if not supports(model, algorithm):
        return None
    fn = PIN_ALGORITHMS[algorithm]
    pm = pmodel if pmodel is not None else pin_model(model)
    pd = pm.createData()
    return fn(pin, pm, pd, *[np.asarray(x, dtype=float).reshape(-1) for x in inputs])
