"""proxPV: the Popov-Vereshchagin algorithm with proximal iterations on its dual.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(``../shared/papers/sathya2024-...``), Algorithm 4, in LOCAL frames, Pinocchio's sign
(``M ddq + b = tau + J^T lam``) and Pinocchio's damping ``rho = mu / weight``:

1. forward sweep: velocities, ``c_i``, ``IA_i = I_i``, ``pA_i = v x* I v``; each
   constrained body starts ``KA = K`` (the rows of its constraints), ``l = -k``, ``L = 0``;
2. backward sweep: the ABA terms, and for the bodies supporting constraints (lines 9-11)::

       L  += KA S D^-1 S^T KA^T                     (the Delassus block of the subtree)
       l  += KA (c + S D^-1 (u - U^T c))
       KA_parent rows += (X^* P KA^T)^T,   P = I - U D^-1 S^T

   so at the world ``J ddq - a_c* = KA_0 a_0 + l_0 + L_0 lam`` with ``L_0 = J M^-1 J^T``;
3. proximal iterations on the dual (line 13, Carpentier 2021 eq. 18 reduced to lam)::

       (L_0 + rho) lam_k = rho lam_{k-1} - (KA_0 a_0 + l_0)

   with one dense LDL^T of the m x m damped Delassus matrix, factored once;
4. roll-out with the constraint forces: a reduced backward sweep carries
   ``F_b = K^T lam`` to the root through ``P_i`` (equal to ``KA_i^T lam``, line 18), then
   ``ddq_i = D^-1 (u_i + S^T F_i - U^T a')``.

Only constraints relative to the world are handled (§II-E); use ``prox_ltl`` or
``prox_ltls`` for loops between two moving bodies.  Shapes: q (nq,1), v (nv,1),
tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1), residual (1,1).  Options and the
stopping test: :mod:`gen.algorithms.proximal`.
"""
from __future__ import annotations

from ..model import Model
from ..spatial import act_force, cross_force, inertia_matrix
from .common import forward_velocities, gravity_acceleration, subspaces
from .constrained_aba import constraint_rows, rollout
from .proximal import (Proximal, column, dsolve, fill_pattern, joint_terms, ldl_factor, ldl_solve,
                       propagate_inertia, supporting_bodies)


def prox_pv(model: Model, q, v, tau, *, be, cset=None, **options):
    prox = Proximal(model, cset, be, **options)
    cset, m, nb = prox.cset, prox.cset.m, model.nbodies
    cset.require_anchored("prox_pv")
    S = subspaces(model, be)
    Xup, vel, c = forward_velocities(model, q, v, S, be)
    cons = constraint_rows(model, cset, prox.rho, q, v, (Xup, vel, c), be) if m else []

    IA, pA = [], []                                   # line 4
    for i, b in enumerate(model.bodies):
        I = inertia_matrix(b.inertia, be)
        IA.append(I)
        pA.append(cross_force(vel[i], I @ vel[i], be))
    sub = [Subtree() for _ in range(nb + 1)]          # sub[nb] is the world
    for ci, (con, body, K, k, _, _) in enumerate(cons):
        sub[body].add(list(cset.rows(ci)), K.T, -k, None)
    be.mark("forward", *c, *IA, *pA)

    U, Dfac, Dinv_u, Dinv_Ut = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):                     # lines 5-11
        U[i], Dfac[i], Dinv_u[i], Dinv_Ut[i] = joint_terms(model, i, S, IA, pA, tau, be)
        p = model.bodies[i].parent
        if p != -1:
            propagate_inertia(model, i, q, Xup, c, IA, pA, U[i], Dinv_u[i], Dinv_Ut[i], be)
        if sub[i].rows:
            pv_step(sub[i], sub[p if p != -1 else nb], Xup[i], S[i], c[i], U[i], Dfac[i],
                    Dinv_u[i], Dinv_Ut[i], be)
    be.mark("backward", *U, *Dinv_u, *Dinv_Ut)

    lam = None
    if m:
        lam = dual_iterations(sub[nb], gravity_acceleration(model, be), prox, be)
    F = {}                                            # F_i = KA_i^T lam, root-ward
    for ci, (con, body, K, _, _, _) in enumerate(cons):
        r = cset.rows(ci)
        f = K.T @ lam[r.start:r.stop, 0:1]
        F[body] = f if body not in F else F[body] + f
    for i in reversed(supporting_bodies(model, cset)):
        if i not in F:
            continue
        dv = dsolve(Dfac[i], S[i].T @ F[i], be)
        Dinv_u[i] = Dinv_u[i] + dv                   # D^-1 (u + S^T F)
        p = model.bodies[i].parent
        if p != -1:
            f = act_force(Xup[i], F[i] - U[i] @ dv, be)
            F[p] = f if p not in F else F[p] + f
    acc, ddq = [None] * nb, [None] * nb
    rollout(model, range(nb), Xup, c, S, Dinv_u, Dinv_Ut, acc, ddq, be)   # lines 17-19
    return prox.outputs(be.vcat(ddq), lam)


class Subtree:
    """The constraints of a subtree seen from its root body: global row indices,
    ``KAt = KA^T`` (6 x m_sub), ``l`` (m_sub x 1) and the symmetric ``L`` as a dict over
    row pairs (blocks of different children stay zero: structure)."""

    def __init__(self):
        self.rows, self.KAt, self.l, self.L = [], [], [], {}

    def add(self, rows, KAt, l, L):
        self.rows += rows
        self.KAt.append(KAt)
        self.l.append(l)
        if L:
            self.L.update(L)


def pv_step(sub, parent, X, S, c, U, Dfac, Dinv_u, Dinv_Ut, be):
    """Algorithm 4 lines 9-11 for one body: fold its subtree's constraints into the parent."""
    KAt = be.hcat(sub.KAt)
    l = be.vcat(sub.l)
    T = dsolve(Dfac, S.T @ KAt, be)                  # D^-1 S^T KA^T  (nv_i x m_sub)
    SK = (S.T @ KAt).T                               # KA S           (m_sub x nv_i)
    L = dict(sub.L)
    for a, ra in enumerate(sub.rows):
        for b in range(a, len(sub.rows)):
            rb = sub.rows[b]
            e = (SK[a:a + 1, :] @ T[:, b:b + 1])[0, 0]
            key = (max(ra, rb), min(ra, rb))
            L[key] = L[key] + e if key in L else e
    l = l + KAt.T @ (c + S @ (Dinv_u - Dinv_Ut @ c))
    parent.add(sub.rows, act_force_cols(X, KAt - U @ T, be), l, L)


def act_force_cols(X, F, be):
    return be.hcat([act_force(X, F[:, k:k + 1], be) for k in range(F.shape[1])])


def dual_iterations(world, a0, prox, be):
    """Line 13: ``(L_0 + rho) lam_k = rho lam_{k-1} - (KA_0 a_0 + l_0)``, dense LDL^T once."""
    m = len(world.rows)
    pos = {r: a for a, r in enumerate(world.rows)}   # subtree order -> row order
    KAt = be.hcat(world.KAt)
    c0s = KAt.T @ a0 + be.vcat(world.l)
    c0 = [c0s[pos[r], 0] for r in range(m)]
    diag = [float(prox.rho[r]) for r in range(m)]
    off = {}
    for (ra, rb), e in world.L.items():
        if ra == rb:
            diag[ra] = diag[ra] + e
        else:
            off[(ra, rb)] = e
    pattern = fill_pattern([set(range(k)) for k in range(m)])
    dinv, Lf = ldl_factor(pattern, diag, off, be)
    be.mark("delassus", column(dinv, be), column([Lf[e] for e in sorted(Lf)], be))
    lam = [0.0] * m
    while True:
        rhs = [prox.rho[r] * lam[r] - c0[r] for r in range(m)]
        new = ldl_solve(pattern, dinv, Lf, rhs)
        res = be.vcat([prox.rho[r] * (lam[r] - new[r]) for r in range(m)])   # J ddq - a_c*
        lam = new
        if prox.step(res):
            return be.vcat(lam)
