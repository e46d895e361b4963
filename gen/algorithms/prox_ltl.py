"""proxLTL: proximal constrained dynamics through the sparse factorisation of the KKT
matrix with the constraint rows first.

Carpentier, Budhiraja, Mansard, "Proximal and Sparse Resolution of Constrained Dynamic
Equations", RSS 2021 (docs/REFERENCES.md):

* the proximal KKT system, eq. (18), in Pinocchio's sign (``x = -lam``)::

      K_mu [x; ddq] = [a_c* + rho lam_{k-1}; tau - b],    K_mu = [[-rho I, J], [J^T, M]]

  so ``J ddq_k - a_c* = rho (lam_{k-1} - lam_k)`` and ``M ddq_k + b = tau + J^T lam_k``;
* its factorisation ``K_mu = U D U^T`` (eq. 24), written here as ``L^T D L`` with L unit
  lower (Featherstone's form), eliminating joints leaves-to-root and then the
  constraints (Algorithm 1): the joint block has the tree's sparsity (no fill), constraint
  rows are non-zero only on the supporting joints (eq. 25-27), and the m x m block left
  at the end is the damped Delassus matrix ``-(J M^-1 J^T + rho)``, dense;
* a fixed number of proximal iterations, each one sparse solve with the same factors.

Setup (phases ``kinematics``: ``b``, ``J``, ``a_c*``; ``factorisation``: ``M`` and the
joint rows of the factor, which are M's own LTDL factor; ``delassus``: the constraint
rows) and step (one solve; loop state ``lam_{k-1}``), see :class:`proximal.ProximalSolver`.

The sparsity pattern, fill-in included, is computed at trace time from the tree and the
constraint supports (:func:`sparse_ldl.fill_pattern`), so loop closures between two moving
bodies are handled too.  Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1), lam (m,1),
iterations (1,1), residual (1,1).  ``mu`` is Pinocchio's damping (default 1e-6; Sathya's
penalty 1/mu); see :mod:`gen.algorithms.proximal` for the options and the stopping test.
"""
from __future__ import annotations

from typing import NamedTuple

from ..model import Model
from .crba import crba
from .proximal import Iterate, ProximalSolver, Unmarked, column
from .rnea import nle
from .sparse_ldl import fill_pattern, ldl_factor, ldl_solve, tree_lower


class Const(NamedTuple):
    """What every proxLTL iteration reads."""

    dinv: list          # 1/D of K_mu = L^T D L, constraint rows first
    L: dict             # L over the pattern
    a_star: object      # a_c* (m x 1), None without constraints
    rhs: list           # tau - b, per dof
    J: object           # m x nv, None without constraints (the true residual J ddq_k - a_c*)


def setup(model: Model, q, v, tau, prox, be):
    """``b``, ``J``, ``a_c*``, ``M`` and the factorisation of ``K_mu``; plan: its pattern;
    state: ``lam_0 = 0``."""
    cset, m, n = prox.cset, prox.cset.m, model.nv
    (b,) = nle(model, q, v, be=Unmarked(be))
    ev = cset.evaluate(model, q, v, be=be) if m else None
    be.mark("kinematics", b, *([ev.J, ev.a_star] if m else []))
    (M,) = crba(model, q, be=Unmarked(be))
    pattern, dinv, L = kkt_factor(model, cset, M, ev.J if m else None, prox.rho, be)
    be.mark("factorisation", column(dinv[m:], be), column([L[e] for e in sorted(L) if e[0] >= m], be))
    if m:
        be.mark("delassus", column(dinv[:m], be), column([L[e] for e in sorted(L) if e[0] < m], be))
    const = Const(dinv, L, ev.a_star if m else None, [tau[i, 0] - b[i, 0] for i in range(n)],
                  ev.J if m else None)
    return pattern, const, be.zeros(m, 1)


def step(model: Model, pattern, const: Const, lam, prox, be) -> Iterate:
    """eq. (18): ``K_mu [x; ddq_k] = [a_c* + rho lam_{k-1}; tau - b]``, ``lam_k = -x``,
    the stopping test reads ``rho (lam_{k-1} - lam_k)`` (the second block row of eq. 18:
    ``= J ddq_k - a_c*`` in exact arithmetic, O(m)); the reported residual is
    ``J ddq_k - a_c*`` evaluated from the returned ``ddq_k`` (the dual difference is
    exactly 0 at a fixed point of the iteration while the true residual is ~1e-13)."""
    m = prox.cset.m
    top = [const.a_star[r, 0] + prox.rho[r] * lam[r, 0] for r in range(m)]
    sol = ldl_solve(pattern, const.dinv, const.L, top + const.rhs)
    new = column([-x for x in sol[:m]], be)                        # lam_k = -x
    ddq = column(sol[m:], be)
    r = column([prox.rho[i] * (lam[i, 0] - new[i, 0]) for i in range(m)], be)
    return Iterate(new, new, r, lambda: ddq, lambda x: const.J @ x - const.a_star)


prox_ltl = ProximalSolver("prox_ltl", setup, step)


def kkt_factor(model: Model, cset, M, J, rho, be, order=None):
    """``K_mu = L^T D L`` with constraint rows first, joints after (Carpentier 2021
    Algorithm 1): constraint row ``order[i]`` at index ``i`` (default: row i), joint
    ``k`` at ``m + k``.  Returns (pattern, 1/D, L)."""
    order = list(range(cset.m)) if order is None else list(order)
    pattern, diag, off = kkt_pattern(model, cset, M, J, [-rho[r] for r in order], order)
    dinv, L = ldl_factor(pattern, diag, off, be)
    return pattern, dinv, L


def kkt_pattern(model: Model, cset, M, J, block, order=None):
    """The KKT matrix ``[[diag(block), J], [J^T, M]]`` on its sparsity pattern, constraint
    row ``order[i]`` at index ``i``, joint ``k`` at ``m + k``: ``(pattern with fill-in,
    diagonal, {(k, i): entry, i < k})``.  The joints' rows hold M's branch pattern and
    the constraint rows of the constraints they support (Carpentier 2021 §IV-C)."""
    m, n = cset.m, model.nv
    order = list(range(m)) if order is None else list(order)
    at = {r: i for i, r in enumerate(order)}
    lower = [set() for _ in range(m)] + [{m + i for i in anc} for anc in tree_lower(model)]
    off, diag = {}, list(block) + [M[k, k] for k in range(n)]
    for k in range(n):
        for i in lower[m + k]:
            off[(m + k, i)] = M[k, i - m]
    for c in range(len(cset)):
        for d in cset.support(model, c):
            for r in cset.rows(c):
                lower[m + d].add(at[r])
                off[(m + d, at[r])] = J[r, d]
    return fill_pattern(lower), diag, off