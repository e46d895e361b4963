"""Recursive Newton-Euler inverse dynamics, ``tau = M(q) a + b(q, v)``.

Featherstone, *Rigid Body Dynamics Algorithms* (2008), Table 5.1, in LOCAL body frames
with Pinocchio's conventions (gravity enters as the world acceleration ``a_0 = -g``).
Shapes: q (nq,1), v (nv,1), a (nv,1) -> tau (nv,1).  A mimic joint (``gen.model``) moves
with ``multiplier * (v, a)`` of its primary and its ``S^T f`` is added to the primary's
effort times the multiplier: ``tau = G^T tau_ext`` (Pinocchio 3's JointModelMimic).
"""
from __future__ import annotations

from ..kinematics import (
    dof_columns,
    forward_velocities,
    gravity_acceleration,
    subspaces,
    vslice,
)
from ..model import Model
from ..spatial import act_force, cross_force, inertia_matrix, inv_motion


def rnea(model: Model, q, v, a, *, be, fext=None):
    """``M a + b`` (minus ``J^T`` of the LOCAL external forces ``fext[i]``, None where there
    is none: the residual of the constrained dynamics, :func:`.proximal.relative_residual`)."""
    S = subspaces(model, be, mimic=True)
    liMi, vel, c = forward_velocities(model, q, v, S, be)
    a0 = gravity_acceleration(model, be)
    acc, f = [], []
    for i, b in enumerate(model.bodies):
        # a_i = liMi[i]^-1 a_parent + S_i qdd_i + c_i
        ap = a0 if b.parent == -1 else acc[b.parent]
        ai = inv_motion(liMi[i], ap, be) + S[i] @ vslice(model, i, a) + c[i]
        acc.append(ai)
        # f_i = I_i a_i + v_i x* I_i v_i
        I = inertia_matrix(b.inertia, be)
        fi = I @ ai + cross_force(vel[i], I @ vel[i], be)
        f.append(fi if fext is None or fext[i] is None else fi - fext[i])
    be.mark("forward", *acc, *f)
    tau = [None] * model.nbodies
    for i in reversed(range(model.nbodies)):
        b = model.bodies[i]
        tau[i] = S[i].T @ f[i]                      # tau_i = S_i^T f_i
        if b.parent != -1:
            f[b.parent] = f[b.parent] + act_force(liMi[i], f[i], be)
    out = be.vcat(tau) if not model.has_mimic else _project(model, tau, be)
    be.mark("backward", out)
    return (out,)


def nle(model: Model, q, v, *, be):
    """Nonlinear effects ``b(q, v) = rnea(q, v, 0)`` (Coriolis, centrifugal, gravity)."""
    return rnea(model, q, v, be.zeros(model.nv, 1), be=be)


def _project(model: Model, tau, be):
    """``G^T tau_ext``: per dof, the sum of the efforts of the joints acting on it, each
    times its factor (1, or a mimic joint's multiplier)."""
    out = [None] * model.nv
    for i in range(model.nbodies):
        for k, (d, s) in enumerate(dof_columns(model, i)):
            t = tau[i][k, 0] if s == 1.0 else s * tau[i][k, 0]
            out[d] = t if out[d] is None else out[d] + t
    return be.vcat(out)
