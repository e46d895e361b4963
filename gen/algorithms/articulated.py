"""The articulated-body passes, written once for ``aba``, constrainedABA, proxPV,
the impact map and cABA-OSIM (Featherstone 2008 Table 7.1 in LOCAL frames; Sathya 2024
Alg. 1 and 4):

1. forward pass: ``liMi[i]``, ``v_i``, ``c_i = v_i x S_i qd_i``, ``IA_i = I_i``,
   ``pA_i = v_i x* I_i v_i - fext_i``, and for the solvers the constraint rows in maximal
   coordinates (:class:`ConstraintRow`, Sathya 2024 eq. 20c);
2. backward pass, leaves to root: ``U_i = IA_i S_i``, ``D_i = S_i^T U_i`` (factored once:
   one reciprocal for a 1-DoF joint, an unrolled LDL^T otherwise), ``u_i = tau_i - S_i^T pA_i``,
   ``Ia = IA_i - U_i D_i^-1 U_i^T``, ``pa = pA_i + Ia c_i + U_i D_i^-1 u_i``,
   ``IA_parent += X^* Ia X^-1``, ``pA_parent += X^* pa``;
3. roll-out: ``a' = X^-1 a_parent + c_i``, ``ddq_i = D_i^-1 u_i - D_i^-1 U_i^T a'``,
   ``a_i = a' + S_i ddq_i``, with ``a_0 = -g``;

and the constant constraint inertia of Sathya 2024 eq. 24.  Exact savings: ``Ia S_i = U_i -
U_i D_i^-1 D_i = 0``, so for a joint along a coordinate axis the matching row and column of
``Ia`` are structural zeros (:func:`null_axis`; CasADi's on-the-fly simplification finds
this only on some trees).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..constraints import ConstraintSet
from ..kinematics import (
    forward_velocities,
    gravity_acceleration,
    qslice,
    subspaces,
    vslice,
)
from ..model import Model, skew
from ..portable import matmul
from ..spatial import (
    act_force,
    cross_force,
    inertia_matrix,
    inertia_to_parent,
    inv_motion,
    motion_subspace,
)
from .dense import ldlt_factor, ldlt_solve


class Articulated(NamedTuple):
    """Per-body lists of the articulated-body sweeps: motion subspaces ``S``, ``liMi``,
    ``c``, articulated inertias ``IA`` and bias forces ``pA`` (as propagated), ``U``, the
    factor ``Dfac`` of ``D``, ``u``, ``D^-1 u`` and ``D^-1 U^T`` (:func:`joint_terms`)."""

    S: list
    liMi: list
    c: list
    IA: list
    pA: list
    U: list
    Dfac: list
    u: list
    Dinv_u: list
    Dinv_Ut: list

    @classmethod
    def begin(cls, S, liMi, c, IA, pA) -> Articulated:
        """The state after the forward pass: the backward pass's lists still empty."""
        return cls(S, liMi, c, IA, pA, *([None] * len(S) for _ in range(5)))


def forward_pass(model: Model, q, v, be, prox=None, fext=None, phase="kinematics"):
    """Pass 1 (Sathya 2024 Alg. 1 lines 1-4, Alg. 4 line 4): ``liMi``, ``v``, ``c``,
    ``IA_i = I_i``, ``pA_i = v_i x* I_i v_i`` (minus ``fext[i]``, a LOCAL external force, when
    given), and with ``prox`` its constraint rows (:func:`constraint_rows`).  Marks
    ``phase``.  Returns (Articulated with the sweep lists still empty, rows)."""
    S = subspaces(model, be)
    liMi, vel, c = forward_velocities(model, q, v, S, be)
    cons = constraint_rows(model, prox.cset, prox.rho, q, v, (liMi, vel, c), be) if prox and prox.cset.m else []
    IA, pA = [], []
    for i, b in enumerate(model.bodies):
        I = inertia_matrix(b.inertia, be)
        IA.append(I)
        p = cross_force(vel[i], I @ vel[i], be)
        pA.append(p if fext is None or fext[i] is None else p - fext[i])
    be.mark(phase, *c, *pA, *[row.k for row in cons])
    return Articulated.begin(S, liMi, c, IA, pA), cons


def backward_pass(model: Model, q, tau, art: Articulated, be, visit=None, phase="factorisation") -> None:
    """Pass 2 (Sathya 2024 Alg. 1 lines 5-8, Alg. 4 lines 5-8), in place on ``art``: the
    joint terms of every body, leaves to root, and the inertia and bias force it passes to
    its parent; ``visit(i)`` runs after body ``i`` (proxPV folds its constraints there,
    the loop couplings are eliminated there).  Marks ``phase``."""
    for i in reversed(range(model.nbodies)):
        art.U[i], art.Dfac[i], art.u[i], art.Dinv_u[i], art.Dinv_Ut[i] = joint_terms(
            model, i, art.S, art.IA, art.pA, tau, be)
        if model.bodies[i].parent != -1:
            propagate(model, i, q, art, be)
        if visit is not None:
            visit(i)
    be.mark(phase, *art.U, *art.Dinv_u, *art.Dinv_Ut)


def rollout(model: Model, bodies, art: Articulated, acc, ddq, be, Dinv_u=None, coupled=None,
            solve_roots: bool = False):
    """Pass 3 for the listed bodies (ascending) into ``acc`` and ``ddq``: ``a' = X^-1
    a_parent + c``, ``ddq_i = D^-1 u_i - D^-1 U^T a'``, ``a_i = a' + S ddq_i``, ``a_0 = -g``.
    ``Dinv_u`` replaces ``art.Dinv_u`` (an iterate's); with ``solve_roots`` a root's
    ``ddq = D^-1 (u - U^T a')`` is one solve (``D^-1 U^T`` is not needed there: the
    free-flyer's 6 x 6 solve against six columns is skipped).  ``coupled[i]``: the loop
    couplings of body i at its elimination, ``(j, C_ji S_i, D^-1 S_i^T C_ji^T)`` with
    ``j < i`` (:mod:`gen.algorithms.loops`), adding ``- D^-1 S^T C_ji^T a_j`` to ``ddq_i``."""
    a0 = gravity_acceleration(model, be)
    Dinv_u = art.Dinv_u if Dinv_u is None else Dinv_u
    for i in bodies:
        p = model.bodies[i].parent
        a = inv_motion(art.liMi[i], a0 if p == -1 else acc[p], be) + art.c[i]
        if p == -1 and solve_roots:
            ddq[i] = dsolve(art.Dfac[i], art.u[i] - art.U[i].T @ a, be)
        else:
            ddq[i] = Dinv_u[i] - art.Dinv_Ut[i] @ a
        for j, _, MD in (coupled or {}).get(i, ()):
            ddq[i] = ddq[i] - MD @ acc[j]
        acc[i] = a + art.S[i] @ ddq[i]


class ConstraintRow(NamedTuple):
    """One constraint in maximal coordinates (Sathya 2024 eq. 20c): ``sum_t K_t a_t = k``
    over its terms ``(body, K_t)`` (one for a constraint to the world, two for a loop
    between moving bodies), ``a_t`` the body's gravity-offset LOCAL acceleration."""

    con: object         # the Constraint
    terms: list         # [(body, K (size x 6))]
    k: object           # size x 1: K a0 + a_rest
    w: float            # the penalty 1/rho of its rows
    inertia: object     # the constant w K^T K of an anchored constraint (eq. 24), or None


def constraint_rows(model: Model, cset, rho, q, v, kin, be) -> list[ConstraintRow]:
    """Per constraint its :class:`ConstraintRow`, with ``k = sum_t K_t a0_t + a_rest``
    the desired (gravity-offset) acceleration component; a loop whose two frames are on
    one body has the single term ``K_1 + K_2``."""
    ev = cset.evaluate(model, q, v, be=be, kin=kin, jacobian=False, drift=False)
    liMi = kin[0]
    grav = body_gravity(model, liMi, [b for terms in ev.terms for b, _ in terms], be)
    out = []
    for ci, (con, terms) in enumerate(zip(cset.constraints, ev.terms)):
        terms = by_body(terms)
        r0 = cset.offsets[ci]
        k = ev.a_rest[r0:r0 + con.size, 0:1]
        for body, K in terms:
            k = K @ grav[body] + k
        out.append(constraint_row(con, terms, k, 1.0 / rho[r0]))
    return out



def row_residual(bodies, Ks, k, acc):
    """``sum_t K_t a_t - k`` of one constraint row (Sathya 2024 eq. 20c) from the body
    accelerations ``acc`` (gravity-offset, LOCAL)."""
    Ka = None
    for body, K in zip(bodies, Ks):
        Ka = K @ acc[body] if Ka is None else Ka + K @ acc[body]
    return Ka - k

def by_body(terms) -> list:
    """A constraint's terms ``(body, K)`` with those on one body added (a loop whose two
    frames are on one body)."""
    merged: dict[int, object] = {}
    for body, K in terms:
        merged[body] = K if body not in merged else merged[body] + K
    return list(merged.items())


def constraint_row(con, terms, k, w) -> ConstraintRow:
    """The :class:`ConstraintRow` of ``con`` with penalty ``w``, its inertia constant when
    :func:`constant_constraint_inertia` finds one."""
    aug = constant_constraint_inertia(con, w)
    return ConstraintRow(con, terms, k, w, None if aug is None else aug[1])


def joint_factor(model: Model, i: int, S, IA, be):
    """``U = IA S`` and the factor of ``D = S^T U``: ``1/D`` for a 1-DoF joint (one
    reciprocal, so the products stay multiplications), an unrolled LDL^T with reciprocal
    pivots otherwise (:func:`dsolve` applies it)."""
    U = IA[i] @ S[i]
    D = S[i].T @ U
    return U, be.reciprocal(D[0, 0]) if model.bodies[i].nv == 1 else ldlt_factor(D, be)


def joint_terms(model: Model, i: int, S, IA, pA, tau, be):
    """:func:`joint_factor`, ``u = tau_i - S^T pA``, ``D^-1 u`` and ``D^-1 U^T``."""
    U, Dfac = joint_factor(model, i, S, IA, be)
    u = vslice(model, i, tau) - S[i].T @ pA[i]
    return U, Dfac, u, dsolve(Dfac, u, be), dsolve(Dfac, U.T, be)


def dsolve(Dfac, x, be):
    """``D^-1 x`` from :func:`joint_factor`'s factor."""
    return x * Dfac if not isinstance(Dfac, tuple) else ldlt_solve(Dfac, x, be)


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


def pass_inertia(model: Model, i: int, q, IA, U, Dinv_Ut, be):
    """``IA_parent += X^* Ia X^-1`` with ``Ia = IA_i - U D^-1 U^T``; returns ``Ia``."""
    b = model.bodies[i]
    Ia = articulated_inertia(IA[i], U, Dinv_Ut, null_axis(b), be)
    IA[b.parent] = IA[b.parent] + inertia_to_parent(b, qslice(model, i, q), Ia, be)
    return Ia


def propagate(model: Model, i: int, q, art: Articulated, be) -> None:
    """Body i's articulated inertia (:func:`pass_inertia`) and bias force
    ``pA_parent += X^* (pA + Ia c + U D^-1 u)`` to its parent (Featherstone 2008 Table 7.1)."""
    Ia = pass_inertia(model, i, q, art.IA, art.U[i], art.Dinv_Ut[i], be)
    pa = art.pA[i] + Ia @ art.c[i] + art.U[i] @ art.Dinv_u[i]
    p = model.bodies[i].parent
    art.pA[p] = art.pA[p] + act_force(art.liMi[i], pa, be)


def project_force(U, Dinv_Ut, S, f):
    """``P f = f - U D^-1 S^T f`` (Sathya 2024 eq. 38: the part of a force on body i
    that its parent feels through the articulated joint)."""
    return f - Dinv_Ut.T @ (S.T @ f)


def body_gravity(model: Model, liMi, bodies, be) -> dict:
    """The world's gravity offset ``a_0 = -g`` seen in the LOCAL frame of each listed body
    (and its ancestors): ``g_i = liMi[i]^-1 g_parent``; angular part zero."""
    a0 = gravity_acceleration(model, be)
    g: dict[int, object] = {}

    def get(i):
        if i not in g:
            p = model.bodies[i].parent
            g[i] = inv_motion(liMi[i], a0 if p == -1 else get(p), be)
        return g[i]

    for b in bodies:
        get(b)
    return g


def supporting_bodies(model: Model, cset: ConstraintSet) -> list[int]:
    """``S_E`` of Sathya 2024: bodies supporting at least one constraint, ascending."""
    out = set()
    for con in cset.constraints:
        for b in (con.body1, con.body2):
            if b >= 0:
                out.update(model.ancestors(b))
    return sorted(out)


def constant_constraint_inertia(con, w: float):
    """``w K^T K`` as a constant 6x6 matrix when it is one (Sathya 2024 eq. 24): for a
    frame held by the world it is a point mass ``w`` at the frame origin, plus the
    rotational inertia ``w I`` for 6D (independent of the frame's orientation);
    returns (body, matrix), or None when it depends on q (a loop between two moving
    bodies, a 6D constraint whose frame A is the world)."""
    if con.body2 < 0:
        body, p, rot = con.body1, con.placement1.p, con.kind == "6D"
    elif con.body1 < 0 and con.kind == "3D":
        body, p, rot = con.body2, con.placement2.p, False
    else:
        return None
    P = skew(np.asarray(p, dtype=float))
    X = np.block([[np.eye(3), -P], [P, -matmul(P, P) + (np.eye(3) if rot else 0.0)]])
    return body, w * X
