"""MuJoCo as the independent reference for MJCF models, as :mod:`gen.pinref` is Pinocchio
for URDF ones: the same file compiled by MuJoCo, MuJoCo's own functions on the state,
the result converted to rbdgen's (Pinocchio's) conventions.

==============  ====================================================================
algorithm       MuJoCo's computation
==============  ====================================================================
``crba``        ``mj_fullM`` after ``mj_forward``
``nle``         ``qfrc_bias`` after ``mj_forward``
``rnea``        ``mj_rne(flg_acc = 1)`` with ``qacc`` set after ``mj_forward``
``aba``         ``qacc`` of ``mj_forward`` with ``qfrc_applied = tau``
``crba_solve``  ``mj_solveM`` (MuJoCo's ``L^T D L`` factor of M) on ``b``
``minv``        ``mj_solveM`` on the identity
==============  ====================================================================

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

from .errors import RbdgenError
from .mjcf import _mujoco, acceleration_to_mujoco, compile_mjcf, mujoco_warnings, q_to_mujoco, v_from_mujoco, \
    v_to_mujoco
from .model import Model

#: the algorithms with a MuJoCo reference
ALGORITHMS = ("rnea", "nle", "crba", "aba", "crba_solve", "minv")
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
    loaded from an MJCF file, an algorithm of :data:`ALGORITHMS`, no constraints, and the
    ``mujoco`` package installed."""
    constrained = cset is not None and len(getattr(cset, "constraints", cset) or ()) > 0
    return algorithm in ALGORITHMS and not constrained and is_mjcf(model) and available()


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


def reference(model: Model, algorithm: str, *inputs, cset=None):
    """MuJoCo's value of ``algorithm`` at rbdgen's ``inputs`` (Pinocchio's conventions,
    :func:`gen.run`'s inputs), in rbdgen's conventions and output shapes, or ``None`` where
    :func:`supports` says there is none."""
    if not supports(model, algorithm, cset):
        return None
    mujoco = _mujoco()
    m, d = mujoco_model(model)
    xs = [np.asarray(x, dtype=float).reshape(-1) for x in inputs]
    q = xs[0]
    nv = model.nv
    if algorithm == "aba":
        _, v, tau = xs
        _forward(mujoco, m, d, model, q, v, tau)
        return v_from_mujoco(model, q, d.qacc - acceleration_to_mujoco(model, q, v, np.zeros(nv)))
    if algorithm in ("nle", "rnea"):
        v = xs[1]
        _forward(mujoco, m, d, model, q, v)
        drift = acceleration_to_mujoco(model, q, v, np.zeros(nv))
        if algorithm == "nle":
            out = np.zeros(nv)
            mujoco.mj_mulM(m, d, out, drift)
            return v_from_mujoco(model, q, d.qfrc_bias + out)
        d.qacc[:] = acceleration_to_mujoco(model, q, v, xs[2])
        out = np.zeros(nv)
        mujoco.mj_rne(m, d, 1, out)
        return v_from_mujoco(model, q, out)
    _forward(mujoco, m, d, model, q)
    T = _velocity_map(model, q)
    if algorithm == "crba":
        return T.T @ _full_inertia(mujoco, m, d) @ T
    rhs = np.ascontiguousarray((T @ xs[1])[None, :] if algorithm == "crba_solve" else T.T)
    x = np.zeros_like(rhs)
    mujoco.mj_solveM(m, d, x, rhs)
    return T.T @ x[0] if algorithm == "crba_solve" else T.T @ x.T


__all__ = ["ALGORITHMS", "available", "supports", "reference", "mujoco_model", "prepare"]
