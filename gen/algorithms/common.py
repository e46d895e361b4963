"""Pieces shared by several algorithms: slicing joint coordinates and the forward
kinematic/velocity pass (Featherstone 2008 Table 5.1 lines 3-8, in LOCAL frames)."""
from __future__ import annotations

from ..model import Model
from ..spatial import cross_motion, inv_motion, motion_subspace, parent_transform


def qslice(model: Model, i: int, q):
    b = model.bodies[i]
    return q[b.idx_q:b.idx_q + b.nq, 0:1]


def vslice(model: Model, i: int, v):
    b = model.bodies[i]
    return v[b.idx_v:b.idx_v + b.nv, 0:1]


def subspaces(model: Model, be):
    """Motion subspaces S_i (6 x nv_i), cast once."""
    return [be.asarray(motion_subspace(b)) for b in model.bodies]


def forward_velocities(model: Model, q, v, S, be):
    """Per body: ``Xup_i = parentMi(q_i)``, ``v_i = Xup_i^-1 v_parent + S_i qd_i`` and
    the velocity-product acceleration ``c_i = v_i x (S_i qd_i)`` (S constant locally)."""
    Xup, vel, c = [], [], []
    for i, b in enumerate(model.bodies):
        X = parent_transform(b, qslice(model, i, q), be)
        vJ = S[i] @ vslice(model, i, v)
        vi = vJ if b.parent == -1 else inv_motion(X, vel[b.parent], be) + vJ
        Xup.append(X)
        vel.append(vi)
        c.append(cross_motion(vi, vJ, be))
    return Xup, vel, c


def gravity_acceleration(model: Model, be):
    """Spatial acceleration of the world that accounts for gravity: ``a_0 = -g``."""
    return be.asarray([-model.gravity[0], -model.gravity[1], -model.gravity[2], 0.0, 0.0, 0.0])
