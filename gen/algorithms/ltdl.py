"""Sparse factorisations of the joint-space inertia matrix for branched trees.

Featherstone, "Efficient Factorization of the Joint-Space Inertia Matrix for Branched
Kinematic Trees", IJRR 2005 (docs/REFERENCES.md), §4-5.  With the
expanded parent array λ over dofs (``Model.dof_parents``), ``H = L^T D L`` (LTDL) or
``H = L^T L`` (LTL) where L is unit (resp. general) lower triangular with the same
sparsity as the lower triangle of H: no fill-in.  Loops run over λ at trace time, so
the traced graph has exactly D1 = Σ(d_i - 1) divisions and D2 = Σ d_i(d_i - 1)/2
multiplications and additions for LTDL (Table 1), d_i being the depth of dof i.

Factors are returned as dense backend matrices holding L (unit diagonal implicit for
LTDL: the diagonal of the returned L is set to 1) and D as a column.
"""
from __future__ import annotations

from ..model import Model
from .crba import crba


def _chain(lam, i):
    while i != -1:
        yield i
        i = lam[i]


def ltdl_factor(lam, H, be):
    """In-place ``H = L^T D L`` (Featherstone 2005, Table 2 left).  Returns (L, D)."""
    n = len(lam)
    H = H + be.zeros(n, n)  # work on a copy
    for k in reversed(range(n)):
        for i in _chain(lam, lam[k]):
            a = H[k, i] / H[k, k]
            for j in _chain(lam, i):
                H[i, j] = H[i, j] - a * H[k, j]
            H[k, i] = a
    D = be.vcat([H[k, k] for k in range(n)])
    L = _lower(lam, H, be, unit=True)
    return L, D


def ltl_factor(lam, H, be):
    """In-place ``H = L^T L`` (Featherstone 2005, Table 2 right).  Returns L."""
    n = len(lam)
    H = H + be.zeros(n, n)
    for k in reversed(range(n)):
        H[k, k] = be.sqrt(H[k, k])
        for i in _chain(lam, lam[k]):
            H[k, i] = H[k, i] / H[k, k]
        for i in _chain(lam, lam[k]):
            for j in _chain(lam, i):
                H[i, j] = H[i, j] - H[k, i] * H[k, j]
    return _lower(lam, H, be, unit=False)


def _lower(lam, H, be, unit):
    n = len(lam)
    L = be.zeros(n, n)
    for k in range(n):
        L[k, k] = 1.0 if unit else H[k, k]
        for j in _chain(lam, lam[k]):
            L[k, j] = H[k, j]
    return L


# --- products with L (Featherstone 2005 Table 3), unit diagonal when ``unit`` ----------

def mul_L(lam, L, x, be, unit=True):
    """``y = L x``: y_i = L_ii x_i + Σ_{j ∈ anc(i)} L_ij x_j."""
    return be.vcat([(x[i, 0] if unit else L[i, i] * x[i, 0])
                    + _sum([L[i, j] * x[j, 0] for j in _chain(lam, lam[i])]) for i in range(len(lam))])


def mul_Lt(lam, L, x, be, unit=True):
    """``y = L^T x``: scatter each row i of L onto its ancestors."""
    n = len(lam)
    y = [x[i, 0] if unit else L[i, i] * x[i, 0] for i in range(n)]
    for i in reversed(range(n)):
        for j in _chain(lam, lam[i]):
            y[j] = y[j] + L[i, j] * x[i, 0]
    return be.vcat(y)


def solve_L(lam, L, b, be, unit=True):
    """``x = L^-1 b``: forward substitution root to leaves."""
    x = []
    for i in range(len(lam)):
        xi = b[i, 0] - _sum([L[i, j] * x[j] for j in _chain(lam, lam[i])])
        x.append(xi if unit else xi / L[i, i])
    return be.vcat(x)


def solve_Lt(lam, L, b, be, unit=True):
    """``x = L^-T b``: back substitution leaves to root."""
    y = [b[i, 0] for i in range(len(lam))]
    x = [None] * len(lam)
    for i in reversed(range(len(lam))):
        x[i] = y[i] if unit else y[i] / L[i, i]
        for j in _chain(lam, lam[i]):
            y[j] = y[j] - L[i, j] * x[i]
    return be.vcat(x)


def ltdl_solve(lam, L, D, b, be):
    """``x = H^-1 b = L^-1 D^-1 L^-T b`` (Featherstone 2005 §5)."""
    y = solve_Lt(lam, L, b, be)
    y = be.vcat([y[i, 0] / D[i, 0] for i in range(len(lam))])
    return solve_L(lam, L, y, be)


def _sum(terms):
    out = 0.0
    for t in terms:
        out = t if isinstance(out, float) and out == 0.0 else out + t
    return out


# --- registered entry points -----------------------------------------------------------

def ltdl(model: Model, q, *, be):
    """``M(q) = L^T D L``: returns (L with unit diagonal, D as a column)."""
    (M,) = crba(model, q, be=be)
    L, D = ltdl_factor(model.dof_parents(), M, be)
    be.mark("factorisation", L, D)
    return L, D


def ltl(model: Model, q, *, be):
    """``M(q) = L^T L``: returns L."""
    (M,) = crba(model, q, be=be)
    L = ltl_factor(model.dof_parents(), M, be)
    be.mark("factorisation", L)
    return (L,)


def crba_solve(model: Model, q, b, *, be):
    """``x = M(q)^-1 b`` through CRBA and the LTDL factorisation."""
    lam = model.dof_parents()
    (M,) = crba(model, q, be=be)
    L, D = ltdl_factor(lam, M, be)
    be.mark("factorisation", L, D)
    x = ltdl_solve(lam, L, D, b, be)
    be.mark("solve", x)
    return (x,)
