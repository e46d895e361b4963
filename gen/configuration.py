"""The configuration manifold: Pinocchio's ``integrate`` and its tangent map.

Derivatives with respect to q are taken in the tangent space, Pinocchio's convention
``q + delta = integrate(q, delta)`` (``delta`` in R^nv), so derivative matrices move
between rbdgen and Pinocchio unchanged.  Per joint kind (:mod:`gen.model`):

* revolute, prismatic, helical: ``q + delta``; a mimic joint has no coordinate;
* planar, ``q = (x, y, cos t, sin t)`` with LOCAL ``(vx, vy, w)``: SE(2) ``M exp(delta)``,
  ``(x, y)' = (x, y) + R(t) V(w) (vx, vy)`` with
  ``V(w) = [[sin w, cos w - 1], [1 - cos w, sin w]] / w`` (``1`` as ``w -> 0``) and the
  angle advanced by ``w`` (Pinocchio's ``SpecialEuclideanOperationTpl<2>``);
* revolute_unb, ``q = (cos t, sin t)``: rotated by ``delta``,
  ``(c cos d - s sin d, s cos d + c sin d)``;
* free, ``q = (p, quat)`` with body-frame velocity ``(v, w)``: ``M exp6(delta)``
  (Pinocchio's ``SE3`` integration), ``p' = p + R V(w) v`` with
  ``V(w) = 1 + (1 - cos t)/t^2 [w]x + (t - sin t)/t^3 [w]x^2``, ``t = |w|``, and
  ``quat' = quat * exp(w / 2)`` (Hamilton product, (x, y, z, w) storage).

:func:`tangent_map` is ``d integrate(q, delta) / d delta`` at ``delta = 0`` (nq x nv),
over the backend: ``1`` for revolute/prismatic/helical, ``(-s, c)`` for revolute_unb,
``d(x, y)/d(vx, vy) = R(t)`` and ``d(cos, sin)/dw = (-s, c)`` for planar, and for a
free-flyer ``dp/dv = R(quat)``, ``dquat/dw = 1/2 [[qw 1 + [qv]x], [-qv^T]]`` (the same
quaternion block for a spherical joint).  A
function ``f(q)`` has tangent-space Jacobian ``df/dq . tangent_map(q)`` (the AD route).
"""
from __future__ import annotations

import numpy as np

from .backend import NUMPY
from .model import Model
from .spatial import quat_rotation


def _quat_mul(a, b):
    """Hamilton product of quaternions stored (x, y, z, w)."""
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), [aw * bw - av @ bv]])


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def integrate(model: Model, q, delta) -> np.ndarray:
    """``integrate(q, delta)`` (NumPy), Pinocchio's convention (module docstring)."""
    q = np.asarray(q, dtype=float).reshape(-1)
    d = np.asarray(delta, dtype=float).reshape(-1)
    out = q.copy()
    for b in model.bodies:
        iq, iv = b.idx_q, b.idx_v
        if b.mimic is not None:
            continue
        if b.kind in ("revolute", "prismatic", "helical"):
            out[iq] = q[iq] + d[iv]
        elif b.kind == "planar":
            c, s, w = q[iq + 2], q[iq + 3], d[iv + 2]
            cw, sw = np.cos(w), np.sin(w)
            if abs(w) > 1e-14:
                t = np.array([sw * d[iv] + (cw - 1.0) * d[iv + 1], (1.0 - cw) * d[iv] + sw * d[iv + 1]]) / w
            else:
                t = d[iv:iv + 2]
            out[iq:iq + 2] = q[iq:iq + 2] + np.array([c * t[0] - s * t[1], s * t[0] + c * t[1]])
            out[iq + 2:iq + 4] = c * cw - s * sw, s * cw + c * sw
        elif b.kind == "revolute_unb":
            c, s, cd, sd = q[iq], q[iq + 1], np.cos(d[iv]), np.sin(d[iv])
            out[iq:iq + 2] = c * cd - s * sd, s * cd + c * sd
        elif b.kind == "spherical":          # q (x) exp(w / 2), w in the joint frame
            out[iq:iq + 4] = _quat_mul(q[iq:iq + 4], _half_angle_quat(d[iv:iv + 3]))
        else:                                # free: SE(3) exponential of (v, w), body frame
            v, w = d[iv:iv + 3], d[iv + 3:iv + 6]
            quat = q[iq + 3:iq + 7]
            R = quat_rotation(*quat, be=NUMPY)
            t = np.linalg.norm(w)
            W = _skew(w)
            if t < 1e-6:      # Taylor branch of V(w)
                V = np.eye(3) + 0.5 * W + W @ W / 6.0
            else:
                V = np.eye(3) + (1 - np.cos(t)) / t ** 2 * W + (t - np.sin(t)) / t ** 3 * (W @ W)
            out[iq:iq + 3] = q[iq:iq + 3] + np.asarray(R) @ (V @ v)
            out[iq + 3:iq + 7] = _quat_mul(quat, _half_angle_quat(w))
    return out


def _half_angle_quat(w) -> np.ndarray:
    """exp(w / 2) as a quaternion (x y z w): the rotation by the angle |w| about w."""
    t = np.linalg.norm(w)
    if t < 1e-6:                             # Taylor branch
        return np.concatenate([0.5 * w, [1.0 - t * t / 8.0]])
    return np.concatenate([np.sin(t / 2) * w / t, [np.cos(t / 2)]])


def tangent_map(model: Model, q, be):
    """``d integrate(q, delta) / d delta`` at 0 (nq x nv), over the backend."""
    T = be.zeros(model.nq, model.nv)
    for b in model.bodies:
        iq, iv = b.idx_q, b.idx_v
        if b.mimic is not None:
            continue
        if b.kind in ("revolute", "prismatic", "helical"):
            T[iq, iv] = 1.0
        elif b.kind == "planar":
            c, s = q[iq + 2, 0], q[iq + 3, 0]
            T[iq, iv], T[iq, iv + 1], T[iq + 1, iv], T[iq + 1, iv + 1] = c, -s, s, c
            T[iq + 2, iv + 2] = -s
            T[iq + 3, iv + 2] = c
        elif b.kind == "revolute_unb":
            T[iq, iv] = -q[iq + 1, 0]
            T[iq + 1, iv] = q[iq, 0]
        else:                       # free: (p, quat); spherical: quat alone
            at = 3 if b.kind == "free" else 0
            x, y, z, w = (q[iq + at + k, 0] for k in range(4))
            if b.kind == "free":
                T[iq:iq + 3, iv:iv + 3] = quat_rotation(x, y, z, w, be)
            Q = [[w, -z, y], [z, w, -x], [-y, x, w], [-x, -y, -z]]    # qw 1 + [qv]x ; -qv^T
            for r in range(4):
                for c in range(3):
                    T[iq + at + r, iv + at + c] = 0.5 * Q[r][c]
    return T
