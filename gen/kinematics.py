"""Joint coordinates and kinematics shared by the constraints and the algorithms, LOCAL
convention (one stage before both: gen.constraints and gen.algorithms import it).

Slicing joint coordinates and the forward kinematic/velocity pass (Featherstone 2008
Table 5.1 lines 3-8, in LOCAL frames); forward kinematics, frame Jacobians and their
drift terms:

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

from dataclasses import replace

import numpy as np

from .errors import RbdgenError
from .model import Model
from .spatial import (
    act_motion,
    ang,
    compose,
    const_transform,
    cross3,
    cross_motion,
    inv_motion,
    lin,
    motion_subspace,
    parent_transform,
)


def qslice(model: Model, i: int, q):
    """Body i's joint coordinates; a mimic joint's ``multiplier * q_primary + offset``."""
    b = model.bodies[i]
    if b.mimic is not None:
        return b.mimic.multiplier * q[b.idx_q:b.idx_q + 1, 0:1] + b.mimic.offset
    return q[b.idx_q:b.idx_q + b.nq, 0:1]


def vslice(model: Model, i: int, v):
    """Body i's joint velocity (or acceleration); a mimic joint's ``multiplier * v_primary``."""
    b = model.bodies[i]
    if b.mimic is not None:
        return b.mimic.multiplier * v[b.idx_v:b.idx_v + 1, 0:1]
    return v[b.idx_v:b.idx_v + b.nv, 0:1]


def dof_columns(model: Model, i: int) -> list[tuple[int, float]]:
    """For each column k of S_i, the dof it acts on and the factor: ``(idx_v + k, 1)``,
    or ``(idx_v of the primary, multiplier)`` for a mimic joint (the columns of the
    reduced Jacobian are ``J_ext G``, ``G`` the constant mimic map)."""
    b = model.bodies[i]
    if b.mimic is not None:
        return [(b.idx_v, b.mimic.multiplier)]
    return [(b.idx_v + k, 1.0) for k in range(b.nv)]



def mimic_extension(model: Model) -> tuple[Model, np.ndarray]:
    """``(ext, G)`` for a model with mimic joints: ``ext`` is the same tree with every
    mimic joint an independent coordinate (the *extended tree*), ``G`` (ext.nv x nv) the
    constant map of :func:`dof_columns`, so ``v_ext = G v``, ``a_ext = G a`` and
    ``tau = G^T tau_ext``.  An algorithm written for trees then applies by the chain rule,
    e.g. ``d tau / d q = G^T (d tau_ext / d q_ext) G`` (mimic joints are revolute or
    prismatic, so their tangent map is the identity)."""
    ext = Model(f"{model.name} (mimic joints extended)",
                [replace(b, mimic=None) for b in model.bodies], model.frames, model.gravity.copy(),
                model.source, model.locked)
    G = np.zeros((ext.nv, model.nv))
    for i, b in enumerate(ext.bodies):
        for k, (d, s) in enumerate(dof_columns(model, i)):
            G[b.idx_v + k, d] = s
    return ext, G


def extended_q(model: Model, q, be):
    """The extended tree's configuration (:func:`mimic_extension`): each body's
    :func:`qslice` in body order."""
    return be.vcat([qslice(model, i, q) for i in range(model.nbodies)])


def extended_state(model: Model, q, vectors, be):
    """``(ext, q_ext, [G x for x in vectors], G)`` (:func:`mimic_extension`, ``G`` cast
    once) for a model with mimic joints; ``(model, q, vectors, None)`` otherwise.  The
    derivative algorithms run their world-frame passes on ``ext`` and map the results
    back by the chain rule: ``G^T X G`` for a joint-torque partial, ``X G`` for a
    constraint-row partial (``d q_ext / d q = G``, mimic joints being revolute or
    prismatic)."""
    if not model.has_mimic:
        return model, q, list(vectors), None
    ext, G = mimic_extension(model)
    G = be.asarray(G)
    return ext, extended_q(model, q, be), [G @ x for x in vectors], G


def chain(G, *partials, left: bool = False) -> tuple:
    """The partials of the extended tree (:func:`extended_state`) w.r.t. the model's
    ``q``, ``v``: ``X G`` (a constraint row's), with ``left`` ``G^T X G`` (a joint
    torque's); unchanged when ``G`` is None (no mimic joint), None entries passed on."""
    if G is None:
        return partials
    return tuple(None if X is None else (G.T @ X if left else X) @ G for X in partials)

def subspaces(model: Model, be, *, mimic: bool = False):
    """Motion subspaces S_i (6 x nv_i, a mimic joint's 6 x 1), cast once.  Callers that
    project mimic joints' columns (:func:`dof_columns`) pass ``mimic=True``; the others
    (the articulated-body and world-frame passes, whose one recursion per joint cannot
    couple the dofs of two joints) refuse a model with a mimic joint with one line.
    Every registered algorithm handles mimic joints on its own path (the dense or sparse
    solve of ``M``, the extended tree), so this guards internal callers."""
    if not mimic:
        for b in model.bodies:
            if b.mimic is not None:
                raise RbdgenError(
                    f"{model.name}: joint '{b.name}' mimics '{model.bodies[b.mimic.primary].name}' (URDF "
                    f"<mimic>): this articulated-body / world-frame pass does not handle mimic joints; run it "
                    f"on the extended tree (gen.kinematics.mimic_extension) or through a registered algorithm")
    return [be.asarray(motion_subspace(b)) for b in model.bodies]


def forward_velocities(model: Model, q, v, S, be):
    """Per body: ``liMi[i]``, the placement of body i in its parent's frame at ``q_i``
    (Pinocchio's ``data.liMi``; Featherstone's ``Xup`` is the motion transform of its
    inverse), ``v_i = liMi[i]^-1 v_parent + S_i qd_i`` and the velocity-product
    acceleration ``c_i = v_i x (S_i qd_i)`` (S constant locally)."""
    liMi, vel, c = [], [], []
    for i, b in enumerate(model.bodies):
        X = parent_transform(b, qslice(model, i, q), be)
        vJ = S[i] @ vslice(model, i, v)
        vi = vJ if b.parent == -1 else inv_motion(X, vel[b.parent], be) + vJ
        liMi.append(X)
        vel.append(vi)
        c.append(cross_motion(vi, vJ, be))
    return liMi, vel, c


def gravity_acceleration(model: Model, be):
    """Spatial acceleration of the world that accounts for gravity: ``a_0 = -g``."""
    return be.asarray([-model.gravity[0], -model.gravity[1], -model.gravity[2], 0.0, 0.0, 0.0])


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
    S = subspaces(model, be, mimic=True)
    liMi = [parent_transform(b, qslice(model, i, q), be) for i, b in enumerate(model.bodies)]
    fMj = _inverse(const_transform(f.placement, be))      # frame <- body i
    j = f.body
    while j != -1:
        b = model.bodies[j]
        for k, (d, s) in enumerate(dof_columns(model, j)):
            col = act_motion(fMj, S[j][:, k:k + 1], be)
            J[:, d:d + 1] = J[:, d:d + 1] + s * col if model.has_mimic else col
        fMj = compose(fMj, _inverse(liMi[j]))               # frame <- parent of j
        j = b.parent
    return J


def frame_velocity_and_drift(model: Model, name: str, q, v, *, be):
    """LOCAL spatial velocity of the frame and its spatial acceleration at ddq = 0 with no
    gravity (``dJ qd``).  Returns (v_f, a_f), each 6x1."""
    f = model.frame(name)
    if f.body == -1:
        return be.zeros(6, 1), be.zeros(6, 1)
    S = subspaces(model, be, mimic=True)
    liMi, vel, c = forward_velocities(model, q, v, S, be)
    acc = []
    for i, b in enumerate(model.bodies):
        acc.append(c[i] if b.parent == -1 else inv_motion(liMi[i], acc[b.parent], be) + c[i])
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
