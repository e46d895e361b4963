"""proxPV: the Popov-Vereshchagin algorithm with proximal iterations on its dual.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(docs/REFERENCES.md), Algorithm 4, in LOCAL frames, Pinocchio's sign
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

Setup is 1-2 and the factorisation of 3 (phases ``kinematics``, ``factorisation``: the
ABA terms, H^A in Sathya 2024 Fig. 1, and ``delassus``: ``L_0``, ``l_0`` and the factor,
Lambda), a step is one solve of 3 (loop state ``lam_{k-1}``), and 4 is the returned
iterate's ``ddq``; see :class:`proximal.ProximalSolver`.

A loop between two moving bodies (Sathya 2024 §II-E) starts its rows at both bodies; they
meet at the common ancestor, where the two columns, drifts and Delassus blocks add
(:class:`Subtree`).  With mimic joints (``gen.model``) the articulated sweeps do not apply
(one dof moves bodies on several branches): the same dual iterates ``(J M^-1 J^T + rho)
lam_k = rho lam_{k-1} - (J ddq_f - a_c*)`` are computed on the sparse factor of the KKT
matrix ``[[-rho, J], [J^T, M]]`` by ``prox_ltl`` (:func:`~gen.algorithms.proximal.mimic_fallback`).
Shapes: q (nq,1), v (nv,1),
tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1), residual (1,1).  Options and the
stopping test: :mod:`gen.algorithms.proximal`.
"""
from __future__ import annotations

from typing import NamedTuple

from ..kinematics import gravity_acceleration
from ..model import Model
from ..spatial import act_force
from .articulated import (
    backward_pass,
    dsolve,
    forward_pass,
    rollout,
    row_residual,
    supporting_bodies,
)
from .prox_ltl import prox_ltl
from .proximal import Iterate, ProximalSolver, column, mimic_fallback
from .sparse_ldl import fill_pattern, ldl_factor, ldl_solve


class Plan(NamedTuple):
    """The structure of a proxPV solve (plain ints)."""

    pattern: list       # of the dense m x m factor
    SE: list            # bodies supporting a constraint, ascending
    bodies: list        # per constraint: its terms' bodies


class Const(NamedTuple):
    """What every proxPV iteration (and the final roll-out) reads."""

    art: object         # articulated.Articulated after the backward sweep
    K: list             # per constraint: its terms' K (size x 6)
    dinv: list          # 1/D of L_0 + rho = L^T D L
    L: dict             # L over the pattern
    c0: list            # KA_0 a_0 + l_0, per row
    k: list             # per constraint (size x 1): sum_t K_t a_t = k is the constraint (true residual)


def setup(model: Model, q, v, tau, prox, be):
    """Lines 1-11 and the factorisation of line 13's matrix; state: ``lam_0 = 0``."""
    cset, nb = prox.cset, model.nbodies
    art, cons = forward_pass(model, q, v, be, prox)
    sub = [Subtree() for _ in range(nb + 1)]          # sub[nb] is the world
    for ci, row in enumerate(cons):                   # a loop's rows start at both bodies
        for t, (body, K) in enumerate(row.terms):
            sub[body].add(list(cset.rows(ci)), K.T, -row.k if t == 0 else None, None)

    def visit(i):                                     # lines 9-11
        if sub[i].rows:
            p = model.bodies[i].parent
            pv_step(sub[i], sub[p if p != -1 else nb], art.liMi[i], art.S[i], art.c[i], art.U[i],
                    art.Dfac[i], art.Dinv_u[i], art.Dinv_Ut[i], be)

    backward_pass(model, q, tau, art, be, visit)
    pattern, dinv, L, c0 = delassus_factor(sub[nb], gravity_acceleration(model, be), prox, be)
    plan = Plan(pattern, supporting_bodies(model, cset), [[body for body, _ in row.terms] for row in cons])
    return plan, Const(art, [[K for _, K in row.terms] for row in cons], dinv, L, c0,
                       [row.k for row in cons]), be.zeros(cset.m, 1)


def step(model: Model, plan: Plan, const: Const, lam, prox, be) -> Iterate:
    """Line 13: ``(L_0 + rho) lam_k = rho lam_{k-1} - (KA_0 a_0 + l_0)``; the stopping
    test reads ``rho (lam_{k-1} - lam_k)`` (``= J ddq_k - a_c*`` in exact arithmetic, O(m)
    where ``ddq_k`` costs a sweep); the reported residual is ``K a_b - k`` per constraint
    from the body accelerations of the returned ``ddq_k`` (its roll-out), i.e.
    ``J ddq_k - a_c*`` of the result."""
    m = prox.cset.m
    rhs = [prox.rho[r] * lam[r, 0] - const.c0[r] for r in range(m)]
    new = ldl_solve(plan.pattern, const.dinv, const.L, rhs)
    r = column([prox.rho[i] * (lam[i, 0] - new[i]) for i in range(m)], be)
    lam_k = column(new, be)
    acc = []

    def ddq():
        out, a = accelerations(model, plan, const, lam_k, prox.cset, be)
        acc.append(a)
        return out

    def true_r(_):                                   # sum_t K_t a_t - k of the returned roll-out
        return be.vcat([row_residual(bodies, Ks, k, acc[0]) for bodies, Ks, k in zip(plan.bodies, const.K, const.k)])

    return Iterate(lam_k, lam_k, r, ddq, true_r)


def accelerations(model: Model, plan: Plan, const: Const, lam, cset, be):
    """Lines 17-19: ``F_i = KA_i^T lam`` carried root-ward through ``P_i``, then the
    roll-out ``ddq_i = D^-1 (u_i + S^T F_i - U^T a')``.  Returns ``ddq`` and the body
    accelerations (gravity-offset, LOCAL)."""
    art, nb = const.art, model.nbodies
    F = {}
    for ci, (bodies, Ks) in enumerate(zip(plan.bodies, const.K)):
        r = cset.rows(ci)
        for body, K in zip(bodies, Ks):
            f = K.T @ lam[r.start:r.stop, 0:1]
            F[body] = f if body not in F else F[body] + f
    Dinv_u = list(art.Dinv_u)
    for i in reversed(plan.SE):
        if i not in F:
            continue
        dv = dsolve(art.Dfac[i], art.S[i].T @ F[i], be)
        Dinv_u[i] = Dinv_u[i] + dv                   # D^-1 (u + S^T F)
        p = model.bodies[i].parent
        if p != -1:
            f = act_force(art.liMi[i], F[i] - art.U[i] @ dv, be)
            F[p] = f if p not in F else F[p] + f
    acc, ddq = [None] * nb, [None] * nb
    rollout(model, range(nb), art, acc, ddq, be, Dinv_u)
    return be.vcat(ddq), acc


prox_pv = ProximalSolver("prox_pv", *mimic_fallback(setup, step, prox_ltl.setup, prox_ltl.step))


class Subtree:
    """The constraints of a subtree seen from its root body: per global row its column of
    ``KA^T`` (6 x 1) and its entry of ``l``, and the symmetric ``L`` as a dict over row
    pairs (blocks of different children stay zero: structure).  A loop between two
    moving bodies reaches the common ancestor from both children: its columns, ``l``
    entries and ``L`` blocks add there (the force ``K_1^T lam`` on one body and
    ``K_2^T lam`` on the other, carried to the root by linearity)."""

    def __init__(self):
        self.col, self.l, self.L = {}, {}, {}

    @property
    def rows(self) -> list:
        return list(self.col)

    def add(self, rows, KAt, l, L):
        """``KAt`` (6 x len(rows)), ``l`` (len(rows) x 1, or None: zero), ``L`` (dict or None)."""
        for a, r in enumerate(rows):
            self.col[r] = KAt[:, a:a + 1] if r not in self.col else self.col[r] + KAt[:, a:a + 1]
            if l is not None:
                self.l[r] = l[a, 0] if r not in self.l else self.l[r] + l[a, 0]
        for key, e in (L or {}).items():
            self.L[key] = e if key not in self.L else self.L[key] + e


def pv_step(sub, parent, X, S, c, U, Dfac, Dinv_u, Dinv_Ut, be):
    """Algorithm 4 lines 9-11 for one body: fold its subtree's constraints into the parent."""
    KAt = be.hcat(list(sub.col.values()))
    l = be.vcat([sub.l.get(r, 0.0) for r in sub.col])
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


def delassus_factor(world: Subtree, a0, prox, be):
    """Line 13's matrix ``L_0 + rho`` (rows in constraint order) and its dense LDL^T, once,
    and ``c0 = KA_0 a_0 + l_0``.  Phase ``delassus``.  Returns (pattern, 1/D, L, c0)."""
    m = len(world.rows)
    if not m:
        return [], [], {}, []
    pos = {r: a for a, r in enumerate(world.rows)}   # subtree order -> row order
    KAt = be.hcat(list(world.col.values()))
    c0s = KAt.T @ a0 + be.vcat([world.l.get(r, 0.0) for r in world.col])
    c0 = [c0s[pos[r], 0] for r in range(m)]
    diag = list(prox.rho)
    off = {}
    for (ra, rb), e in world.L.items():
        if ra == rb:
            diag[ra] = diag[ra] + e
        else:
            off[(ra, rb)] = e
    pattern = fill_pattern([set(range(k)) for k in range(m)])
    dinv, L = ldl_factor(pattern, diag, off, be)
    be.mark("delassus", column(dinv, be), column([L[e] for e in sorted(L)], be), column(c0, be))
    return pattern, dinv, L, c0
