"""Forward kinematics, frame Jacobians and their drift terms, LOCAL convention.

* ``oMi``: world placement of each body, ``oMi = oM_parent * parentMi(q_i)``;
* ``oMf = oMi * iMf`` for a frame f on body i;
* the LOCAL frame Jacobian ``J_f`` (6 x nv): column block of an ancestor joint j is
  ``fMj S_j`` (S_j expressed in frame f), zero elsewhere — Pinocchio's
  ``getFrameJacobian(..., LOCAL)``;
* drift: the frame's spatial acceleration at ``ddq = 0`` without gravity,
  ``dJ qd = fMi (a_i)`` with ``a_i = X^-1 a_parent + v_i x S_i qd_i``, and its classical
  (point) acceleration ``a_lin + w x v_lin`` (Pinocchio's
  ``getFrameClassicalAcceleration``), the two drift terms constraints need.
"""
from __future__ import annotations

from ..model import Model
from ..spatial import (act_motion, compose, const_transform, cross3, inv_motion, lin, ang,
                       parent_transform)
from .common import forward_velocities, qslice, subspaces


def body_placements(model: Model, q, be):
    """World placements ``oMi`` (list of (R, p)) of all bodies."""
    oM = []
    for i, b in enumerate(model.bodies):
        X = parent_transform(b, qslice(model, i, q), be)
        oM.append(X if b.parent == -1 else compose(oM[b.parent], X))
    return oM


def frame_placement(model: Model, name: str, q, *, be):
    """``oMf`` of the named frame as (R 3x3, p 3x1)."""
    f = model.frame(name)
    iMf = const_transform(f.placement, be)
    if f.body == -1:
        return iMf
    return compose(body_placements(model, q, be)[f.body], iMf)


def frame_jacobian(model: Model, name: str, q, *, be):
    """LOCAL 6 x nv Jacobian of the named frame."""
    f = model.frame(name)
    J = be.zeros(6, model.nv)
    if f.body == -1:
        return J
    S = subspaces(model, be)
    Xup = [parent_transform(b, qslice(model, i, q), be) for i, b in enumerate(model.bodies)]
    fMj = _inverse(const_transform(f.placement, be))      # frame <- body i
    j = f.body
    while j != -1:
        b = model.bodies[j]
        for k in range(b.nv):
            J[:, b.idx_v + k:b.idx_v + k + 1] = act_motion(fMj, S[j][:, k:k + 1], be)
        fMj = compose(fMj, _inverse(Xup[j]))               # frame <- parent of j
        j = b.parent
    return J


def frame_velocity_and_drift(model: Model, name: str, q, v, *, be):
    """LOCAL spatial velocity of the frame and its spatial acceleration at ddq = 0 with no
    gravity (``dJ qd``).  Returns (v_f, a_f), each 6x1."""
    f = model.frame(name)
    if f.body == -1:
        return be.zeros(6, 1), be.zeros(6, 1)
    S = subspaces(model, be)
    Xup, vel, c = forward_velocities(model, q, v, S, be)
    acc = []
    for i, b in enumerate(model.bodies):
        acc.append(c[i] if b.parent == -1 else inv_motion(Xup[i], acc[b.parent], be) + c[i])
    iMf = const_transform(f.placement, be)
    return inv_motion(iMf, vel[f.body], be), inv_motion(iMf, acc[f.body], be)


def classical_drift(model: Model, name: str, q, v, *, be):
    """Classical acceleration of the frame origin at ddq = 0 (LOCAL, 3x1):
    ``a_lin + w x v_lin``."""
    vf, af = frame_velocity_and_drift(model, name, q, v, be=be)
    return lin(af) + cross3(ang(vf), lin(vf), be)


def _inverse(M):
    R, p = M
    return R.T, -(R.T @ p)
