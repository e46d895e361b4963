"""proxLTLs: augmented-Lagrangian constrained dynamics through the sparse factorisation
of the augmented joint-space inertia matrix.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(docs/REFERENCES.md), §II-D2 and §II-F, in Pinocchio's sign and with
Pinocchio's damping ``rho = mu / weight`` (Sathya's penalty is ``1/rho``):

* ALM iterations, eq. (16)::

      M_mu ddq_k = tau - b + J^T (lam_{k-1} + rho^-1 a_c*),     M_mu = M + J^T rho^-1 J
      lam_k = lam_{k-1} - rho^-1 (J ddq_k - a_c*)

* ``M_mu`` by the inertia update of eq. (24): for a constraint relative to the world,
  ``rho^-1 K^T K`` is the spatial inertia of a point of mass ``1/rho`` at the frame origin
  (3D), plus a rotational inertia ``(1/rho) I`` (6D) — Pinocchio's constraint inertia.  It
  is added to the body's (constant) inertia at trace time, so CRBA computes ``M_mu`` at the
  cost of ``M``.  Loop closures between two moving bodies (and a 6D constraint whose
  frame A is the world) add ``J_c^T rho^-1 J_c`` to ``M_mu`` instead; the fill-in they
  cause is in the trace-time pattern;
* ``M_mu = L^T D L`` by Featherstone's sparse LTDL (2005, Table 2), once; each iteration
  is one sparse solve.

Setup (phases ``kinematics``: ``b``, ``J``, ``a_c*``; ``factorisation``: ``M_mu`` and its
factor) and step (loop state ``lam_{k-1}``), see :class:`proximal.ProximalSolver`.

Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1),
residual (1,1).  Options and the stopping test: :mod:`gen.algorithms.proximal`.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..model import Inertia, Model
from .articulated import constant_constraint_inertia
from .crba import crba
from .proximal import ALM_CONVERGED_MU, Iterate, ProximalSolver, Unmarked, column, relative_residual
from .rnea import nle
from .sparse_ldl import fill_pattern, ldl_factor, ldl_solve, tree_lower


class Const(NamedTuple):
    """What every proxLTLs iteration reads."""

    dinv: list          # 1/D of M_mu = L^T D L
    L: dict             # L over the pattern
    base: object        # tau - b (nv x 1)
    J: object           # m x nv, None without constraints
    a_star: object      # a_c* (m x 1), None without constraints
    M: object           # the joint-space inertia (nv x nv): the dynamics residual
    tau: object         # the applied torques (nv x 1): the residual's scale


class State(NamedTuple):
    """The loop state of iterate k: the previous iterate and its residuals."""

    ddq: object         # ddq_{k-1} (nv x 1)
    lam: object         # lam_{k-1} (m x 1)
    r_d: object         # tau - b + J^T lam_{k-1} - M ddq_{k-1} (nv x 1)
    r_c: object         # J ddq_{k-1} - a_c* (m x 1)


def start(const: Const, m: int, prox, be):
    """Iterate 0: ``lam_0 = 0``; with ``tol`` (correction form) also ``ddq_0 = 0``, so
    ``r_d = tau - b``, ``r_c = -a_c*``."""
    if prox.tol is None:
        return be.zeros(m, 1)
    return State(be.zeros(const.base.shape[0], 1), be.zeros(m, 1), const.base,
                 -const.a_star if m else be.zeros(0, 1))


def setup(model: Model, q, v, tau, prox, be):
    """``b``, ``J``, ``a_c*``, with ``tol`` ``M`` (the plain CRBA, for the dynamics
    residual), ``M_mu`` (eq. 24) and its factor; plan: the pattern of the factor; state:
    iterate 0."""
    cset, m = prox.cset, prox.cset.m
    (b,) = nle(model, q, v, be=Unmarked(be))
    ev = cset.evaluate(model, q, v, be=be) if m else None
    (M,) = crba(model, q, be=Unmarked(be)) if m and prox.tol is not None else (None,)
    be.mark("kinematics", b, *([ev.J, ev.a_star] if m else []))
    pattern, dinv, L = augmented_factor(model, cset, q, prox.rho, ev.J if m else None, be)
    be.mark("factorisation", column(dinv, be), column([L[e] for e in sorted(L)], be))
    const = Const(dinv, L, tau - b, ev.J if m else None, ev.a_star if m else None, M, tau)
    return pattern, const, start(const, m, prox, be)


def step(model: Model, pattern, const: Const, state, prox, be) -> Iterate:
    """eq. (16): plain for a fixed-K run (the K-th iterate at the least cost, Pinocchio's),
    in correction form with ``tol`` (:func:`correction_step`)."""
    if prox.tol is None:
        return plain_step(model, pattern, const, state, prox, be)
    return correction_step(model, pattern, const, state, prox, be)


def plain_step(model: Model, pattern, const: Const, lam, prox, be) -> Iterate:
    """eq. (16): ``M_mu ddq_k = tau - b + J^T (lam_{k-1} + rho^-1 a_c*)``,
    ``r_k = J ddq_k - a_c*``, ``lam_k = lam_{k-1} - rho^-1 r_k``."""
    m, n = prox.cset.m, model.nv
    rhs = const.base
    if m:
        w = be.vcat([lam[r, 0] + const.a_star[r, 0] * (1.0 / prox.rho[r]) for r in range(m)])
        rhs = const.base + const.J.T @ w
    ddq = column(ldl_solve(pattern, const.dinv, const.L, [rhs[i, 0] for i in range(n)]), be)
    r = const.J @ ddq - const.a_star if m else be.zeros(0, 1)
    new = column([lam[i, 0] - r[i, 0] * (1.0 / prox.rho[i]) for i in range(m)], be)
    return Iterate(new, new, r, lambda: ddq)


def correction_step(model: Model, pattern, const: Const, state: State, prox, be) -> Iterate:
    """eq. (16) in correction form (iterative refinement against the KKT residual): from
    iterate ``k-1`` with dynamics residual ``r_d = tau - b + J^T lam - M ddq`` and
    constraint residual ``r_c = J ddq - a_c*``, ``M_mu d = r_d - J^T rho^-1 r_c``,
    ``ddq_k = ddq_{k-1} + d``, ``r_k = J ddq_k - a_c*``, ``lam_k = lam_{k-1} - rho^-1 r_k``.
    In exact arithmetic this is ``M_mu ddq_k = tau - b + J^T (lam_{k-1} + rho^-1 a_c*)``; in
    floating point the solve's rounding, ~eps |M_mu| with entries ~1/mu, falls on the
    correction, not on the iterate, so the iterates reach the KKT solution's accuracy
    instead of the augmented matrix's (module docstring of :mod:`.proximal`).  The test
    residual is the KKT residual ``[r_k; r_d(k)]``."""
    m, n = prox.cset.m, model.nv
    rhs = state.r_d
    if m:
        rhs = state.r_d - const.J.T @ be.vcat([state.r_c[r, 0] * (1.0 / prox.rho[r]) for r in range(m)])
    ddq = state.ddq + column(ldl_solve(pattern, const.dinv, const.L, [rhs[i, 0] for i in range(n)]), be)
    if not m:
        return Iterate(state, be.zeros(0, 1), be.zeros(0, 1), lambda: ddq)
    r = const.J @ ddq - const.a_star
    lam = column([state.lam[i, 0] - r[i, 0] * (1.0 / prox.rho[i]) for i in range(m)], be)
    force = const.J.T @ lam
    r_d = const.base + force - const.M @ ddq
    return Iterate(State(ddq, lam, r_d, r), lam, be.vcat([r, relative_residual(r_d, [const.tau, force], be)]),
                   lambda: ddq)


prox_ltls = ProximalSolver("prox_ltls", setup, step, converged_mu=ALM_CONVERGED_MU)


def augmented_factor(model: Model, cset, q, rho, J, be):
    """``M_mu = M + J^T rho^-1 J`` (eq. 24 for the anchored constraints, ``J_c^T rho^-1
    J_c`` added on the support for the others) and its sparse ``L^T D L``: returns
    ``(pattern, 1/D, L)``.  Shared with the mimic-joint paths of the impact map and
    ``constrained_aba``."""
    n = model.nv
    aug, additive = augmented_model(model, cset, rho)
    (Mmu,) = crba(aug, q, be=Unmarked(be))
    lower = tree_lower(model)
    diag = [Mmu[k, k] for k in range(n)]
    off = {(k, i): Mmu[k, i] for k in range(n) for i in lower[k]}
    for c in additive:                               # + J_c^T rho^-1 J_c on the support
        sup, rows = cset.support(model, c), list(cset.rows(c))
        for a, i in enumerate(sup):
            for j in sup[a:]:                        # j >= i: entry (j, i)
                s = sum_terms([J[r, j] * J[r, i] * (1.0 / rho[r]) for r in rows])
                if i == j:
                    diag[i] = diag[i] + s
                else:
                    lower[j].add(i)
                    off[(j, i)] = off.get((j, i), 0.0) + s
    pattern = fill_pattern(lower)
    dinv, L = ldl_factor(pattern, diag, off, be)
    return pattern, dinv, L


def augmented_model(model: Model, cset, rho):
    """The model whose body inertias include ``rho^-1 K^T K`` for every constraint where
    that is a constant inertia (Sathya 2024 eq. 24), and the indices of the others."""
    extra: dict[int, object] = {}
    additive = []
    for c, con in enumerate(cset.constraints):
        const = constant_constraint_inertia(con, 1.0 / rho[cset.offsets[c]])
        if const is None:
            additive.append(c)
            continue
        body, X = const
        extra[body] = X if body not in extra else extra[body] + X
    if not extra:
        return model, additive
    bodies = [dataclasses.replace(b, inertia=AugmentedInertia(b.inertia.mass, b.inertia.com, b.inertia.I_c,
                                                               extra[i])) if i in extra else b
              for i, b in enumerate(model.bodies)]
    return dataclasses.replace(model, bodies=bodies), additive


@dataclasses.dataclass(frozen=True)
class AugmentedInertia(Inertia):
    """A body inertia plus the constraint term ``rho^-1 K^T K`` (6x6, constant in q), added
    as matrices (not as masses: a 1e6 point mass would swamp the body's own inertia); an
    SX matrix with a run-time mu (``gen.spatial.rigid_inertia`` reads it as such)."""

    extra: object = None

    def matrix(self) -> np.ndarray:
        return super().matrix() + self.extra


def sum_terms(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out
