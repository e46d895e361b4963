"""Articulated-body algorithm, forward dynamics ``ddq = M(q)^-1 (tau - b(q, v))``.

Featherstone 2008, Table 7.1, LOCAL frames, Pinocchio's conventions.  Passes:

1. forward:  ``v_i``, ``c_i = v_i x S_i qd_i``, ``IA_i = I_i``, ``pA_i = v_i x* I_i v_i``;
2. backward: ``U_i = IA_i S_i``, ``D_i = S_i^T U_i``, ``u_i = tau_i - S_i^T pA_i``,
   ``Ia = IA_i - U_i D_i^-1 U_i^T``, ``pa = pA_i + Ia c_i + U_i D_i^-1 u_i``,
   ``IA_parent += X^* Ia X^-1``, ``pA_parent += X^* pa``;
3. forward:  ``a' = X^-1 a_parent + c_i``, ``ddq_i = D_i^-1 (u_i - U_i^T a')``,
   ``a_i = a' + S_i ddq_i``, with ``a_0 = -g``.

For a 1-DoF joint D_i is a scalar; a free-flyer's 6x6 D_i is solved by an unrolled
LDL^T.  Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1).
"""
from __future__ import annotations

from ..model import Model
from ..spatial import act_force, cross_force, inertia_matrix, inertia_to_parent, inv_motion
from .common import forward_velocities, gravity_acceleration, qslice, subspaces, vslice
from .dense import ldlt_solve


def aba(model: Model, q, v, tau, *, be, fext=None):
    """``fext``: optional list of external spatial forces per body (LOCAL frame)."""
    S = subspaces(model, be)
    Xup, vel, c = forward_velocities(model, q, v, S, be)
    IA, pA = [], []
    for i, b in enumerate(model.bodies):
        I = inertia_matrix(b.inertia, be)
        IA.append(I)
        p = cross_force(vel[i], I @ vel[i], be)
        pA.append(p if fext is None or fext[i] is None else p - fext[i])
    be.mark("forward", *c, *IA, *pA)

    U, Dinv_u, Dinv_Ut = [None] * model.nbodies, [None] * model.nbodies, [None] * model.nbodies
    for i in reversed(range(model.nbodies)):
        b = model.bodies[i]
        U[i] = IA[i] @ S[i]
        D = S[i].T @ U[i]
        u = vslice(model, i, tau) - S[i].T @ pA[i]
        if b.nv == 1:
            Dinv_u[i] = u / D[0, 0]
            Dinv_Ut[i] = U[i].T / D[0, 0]
        else:
            sol = ldlt_solve(D, be.hcat([u, U[i].T]), be)
            Dinv_u[i], Dinv_Ut[i] = sol[:, 0:1], sol[:, 1:]
        if b.parent != -1:
            Ia = _minus_sym_product(IA[i], U[i], Dinv_Ut[i], be)
            pa = pA[i] + Ia @ c[i] + U[i] @ Dinv_u[i]
            IA[b.parent] = IA[b.parent] + inertia_to_parent(b, qslice(model, i, q), Ia, be)
            pA[b.parent] = pA[b.parent] + act_force(Xup[i], pa, be)
    be.mark("backward", *U, *Dinv_u, *Dinv_Ut)

    a0 = gravity_acceleration(model, be)
    acc, ddq = [], []
    for i, b in enumerate(model.bodies):
        ap = a0 if b.parent == -1 else acc[b.parent]
        a = inv_motion(Xup[i], ap, be) + c[i]
        qdd = Dinv_u[i] - Dinv_Ut[i] @ a
        ddq.append(qdd)
        acc.append(a + S[i] @ qdd)
    return (be.vcat(ddq),)


def _minus_sym_product(IA, U, DinvUt, be):
    """``Ia = IA - U D^-1 U^T`` (symmetric): upper triangle computed, then mirrored."""
    Ia = be.zeros(6, 6)
    for r in range(6):
        for col in range(r, 6):
            Ia[r, col] = IA[r, col] - (U[r:r + 1, :] @ DinvUt[:, col:col + 1])[0, 0]
            Ia[col, r] = Ia[r, col]
    return Ia
