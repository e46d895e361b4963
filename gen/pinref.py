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

Constrained algorithms (:data:`PIN_CONSTRAINED`) take the rbdgen
:class:`~gen.constraints.ConstraintSet` and the algorithm's options; the constraints
become ``pin.RigidConstraintModel`` with ``reference_frame = LOCAL``, ``joint1`` = frame
A's joint, ``joint2`` = frame B's joint or the world (0) with the anchor placement, and
the corrector gains ``cset.gains(c)`` (DESIGN §4; :mod:`gen.constraints`):

======================  ============================================================
prox_ltl, prox_ltls,    ``pin.constraintDynamics`` with ``ProximalSettings(accuracy=0,
constrained_aba,        mu, max_iter=K)``: from ``lam_0 = 0``, Pinocchio's K-th proximal
prox_pv                 iterate *is* rbdgen's K-th iterate (Carpentier 2021 eq. 18; the
                        iteration of :mod:`gen.algorithms.proximal`), so the reference
                        runs the kernel's fixed ``iterations`` (or ``max_iter``) at its
                        ``mu``: measured on solo12 at ``mu = 1e-2`` (where iterates 2, 3
                        and 4 differ by 1e-5..1e-7), iterate 3 agrees to 2e-15 with the
                        dual solvers and 2e-13 with the augmented-Lagrangian ones, iterates
                        2 and 4 do not.  (ddq, lam) are compared; a tolerance-driven run
                        (``tol``) stops on rbdgen's own test and has no reference.
impulse                 ``pin.impulseDynamics`` (restitution as the kernel's option) at
                        damping :data:`EXACT_MU`: the *converged* impact map.  Pinocchio
                        performs a single damped solve, which is rbdgen's first iterate
                        only, so compare a converged run (:data:`CONVERGED`), not the
                        kernel's K iterates.  (v_plus, impulse) are compared.
delassus, kkt_delassus  ``pin.computeDelassusMatrix`` with ``mu = 0``.
======================  ============================================================

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
matrix does not depend on them).

Algorithms missing from both tables have no Pinocchio reference (reported as n/a).
Pinocchio's CRBA, sparse Cholesky and constrained algorithms assume joints numbered
depth-first (each subtree a contiguous range of ids, as its URDF loader gives them);
synthetic trees numbered otherwise (``bintree:N`` is breadth-first) only get the
recursive references (rnea, nle, aba), see :func:`supports`.

Continuous joints (``revolute_unb``) of a synthetic tree: pin 4.1's Python binding of
``JointModelRevoluteUnboundedUnaligned`` has only the default constructor (no axis), so
the joint model is taken from Pinocchio's own URDF parser on a one-joint URDF
(``RUBX``/``RUBY``/``RUBZ`` for a coordinate axis, the unaligned joint otherwise).

Importing this module requires ``pinocchio`` (the ``pin`` wheel); :func:`available`
tells whether it is importable without raising.
"""
from __future__ import annotations

import functools

import numpy as np

from .constraints import as_constraint_set
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


# --- constrained algorithms ----------------------------------------------------------------

EXACT_MU = 1e-12          # impulseDynamics' damping for the exact impact map
# Options that make rbdgen's NumPy run converge, for the references that are a converged
# solution rather than the kernel's K-th iterate (module docstring).
CONVERGED = {"impulse": {"tol": 1e-13, "max_iter": 200}}


def _se3(pin, M):
    return pin.SE3(np.asarray(M.R, dtype=float), np.asarray(M.p, dtype=float))


def rigid_constraints(pin, pm, cset):
    """``(models, datas)``: one ``pin.RigidConstraintModel`` per constraint of ``cset``,
    LOCAL, ``joint1`` = frame A's joint, ``joint2`` = frame B's joint or the world (0),
    the frames' placements in their joints (the anchor placement for the world), the
    corrector gains ``cset.gains(c)``.  Pinocchio's joint ids are rbdgen's body indices
    + 1 (same joint order, DESIGN §4)."""
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for ci, c in enumerate(cset.constraints):
        kind = pin.ContactType.CONTACT_3D if c.kind == "3D" else pin.ContactType.CONTACT_6D
        cm = pin.RigidConstraintModel(kind, pm, c.body1 + 1, _se3(pin, c.placement1), c.body2 + 1,
                                      _se3(pin, c.placement2), pin.ReferenceFrame.LOCAL)
        cm.m_baumgarte_parameters.Kp, cm.m_baumgarte_parameters.Kd = cset.gains(ci)
        cms.append(cm)
        cds.append(cm.createData())
    return cms, cds


def _iterations(options: dict) -> int:
    """The proximal solvers' fixed iteration count: ``max_iter`` if given, else
    ``iterations`` (:class:`gen.algorithms.proximal.Proximal`)."""
    from .algorithms.proximal import DEFAULT_ITERATIONS

    for key in ("max_iter", "iterations"):
        if options.get(key) is not None:
            return int(options[key])
    return DEFAULT_ITERATIONS


def _constraint_dynamics(pin, pm, pd, cset, options, q, v, tau):
    """Pinocchio's K-th proximal iterate (accuracy 0: exactly K steps) at the same mu."""
    from .algorithms.proximal import DEFAULT_MU

    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    settings = pin.ProximalSettings(0.0, float(options.get("mu", DEFAULT_MU)), _iterations(options))
    ddq = pin.constraintDynamics(pm, pd, q, v, tau, cms, cds, settings)
    return np.array(ddq), np.array(pd.lambda_c)


def _impulse(pin, pm, pd, cset, options, q, v_minus):
    """The exact impact map: one solve at damping :data:`EXACT_MU`."""
    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    e = float(options.get("restitution", 0.0))
    v_plus = pin.impulseDynamics(pm, pd, q, v_minus, cms, cds, e, pin.ProximalSettings(0.0, EXACT_MU, 1))
    return np.array(v_plus), np.array(pd.impulse_c)


def _delassus(pin, pm, pd, cset, options, q):
    cms, cds = rigid_constraints(pin, pm, cset)
    return np.array(pin.computeDelassusMatrix(pm, pd, q, cms, cds, 0.0))


SOLVERS = ("prox_ltl", "prox_ltls", "constrained_aba", "prox_pv")
DELASSUS = ("delassus", "kkt_delassus")
# Pinocchio reads only joint1's side of a constraint whose frame A is fixed to the world
# (``A~B`` with A on the world) in these; constraintDynamics handles it.
JOINT1_ONLY = DELASSUS + ("impulse",)
PIN_CONSTRAINED = {**dict.fromkeys(SOLVERS, _constraint_dynamics), "impulse": _impulse,
                   **dict.fromkeys(DELASSUS, _delassus)}


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
    ``options``; see the module docstring for what has none)."""
    if algorithm in PIN_ALGORITHMS:
        return algorithm in RECURSIVE_ONLY or depth_first(model)
    if algorithm not in PIN_CONSTRAINED or cset is None or not depth_first(model):
        return False
    cset = as_constraint_set(model, cset)
    cons = cset.constraints
    if not cset.m or any(c.unilateral for c in cons):
        return False
    if algorithm in JOINT1_ONLY and any(c.body1 < 0 for c in cons):
        return False
    if algorithm in DELASSUS:
        return True
    if any(c.weight != 1.0 for c in cons):
        return False
    return algorithm not in SOLVERS or (options or {}).get("tol") is None


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


def reference(robot, algorithm: str, *inputs, pmodel=None, cset=None, options=None):
    """Pinocchio's value of ``algorithm`` at ``inputs``, in rbdgen's output shapes, or
    ``None`` when there is no Pinocchio counterpart.  Constrained algorithms take the
    constraint set ``cset`` (a :class:`~gen.constraints.ConstraintSet` or a spec) and the
    algorithm's ``options`` (``iterations``, ``max_iter``, ``mu``, ``restitution``); their
    reference is the leading outputs ((ddq, lam), (v_plus, impulse), the matrix)."""
    from .robots import load_robot

    pin = _pin()
    model = robot if isinstance(robot, Model) else load_robot(robot)
    options = options or {}
    if algorithm in PIN_CONSTRAINED and cset is not None:
        cset = as_constraint_set(model, cset)
    if not supports(model, algorithm, cset, options):
        return None
    pm = pmodel if pmodel is not None else pin_model(model)
    pd = pm.createData()
    xs = [np.asarray(x, dtype=float).reshape(-1) for x in inputs]
    if algorithm in PIN_ALGORITHMS:
        return PIN_ALGORITHMS[algorithm](pin, pm, pd, *xs)
    return PIN_CONSTRAINED[algorithm](pin, pm, pd, cset, options, *xs)
