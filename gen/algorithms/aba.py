"""Articulated-body algorithm, forward dynamics ``ddq = M(q)^-1 (tau - b(q, v))``.

Featherstone 2008, Table 7.1, LOCAL frames, Pinocchio's conventions.  Passes:

1. forward:  ``v_i``, ``c_i = v_i x S_i qd_i``, ``IA_i = I_i``, ``pA_i = v_i x* I_i v_i``;
2. backward: ``U_i = IA_i S_i``, ``D_i = S_i^T U_i``, ``u_i = tau_i - S_i^T pA_i``,
   ``Ia = IA_i - U_i D_i^-1 U_i^T``, ``pa = pA_i + Ia c_i + U_i D_i^-1 u_i``,
   ``IA_parent += X^* Ia X^-1``, ``pA_parent += X^* pa``;
3. forward:  ``a' = X^-1 a_parent + c_i``, ``ddq_i = D_i^-1 (u_i - U_i^T a')``,
   ``a_i = a' + S_i ddq_i``, with ``a_0 = -g``.

Operation savings (all exact in real arithmetic): one reciprocal ``1/D_i`` per 1-DoF
joint (``be.reciprocal``, so the products stay multiplications: talos 236 -> 55
divisions), then products; a multi-DoF joint's ``D_i`` is factored once (unrolled
LDL^T, reciprocal pivots) and solved against ``U_i^T`` only if it has a parent, and
against one right-hand side in pass 3.  ``Ia S_i = U_i - U_i D_i^-1 D_i = 0``, so for a
joint along a coordinate axis the matching row and column of ``Ia`` are set to
structural zeros (CasADi's on-the-fly simplification finds this only on some trees:
talos aba 15800 -> 15619 operations).
With mimic joints (``gen.model``) the articulated recursion does not apply (one dof
moves bodies on several branches; Pinocchio's ``aba`` refuses them): ``ddq`` is the
dense solve ``M^-1 (tau - b)`` of :func:`~gen.algorithms.crba.crba` and
:func:`~gen.algorithms.rnea.nle` (unrolled LDL^T, :mod:`gen.algorithms.dense`).
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1).
"""
from __future__ import annotations

import numpy as np

from ..kinematics import (
    forward_velocities,
    gravity_acceleration,
    qslice,
    subspaces,
    vslice,
)
from ..model import Model
from ..spatial import (
    act_force,
    cross_force,
    inertia_matrix,
    inertia_to_parent,
    inv_motion,
    motion_subspace,
)
from .crba import crba
from .dense import ldlt_factor, ldlt_solve
from .rnea import nle


def aba(model: Model, q, v, tau, *, be, fext=None):
    """``fext``: optional list of external spatial forces per body (LOCAL frame)."""
    if model.has_mimic and fext is None:
        return (mimic_solve(model, q, tau - nle(model, q, v, be=be)[0], be),)
    n = model.nbodies
    S = subspaces(model, be)
    Xup, vel, c = forward_velocities(model, q, v, S, be)
    IA, pA = [], []
    for i, b in enumerate(model.bodies):
        I = inertia_matrix(b.inertia, be)
        IA.append(I)
        p = cross_force(vel[i], I @ vel[i], be)
        pA.append(p if fext is None or fext[i] is None else p - fext[i])
    be.mark("forward", *c, *IA, *pA)

    U, u, Dinv, Dfac = [None] * n, [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        b = model.bodies[i]
        U[i] = IA[i] @ S[i]
        D = S[i].T @ U[i]
        u[i] = vslice(model, i, tau) - S[i].T @ pA[i]
        if b.nv == 1:
            Dinv[i] = be.reciprocal(D[0, 0])
        else:
            Dfac[i] = ldlt_factor(D, be)
        if b.parent == -1:
            continue
        DinvUt = U[i].T * Dinv[i] if b.nv == 1 else ldlt_solve(Dfac[i], U[i].T, be)
        Ia = articulated_inertia(IA[i], U[i], DinvUt, null_axis(b), be)
        pa = pA[i] + Ia @ c[i] + U[i] @ _solve_u(b, Dinv[i], Dfac[i], u[i], be)
        IA[b.parent] = IA[b.parent] + inertia_to_parent(b, qslice(model, i, q), Ia, be)
        pA[b.parent] = pA[b.parent] + act_force(Xup[i], pa, be)
    be.mark("backward", *U, *u, *[d for d in Dinv if d is not None])

    a0 = gravity_acceleration(model, be)
    acc, ddq = [], []
    for i, b in enumerate(model.bodies):
        ap = a0 if b.parent == -1 else acc[b.parent]
        a = inv_motion(Xup[i], ap, be) + c[i]
        qdd = _solve_u(b, Dinv[i], Dfac[i], u[i] - U[i].T @ a, be)
        ddq.append(qdd)
        acc.append(a + S[i] @ qdd)
    out = be.vcat(ddq)
    be.mark("acceleration", out)
    return (out,)


def _solve_u(body, Dinv, Dfac, rhs, be):
    """``D^-1 rhs`` for a 1-DoF (scalar inverse) or multi-DoF (LDL^T factor) joint."""
    return rhs * Dinv if body.nv == 1 else ldlt_solve(Dfac, rhs, be)


def null_axis(body):
    """k if the joint's motion subspace is the coordinate axis e_k (then row and column k
    of ``Ia`` are exactly zero, since ``Ia S = 0``), else None."""
    if body.nv != 1:
        return None
    s = motion_subspace(body).reshape(-1)
    k = int(np.argmax(np.abs(s)))
    return k if s[k] == 1.0 and np.count_nonzero(s) == 1 else None


def articulated_inertia(IA, U, DinvUt, axis, be):
    """``Ia = IA - U D^-1 U^T`` (symmetric): upper triangle computed and mirrored; the
    row and column ``axis`` (:func:`null_axis`) are exactly zero since ``Ia S = 0``."""
    Ia = be.zeros(6, 6)
    for r in range(6):
        for col in range(r, 6):
            if axis in (r, col):
                continue
            Ia[r, col] = IA[r, col] - (U[r:r + 1, :] @ DinvUt[:, col:col + 1])[0, 0]
            Ia[col, r] = Ia[r, col]
    return Ia


def mimic_solve(model: Model, q, rhs, be):
    """``M(q)^-1 rhs`` by a dense LDL^T of CRBA's ``M`` (models with mimic joints)."""
    M = crba(model, q, be=be)[0]
    be.mark("crba", M)
    return ldlt_solve(ldlt_factor(M, be), rhs, be)
