"""Inverse joint-space inertia ``M(q)^-1`` without forming ``M``.

The ABA-based algorithm of Carpentier & Mansard, "Analytical Derivatives of Rigid Body
Dynamics Algorithms", RSS 2018, §IV (Pinocchio's ``computeMinverse``): column ``j`` of
``M^-1`` is ABA's ``ddq`` for ``tau = e_j`` at zero velocity and zero gravity, and the
``nv`` right-hand sides share one articulated-inertia sweep.  LOCAL frames; columns are
kept per dof, so only structural non-zeros are computed:

1. backward, ``i = n..1``: ``U_i = IA_i S_i``, ``D_i = S_i^T U_i``;
   ``u_i = E_i - S_i^T P_i`` where ``P_i`` (6 x nv, non-zero on the dofs below ``i``)
   collects the children's bias forces and ``E_i`` selects ``tau_i``;
   ``R_i = D_i^-1 u_i`` (non-zero on the dofs of the subtree of ``i``);
   ``P_parent += X_i^* (P_i + U_i R_i)``, ``IA_parent += X_i^* (IA_i - U_i D_i^-1 U_i^T) X_i^-1``;
2. forward, ``i = 1..n``, on the columns ``j >= idx_v(i)`` only (the upper triangle):
   ``A'_i = X_i^-1 A_parent`` (``A_0 = 0``), ``M^-1[i, j] = R_i - D_i^-1 U_i^T A'_i``,
   ``A_i = A'_i + S_i M^-1[i, j]``;
3. the lower triangle is the upper one mirrored.

Valid for any numbering with ``parent[i] < i``.  With mimic joints (``gen.model``) the
recursion does not apply: ``M^-1`` is the dense LDL^T solve of CRBA's ``M`` against the
identity (:func:`~gen.algorithms.aba.mimic_solve`).  Shapes: q (nq,1) -> Minv (nv,nv).
"""
from __future__ import annotations

import numpy as np

from ..kinematics import qslice, subspaces
from ..model import Model
from ..spatial import act_force, inertia_matrix, inv_motion, parent_transform
from .aba import mimic_solve
from .articulated import dsolve, joint_factor, pass_inertia


def minv(model: Model, q, *, be):
    n, nv = model.nbodies, model.nv
    if model.has_mimic:
        Minv = mimic_solve(model, q, be.eye(nv), be)
        return (0.5 * (Minv + Minv.T),)
    S = subspaces(model, be)
    liMi = [parent_transform(b, qslice(model, i, q), be) for i, b in enumerate(model.bodies)]
    IA = [inertia_matrix(b.inertia, be) for b in model.bodies]
    P = [dict() for _ in range(n)]              # body -> {dof: 6x1 bias force column}
    U, R, Dfac = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        b = model.bodies[i]
        U[i], Dfac[i] = joint_factor(model, i, S, IA, be)
        cols = sorted(set(P[i]) | set(range(b.idx_v, b.idx_v + b.nv)))
        R[i] = {j: dsolve(Dfac[i], _unit(b, j, be) - S[i].T @ P[i].get(j, be.zeros(6, 1)), be) for j in cols}
        if b.parent == -1:
            continue
        pass_inertia(model, i, q, IA, U[i], dsolve(Dfac[i], U[i].T, be), be)
        for j in cols:
            f = U[i] @ R[i][j] if j not in P[i] else P[i][j] + U[i] @ R[i][j]
            g = act_force(liMi[i], f, be)
            P[b.parent][j] = g if j not in P[b.parent] else P[b.parent][j] + g
    be.mark("backward", *[r for Ri in R for r in Ri.values()])

    Minv = be.zeros(nv, nv)
    A = [None] * n                               # body -> {dof: 6x1 acceleration column}
    for i, b in enumerate(model.bodies):
        A[i] = {}
        for j in range(b.idx_v, nv):
            a = None if b.parent == -1 or j not in A[b.parent] else inv_motion(liMi[i], A[b.parent][j], be)
            row = R[i].get(j)
            if a is not None:
                row = (be.zeros(b.nv, 1) if row is None else row) - dsolve(Dfac[i], U[i].T @ a, be)
            if row is None:
                continue                         # structural zero: j outside both subtree and ancestors' reach
            for k in range(b.nv):
                Minv[b.idx_v + k, j] = row[k, 0]
                Minv[j, b.idx_v + k] = row[k, 0]
            A[i][j] = S[i] @ row if a is None else a + S[i] @ row
    be.mark("forward", Minv)
    return (Minv,)


def _unit(body, j: int, be):
    """Column ``j`` of the selector ``E_i`` (nv_i x 1): 1 at the joint's own dof ``j``."""
    e = be.zeros(body.nv, 1)
    if body.idx_v <= j < body.idx_v + body.nv:
        e[j - body.idx_v, 0] = 1.0
    return e


def pinocchio_minv(pin, pm, pd, q, **_):
    """Pinocchio's ``computeMinverse`` (upper triangle), symmetrised; with mimic joints
    (which it refuses) the inverse of its ``crba``."""
    if len(pm.mimicking_joints) > 0:
        M = np.array(pin.crba(pm, pd, q))
        return np.linalg.inv(np.triu(M) + np.triu(M, 1).T)
    M = np.array(pin.computeMinverse(pm, pd, q))
    return np.triu(M) + np.triu(M, 1).T
