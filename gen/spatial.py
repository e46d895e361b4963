"""Spatial algebra over a backend, in Pinocchio's conventions (docs/DESIGN.md §4).

A transform is a pair ``(R, p)`` (``x_parent = R x_child + p``); motions and forces
are 6x1 columns ``[linear; angular]``.  Transforms act through their rotation and
translation separately, never as 6x6 matrices, so traced graphs stay small
(Featherstone, *Rigid Body Dynamics Algorithms*, §2.8 and Table 2.5):

* ``act_motion``   ``(v, w) -> (R v + p x R w, R w)``          (child -> parent)
* ``inv_motion``   ``(v, w) -> (R^T (v - p x w), R^T w)``      (parent -> child)
* ``act_force``    ``(f, n) -> (R f, R n + p x R f)``          (child -> parent)
* ``cross_motion`` ``(v, w) x (v2, w2) = (w x v2 + v x w2, w x w2)``
* ``cross_force``  ``(v, w) x* (f, n) = (w x f, w x n + v x f)``

Constants (rotations, axes, inertias) are cast to the backend once per call site with
``be.asarray`` so CasADi sees literal zeros and ones and drops them.
"""
from __future__ import annotations

import numpy as np

from .model import Body, Inertia, skew
from .portable import cos_sin


def cross3(a, b, be):
    """``a x b`` for 3x1 columns, written out so SX drops zero factors."""
    return be.vcat([a[1, 0] * b[2, 0] - a[2, 0] * b[1, 0],
                    a[2, 0] * b[0, 0] - a[0, 0] * b[2, 0],
                    a[0, 0] * b[1, 0] - a[1, 0] * b[0, 0]])


def lin(m):
    return m[0:3, 0:1]


def ang(m):
    return m[3:6, 0:1]


def act_motion(M, m, be):
    R, p = M
    w = R @ ang(m)
    return be.vcat([R @ lin(m) + cross3(p, w, be), w])


def inv_motion(M, m, be):
    R, p = M
    return be.vcat([R.T @ (lin(m) - cross3(p, ang(m), be)), R.T @ ang(m)])


def act_force(M, f, be):
    R, p = M
    fl = R @ lin(f)
    return be.vcat([fl, R @ ang(f) + cross3(p, fl, be)])


def cross_motion(v, m, be):
    return be.vcat([cross3(ang(v), lin(m), be) + cross3(lin(v), ang(m), be),
                    cross3(ang(v), ang(m), be)])


def cross_force(v, f, be):
    return be.vcat([cross3(ang(v), lin(f), be),
                    cross3(ang(v), ang(f), be) + cross3(lin(v), lin(f), be)])


def compose(A, B):
    """``A * B`` for transforms."""
    return A[0] @ B[0], A[0] @ B[1] + A[1]


SNAP_TOL = 1e-14


def snap(a: np.ndarray) -> np.ndarray:
    """Round float noise in model constants (``cos(pi/2) = 6e-17``) to exact 0 and +-1 so
    the traced graph drops those terms; changes values by at most ``SNAP_TOL``."""
    a = np.where(np.abs(a) < SNAP_TOL, 0.0, a)
    return np.where(np.abs(np.abs(a) - 1.0) < SNAP_TOL, np.sign(a), a)


def const_transform(M, be):
    """A model SE3 as a backend transform pair (its ``traced`` values when it has them)."""
    if M.traced is not None:
        return M.traced
    return be.asarray(snap(M.R)), be.asarray(snap(M.p))


# --- joints --------------------------------------------------------------------------

def _axis_index(axis: np.ndarray) -> int | None:
    """k if ``axis == +e_k``, else None (exploit axis-aligned joints, docs/DESIGN.md §3.2)."""
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1.0
        if np.allclose(axis, e, atol=0.0, rtol=0.0):
            return k
    return None


def axis_rotation(axis: np.ndarray, c, s, be):
    """Rotation by angle (cos c, sin s) about a constant unit ``axis``.
    Rodrigues: ``R = c 1 + s [u]x + (1 - c) u u^T``; about +x, +y, +z written directly."""
    k = _axis_index(axis)
    if k is not None:
        i, j = (k + 1) % 3, (k + 2) % 3
        R = be.zeros(3, 3)
        R[k, k] = 1.0
        R[i, i] = c
        R[j, j] = c
        R[j, i] = s
        R[i, j] = -s
        return R
    u = [float(x) for x in axis]
    t = 1.0 - c
    R = be.zeros(3, 3)
    for r in range(3):
        for col in range(3):
            R[r, col] = t * (u[r] * u[col]) + (c if r == col else 0.0)
    R[2, 1] += s * u[0]
    R[1, 2] -= s * u[0]
    R[0, 2] += s * u[1]
    R[2, 0] -= s * u[1]
    R[1, 0] += s * u[2]
    R[0, 1] -= s * u[2]
    return R


def quat_rotation(x, y, z, w, be):
    """Rotation of the unit quaternion (x, y, z, w), Eigen's ``toRotationMatrix``."""
    R = be.zeros(3, 3)
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - z * w)
    R[0, 2] = 2 * (x * z + y * w)
    R[1, 0] = 2 * (x * y + z * w)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - x * w)
    R[2, 0] = 2 * (x * z - y * w)
    R[2, 1] = 2 * (y * z + x * w)
    R[2, 2] = 1 - 2 * (x * x + y * y)
    return R


def joint_motion(body: Body, qi, be):
    """The joint's own transform ``jMi(q_i)`` (rotation/translation of the joint); a mimic
    joint's ``q_i`` is already ``multiplier * q_primary + offset`` (``kinematics.qslice``).
    Planar: ``(Rz(theta), (x, y, 0))`` with ``q = (x, y, cos theta, sin theta)``; helical:
    ``(Rot(u, q), pitch q u)`` (Pinocchio's ``JointModelPlanar`` / ``HelicalUnaligned``).
    A body's ``angle_offset`` t (:mod:`gen.canonical_frames`) turns the rotation of a
    revolute or helical joint to ``q + t`` (one addition before the sin and cos) and a
    ``revolute_unb`` joint's ``(c, s)`` by t (angle-sum formulas, constant cos t, sin t)."""
    t0 = body.angle_offset
    if body.kind == "revolute":
        a = qi[0, 0] + t0 if t0 else qi[0, 0]
        return axis_rotation(body.axis, be.cos(a), be.sin(a), be), be.zeros(3, 1)
    if body.kind == "revolute_unb":
        c, s = qi[0, 0], qi[1, 0]
        if t0:
            ct, st = cos_sin(t0)                  # the same bits everywhere (gen.portable)
            c, s = c * ct - s * st, s * ct + c * st
        return axis_rotation(body.axis, c, s, be), be.zeros(3, 1)
    if body.kind == "prismatic":
        return be.eye(3), be.asarray(body.axis) * qi[0, 0]
    if body.kind == "spherical":
        return quat_rotation(qi[0, 0], qi[1, 0], qi[2, 0], qi[3, 0], be), be.zeros(3, 1)
    if body.kind == "planar":
        return axis_rotation(np.array([0.0, 0.0, 1.0]), qi[2, 0], qi[3, 0], be), \
            be.vcat([qi[0, 0], qi[1, 0], 0.0])
    if body.kind == "helical":
        t = qi[0, 0]
        a = t + t0 if t0 else t
        return axis_rotation(body.axis, be.cos(a), be.sin(a), be), be.asarray(body.pitch * body.axis) * t
    if body.kind == "free":
        return quat_rotation(qi[3, 0], qi[4, 0], qi[5, 0], qi[6, 0], be), qi[0:3, 0:1]
    raise ValueError(body.kind)


def motion_subspace(body: Body) -> np.ndarray:
    """Constant 6 x nv motion subspace S of the joint in its own (LOCAL) frame: ``[0; u]``
    (revolute), ``[u; 0]`` (prismatic), ``[pitch u; u]`` (helical), ``[0; 1_3]``
    (spherical: the local angular velocity), ``[e_x e_y 0; 0 0 e_z]`` (planar: local
    ``vx, vy, wz``), ``1_6`` (free).  A mimic joint's is its kind's (one column), its
    velocity being ``multiplier * v_primary``."""
    if body.kind in ("revolute", "revolute_unb"):
        return np.concatenate([np.zeros(3), body.axis]).reshape(6, 1)
    if body.kind == "prismatic":
        return np.concatenate([body.axis, np.zeros(3)]).reshape(6, 1)
    if body.kind == "helical":
        return np.concatenate([body.pitch * np.asarray(body.axis), body.axis]).reshape(6, 1)
    if body.kind == "spherical":
        return np.eye(6)[:, 3:6]
    if body.kind == "planar":
        return np.eye(6)[:, [0, 1, 5]]
    return np.eye(6)


def parent_transform(body: Body, qi, be):
    """``parentMi(q_i) = placement * jMi(q_i)``."""
    return compose(const_transform(body.placement, be), joint_motion(body, qi, be))


def inertia_to_parent(body: Body, qi, I6, be):
    """``X^* I X^-1`` for ``X = parentMi(q_i)``, applied as the joint's own motion first
    (an axis rotation or a translation, cheap) and the constant placement second, rather
    than through the composed rotation, which is dense whenever the placement rotates."""
    return _through_joint(body, qi, I6, transform_inertia6, be)


def _through_joint(body: Body, qi, Y, transform, be):
    """``transform(parentMi(q_i), Y)`` applied as ``transform(placement,
    transform(jMi(q_i), Y))``, the placement step skipped when it is the identity (and
    not traced as symbols)."""
    inner = transform(joint_motion(body, qi, be), Y, be)
    plc = body.placement
    if plc.traced is None and np.array_equal(snap(plc.R), np.eye(3)) and not np.any(snap(plc.p)):
        return inner
    return transform(const_transform(plc, be), inner, be)


# --- inertias ------------------------------------------------------------------------

def inertia_matrix(inertia: Inertia, be):
    """Constant 6x6 spatial inertia of a body, about its origin."""
    return be.asarray(inertia.matrix())


def transform_inertia6(M, I6, be):
    """Express a symmetric 6x6 spatial (composite or articulated) inertia given in the
    child frame in the parent frame: ``X^* I X^{-1}`` with ``M = parentMchild``.  Block
    form with ``I = [[A, B], [B^T, C]]``: rotate each block (``R A R^T`` ...), then shift
    by ``P = [p]x``: ``[[A, B - A P], [(B - A P)^T, C + P B + (P B)^T - P A P]]``.
    Symmetric blocks are computed on their upper triangle and mirrored, so the result is
    exactly symmetric and no product is formed twice."""
    R, p = M
    A = _rotate_sym(R, I6[0:3, 0:3], be)
    B = R @ I6[0:3, 3:6] @ R.T
    C = _rotate_sym(R, I6[3:6, 3:6], be)
    P = skew3(p, be)
    AP = A @ P
    top_right = B - AP
    PB = P @ B
    PAP = P @ AP
    out = be.zeros(6, 6)
    out[0:3, 0:3] = A
    out[0:3, 3:6] = top_right
    out[3:6, 0:3] = top_right.T
    for i in range(3):
        for j in range(i, 3):
            out[3 + i, 3 + j] = C[i, j] + PB[i, j] + PB[j, i] - PAP[i, j]
            out[3 + j, 3 + i] = out[3 + i, 3 + j]
    return out


def _rotate_sym(R, A, be):
    """``R A R^T`` for symmetric A, upper triangle computed and mirrored."""
    T = R @ A
    out = be.zeros(3, 3)
    for i in range(3):
        for j in range(i, 3):
            out[i, j] = T[i, 0] * R[j, 0] + T[i, 1] * R[j, 1] + T[i, 2] * R[j, 2]
            out[j, i] = out[i, j]
    return out


def skew3(p, be):
    P = be.zeros(3, 3)
    P[0, 1] = -p[2, 0]
    P[0, 2] = p[1, 0]
    P[1, 0] = p[2, 0]
    P[1, 2] = -p[0, 0]
    P[2, 0] = -p[1, 0]
    P[2, 1] = p[0, 0]
    return P


# --- rigid-body inertias in 10-parameter form (for composite inertias) ---------------
#
# A rigid (or composite rigid) body's spatial inertia about a frame's origin is
# ``[[m 1, -[h]x], [[h]x, Ib]]`` with ``h = m c`` and ``Ib = I_c - m [c]x [c]x``
# (Featherstone 2008 eq. 2.63).  Keeping (m, h, Ib) instead of the 6x6 matrix makes sums
# linear and lets transforms skip the ``m 1`` block, which stays ``m 1``.

def _rigid_parts(I6: np.ndarray):
    """``(m, h, Ib)`` of a constant 6x6 inertia as NumPy values; it must have the
    rigid-body form."""
    m, B = I6[0, 0], I6[3:6, 0:3]
    h = np.array([B[2, 1], B[0, 2], B[1, 0]])
    rigid = np.allclose(I6[0:3, 0:3], m * np.eye(3), rtol=0, atol=1e-12 * max(1.0, abs(m))) and \
        np.allclose(B, skew(h), rtol=0, atol=1e-12 * max(1.0, np.abs(B).max())) and np.allclose(I6[0:3, 3:6], B.T)
    if not rigid:
        raise ValueError("rigid_inertia: the 6x6 inertia is not of rigid-body form")
    return m, h, I6[3:6, 3:6]


def rigid_inertia(inertia: Inertia, be):
    """(m, h, Ib) of a body's constant 6x6 inertia (read from ``inertia.matrix()`` so
    augmented inertias, e.g. proxLTLs' constraint terms, are included), as backend
    values.  The matrix must have the rigid-body form."""
    I6 = inertia.matrix()
    if not isinstance(I6, np.ndarray):   # proxLTLs' terms scaled by a run-time 1/rho: rigid by construction
        B = I6[3:6, 0:3]
        return I6[0, 0], be.vcat([B[2, 1], B[0, 2], B[1, 0]]), I6[3:6, 3:6]
    m, h, Ib = _rigid_parts(I6)
    return be.asarray([[m]])[0, 0], be.asarray(h), be.asarray(Ib)


def placed_inertia(M, inertia: Inertia, be):
    """(m, h, Ib) of a body's constant inertia placed by ``M = (R, p)`` (``oMi``), in the
    centre-of-mass form: with ``c = h / m`` and the rotational inertia about the centre of
    mass ``Ic = Ib - m (|c|^2 1 - c c^T)`` folded at trace time, ``c_w = R c + p``,
    ``h' = m c_w`` and ``Ib' = R Ic R^T + m (|c_w|^2 1 - c_w c_w^T)`` (parallel axes:
    diagonal ``Ir_ii + m (c_j^2 + c_k^2)``, off-diagonal ``Ir_ij - m c_i c_j``), about a
    fifth fewer operations than :func:`rigid_transform` of ``(m, h, Ib)``, which a massless
    or run-time inertia keeps."""
    I6 = inertia.matrix()
    if not isinstance(I6, np.ndarray) or I6[0, 0] <= 0.0:
        return rigid_transform(M, rigid_inertia(inertia, be), be)
    m, h, Ib = _rigid_parts(I6)
    c = h / m
    Ic = Ib - m * (float(c @ c) * np.eye(3) - np.outer(c, c))
    R, p = M
    cw = R @ be.asarray(c) + p
    Ir = _rotate_sym(R, be.asarray(Ic), be)
    mc = m * cw
    out = be.zeros(3, 3)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        out[i, i] = Ir[i, i] + (mc[j, 0] * cw[j, 0] + mc[k, 0] * cw[k, 0])
        for jj in range(i + 1, 3):
            out[i, jj] = Ir[i, jj] - mc[i, 0] * cw[jj, 0]
            out[jj, i] = out[i, jj]
    return be.asarray([[m]])[0, 0], mc, out


def rigid_add(A, B):
    return A[0] + B[0], A[1] + B[1], A[2] + B[2]


def rigid_transform(M, Y, be):
    """(m, h, Ib) given in the child frame, expressed in the parent frame, ``M = pMc``:
    ``h' = y + m p`` with ``y = R h``, and
    ``Ib' = R Ib R^T - (p y^T + y p^T) + 2 (y.p) 1 - m (p p^T - |p|^2 1)``
    (from ``[a]x [b]x = b a^T - (a.b) 1``), upper triangle computed and mirrored."""
    R, p = M
    m, h, Ib = Y
    y = R @ h
    Ir = _rotate_sym(R, Ib, be)
    yp = (y.T @ p)[0, 0]
    pp = (p.T @ p)[0, 0]
    out = be.zeros(3, 3)
    for i in range(3):
        for j in range(i, 3):
            e = Ir[i, j] - (p[i, 0] * y[j, 0] + y[i, 0] * p[j, 0]) - m * (p[i, 0] * p[j, 0])
            if i == j:
                e = e + 2.0 * yp + m * pp
            out[i, j] = e
            out[j, i] = e
    return m, y + m * p, out


def rigid_apply(Y, mv, be):
    """Spatial force ``I (v, w) = (m v - h x w, h x v + Ib w)``."""
    m, h, Ib = Y
    return be.vcat([m * lin(mv) - cross3(h, ang(mv), be), cross3(h, lin(mv), be) + Ib @ ang(mv)])


def rigid_to_parent(body: Body, qi, Y, be):
    """``rigid_transform`` through ``parentMi(q_i)``: joint motion first, then the
    constant placement (skipped when it is the identity), as ``inertia_to_parent``."""
    return _through_joint(body, qi, Y, rigid_transform, be)
