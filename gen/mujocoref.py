"""MuJoCo as the independent reference for MJCF models, as :mod:`gen.pinref` is Pinocchio
for URDF ones: the same file compiled by MuJoCo, MuJoCo's own functions on the state,
the result converted to rbdgen's (Pinocchio's) conventions.

A registry row names its MuJoCo computation (``Algorithm.mujoco_ref``, a key of
:data:`REFERENCES`):

===================  ===============================================================
``mujoco_ref``       MuJoCo's computation (row)
===================  ===============================================================
``fullM``            ``mj_fullM`` after ``mj_forward`` (crba)
``bias``             ``qfrc_bias`` after ``mj_forward`` (nle)
``rne``              ``mj_rne(flg_acc = 1)`` with ``qacc`` set after ``mj_forward`` (rnea)
``qacc``             ``qacc`` of ``mj_forward`` with ``qfrc_applied = tau`` (aba)
``solveM``           ``mj_solveM`` (MuJoCo's ``L^T D L`` factor of M) on ``b`` (crba_solve)
``solveM_identity``  ``mj_solveM`` on the identity (minv)
===================  ===============================================================

**The model MuJoCo computes with** is the file's, made to compute the rigid-body equations
``M qacc + qfrc_bias = tau`` that rbdgen compiles (:mod:`gen.mjcf`, "What rbdgen computes"):
armature, damping, stiffness, friction loss and gravity compensation zeroed (joints,
tendons, actuators), fluid forces off (``density``, ``viscosity``, ``wind``), the
constraint solver, contacts, limits, equalities, actuation and passive forces disabled
(``opt.disableflags``), sleeping off, the Euler integrator (the ``discrete`` one would
replace M by its effective metric); then ``mj_setConst``, since MuJoCo caches quantities
computed from those fields at ``qpos0`` (``dof_M0``, the diagonal of M that ``mj_crb``
reuses for the "simple" dofs of a body hanging from the world: without it a slider with
armature keeps its armature in M).  Gravity and its ``<flag>`` stay the file's.  The
compiled and prepared ``MjModel`` and its ``MjData`` are cached per file (path, size,
modification time).

**Coordinates** (:mod:`gen.mjcf`): q by :func:`~gen.mjcf.q_to_mujoco`; a free joint's
linear velocity is in world axes in MuJoCo, ``qvel = T v`` with ``T = diag(R, 1, ...)``
orthogonal, so generalized forces map as ``qfrc = T tau``, accelerations as ``qacc = T a +
Tdot v`` (:func:`~gen.mjcf.acceleration_to_mujoco`), and

* ``M = T^T M_mj T``, ``M^-1 = T^T M_mj^-1 T``, ``M^-1 b = T^T M_mj^-1 T b``;
* ``nle = T^T (qfrc_bias + M_mj Tdot v)`` (``mj_mulM``);
* ``rnea = T^T mj_rne(qacc = T a + Tdot v)``;
* ``aba = T^T (qacc - Tdot v)`` with ``qfrc_applied = T tau``.

MuJoCo's warnings are collected, never written to ``MUJOCO_LOG.TXT``
(:func:`gen.mjcf.mujoco_warnings`).
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from .algorithms import ALGORITHMS
from .errors import RbdgenError
from .mjcf import _mujoco, acceleration_to_mujoco, compile_mjcf, mujoco_warnings, q_to_mujoco, v_from_mujoco, \
    v_to_mujoco
from .model import Model

#: model fields zeroed: armature, passive forces and friction loss
ZEROED = ("dof_armature", "dof_damping", "dof_dampingpoly", "dof_frictionloss", "jnt_stiffness",
          "jnt_stiffnesspoly", "tendon_armature", "tendon_damping", "tendon_dampingpoly", "tendon_stiffness",
          "tendon_stiffnesspoly", "tendon_frictionloss", "actuator_armature", "actuator_damping",
          "actuator_dampingpoly", "body_gravcomp")
#: opt.disableflags bits set (names of mjtDisableBit without ``mjDSBL_``; absent ones are
#: skipped: ``passive`` before MuJoCo split it into ``spring`` and ``damper``)
DISABLED = ("CONSTRAINT", "CONTACT", "EQUALITY", "LIMIT", "FRICTIONLOSS", "ACTUATION", "SPRING", "DAMPER",
            "PASSIVE")
#: opt.enableflags bits cleared
CLEARED = ("SLEEP",)

_CACHE: dict[tuple, tuple] = {}


def available() -> bool:
    try:
        _mujoco()
    except RbdgenError:
        return False
    return True


def is_mjcf(model: Model) -> bool:
    return str(model.source).lower().endswith(".xml") and os.path.isfile(str(model.source))


def supports(model: Model, algorithm: str, cset=None) -> bool:
    """Whether :func:`reference` has MuJoCo's value of ``algorithm`` on ``model``: a model
    loaded from an MJCF file, a registry row naming a MuJoCo computation (its
    ``mujoco_ref``, :data:`REFERENCES`), no constraints, and the ``mujoco`` package
    installed."""
    row = ALGORITHMS.get(algorithm)
    constrained = cset is not None and len(getattr(cset, "constraints", cset) or ()) > 0
    return row is not None and row.mujoco_ref is not None and not constrained and is_mjcf(model) and available()


def prepare(m, d) -> None:
    """Make ``m`` compute only the rigid-body equations (module docstring), then
    ``mj_setConst(m, d)``, which recomputes what MuJoCo derived from the changed fields."""
    mujoco = _mujoco()
    for field in ZEROED:
        if hasattr(m, field):
            getattr(m, field)[...] = 0.0
    m.opt.density = 0.0
    m.opt.viscosity = 0.0
    m.opt.wind[:] = 0.0
    m.opt.integrator = int(mujoco.mjtIntegrator.mjINT_EULER)
    for name in DISABLED:
        bit = getattr(mujoco.mjtDisableBit, f"mjDSBL_{name}", None)
        if bit is not None:
            m.opt.disableflags = int(m.opt.disableflags) | int(bit)
    for name in CLEARED:
        bit = getattr(mujoco.mjtEnableBit, f"mjENBL_{name}", None)
        if bit is not None:
            m.opt.enableflags = int(m.opt.enableflags) & ~int(bit)
    with mujoco_warnings():
        mujoco.mj_setConst(m, d)


def mujoco_model(model: Model):
    """``(MjModel, MjData)`` of ``model``'s file, prepared (:func:`prepare`), cached per
    file; refused if MuJoCo's sizes differ from rbdgen's."""
    path = os.path.realpath(str(model.source))
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        mujoco = _mujoco()
        with warnings.catch_warnings():         # the loader showed the compiler's warnings already
            warnings.simplefilter("ignore")
            m = compile_mjcf(path)
        d = mujoco.MjData(m)
        prepare(m, d)
        _CACHE[key] = (m, d)
    m, d = _CACHE[key]
    if (m.nq, m.nv) != (model.nq, model.nv):
        raise RbdgenError(f"{model.source}: MuJoCo's model has nq={m.nq}, nv={m.nv}, rbdgen's nq={model.nq}, "
                          f"nv={model.nv}; no MuJoCo reference")
    return m, d


def _full_inertia(mujoco, m, d) -> np.ndarray:
    """MuJoCo's dense M: ``mj_fullM(m, d, M)`` from MuJoCo 3.3 on, ``mj_fullM(m, M, d.qM)``
    before."""
    M = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, d, M)
    except TypeError:
        mujoco.mj_fullM(m, M, d.qM)
    return M


def _velocity_map(model: Model, q) -> np.ndarray:
    """T with MuJoCo's ``qvel = T v``."""
    return np.column_stack([v_to_mujoco(model, q, e) for e in np.eye(model.nv)]) if model.nv else np.zeros((0, 0))


def _forward(mujoco, m, d, model: Model, q, v=None, tau=None) -> None:
    """``mj_forward`` at rbdgen's ``(q, v)`` with ``qfrc_applied = T tau`` (zero by default)."""
    d.qpos[:] = q_to_mujoco(model, q)
    d.qvel[:] = 0.0 if v is None else v_to_mujoco(model, q, v)
    d.qfrc_applied[:] = 0.0 if tau is None else v_to_mujoco(model, q, tau)
    d.xfrc_applied[:] = 0.0
    d.ctrl[:] = 0.0
    with mujoco_warnings():
        mujoco.mj_forward(m, d)


def _qacc(mujoco, m, d, model, q, v, tau):
    """ddq: ``mj_forward``'s qacc less the drift of MuJoCo's coordinates."""
    _forward(mujoco, m, d, model, q, v, tau)
    return v_from_mujoco(model, q, d.qacc - acceleration_to_mujoco(model, q, v, np.zeros(model.nv)))


def _bias(mujoco, m, d, model, q, v):
    """b(q, v): ``qfrc_bias`` plus M times the drift (MuJoCo's bias is at its qacc = 0)."""
    _forward(mujoco, m, d, model, q, v)
    out = np.zeros(model.nv)
    mujoco.mj_mulM(m, d, out, acceleration_to_mujoco(model, q, v, np.zeros(model.nv)))
    return v_from_mujoco(model, q, d.qfrc_bias + out)


def _rne(mujoco, m, d, model, q, v, a):
    """tau: ``mj_rne`` with the acceleration term at MuJoCo's qacc of ``a``."""
    _forward(mujoco, m, d, model, q, v)
    d.qacc[:] = acceleration_to_mujoco(model, q, v, a)
    out = np.zeros(model.nv)
    mujoco.mj_rne(m, d, 1, out)
    return v_from_mujoco(model, q, out)


def _full_m(mujoco, m, d, model, q):
    """M: ``mj_fullM`` through the velocity map, ``T^T M_mj T``."""
    _forward(mujoco, m, d, model, q)
    T = _velocity_map(model, q)
    return T.T @ _full_inertia(mujoco, m, d) @ T


def _solve(mujoco, m, d, model, q, rhs_columns):
    """``T^-1 M_mj^-1 T^-T`` applied to columns: ``mj_solveM`` on ``T`` times them."""
    _forward(mujoco, m, d, model, q)
    T = _velocity_map(model, q)
    rhs = np.ascontiguousarray((T @ rhs_columns).T)
    x = np.zeros_like(rhs)
    mujoco.mj_solveM(m, d, x, rhs)
    return T.T @ x.T


def _solve_m(mujoco, m, d, model, q, b):
    """x = M^-1 b by ``mj_solveM``."""
    return _solve(mujoco, m, d, model, q, b[:, None])[:, 0]


def _inverse_m(mujoco, m, d, model, q):
    """M^-1 by ``mj_solveM`` on the identity."""
    return _solve(mujoco, m, d, model, q, np.eye(model.nv))


#: MuJoCo's computations a registry row names as its reference (``Algorithm.mujoco_ref``):
#: ``fn(mujoco, m, d, model, *inputs)`` in rbdgen's conventions, and whether it solves with
#: M (a solve loses eps * cond(M); a product a few hundred ulps)
REFERENCES = {"qacc": (_qacc, True), "bias": (_bias, False), "rne": (_rne, False), "fullM": (_full_m, False),
              "solveM": (_solve_m, True), "solveM_identity": (_inverse_m, True)}


def solves(algorithm: str) -> bool:
    """Whether the MuJoCo reference of ``algorithm`` solves with M (its error grows with
    cond(M)), not only multiplies."""
    return REFERENCES[ALGORITHMS[algorithm].mujoco_ref][1]


def reference(model: Model, algorithm: str, *inputs, cset=None):
    """MuJoCo's value of ``algorithm`` at rbdgen's ``inputs`` (Pinocchio's conventions,
    :func:`gen.run`'s inputs), in rbdgen's conventions and output shapes, or ``None`` where
    :func:`supports` says there is none."""
    if not supports(model, algorithm, cset):
        return None
    mujoco = _mujoco()
    m, d = mujoco_model(model)
    xs = [np.asarray(x, dtype=float).reshape(-1) for x in inputs]
    return REFERENCES[ALGORITHMS[algorithm].mujoco_ref][0](mujoco, m, d, model, *xs)


__all__ = ["REFERENCES", "available", "supports", "solves", "reference", "mujoco_model", "prepare"]
