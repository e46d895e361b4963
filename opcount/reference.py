"""Closed-form op counts of Featherstone 2005 and a dense LDLᵀ reference.

Featherstone, "Efficient Factorization of the Joint-Space Inertia Matrix for Branched
Kinematic Trees", IJRR 2005, §4 and Table 1.  With ``d_i`` the depth of dof ``i`` in
the expanded tree (root children have depth 1), ``D1 = Σ (d_i − 1)`` and
``D2 = Σ d_i (d_i − 1) / 2`` (Eqs. 8-9), the LTDL algorithm costs

=================================  ==========================
factorize ``H = Lᵀ D L``           ``D1 div + D2 (m + a)``
back-substitution ``H⁻¹ b``        ``n div + 2 D1 (m + a)``
``L x``, ``Lᵀ x``                  ``D1 (m + a)``
``L⁻¹ x``, ``L⁻ᵀ x``               ``D1 (m + a)``
=================================  ==========================

(subtractions count as additions).  :func:`structural_H` builds the symbolic matrix
those formulas assume: every structural non-zero of a JSIM (``H_ij`` with ``j``
ancestor-or-self of ``i``, symmetric) an independent SX symbol, exact zeros elsewhere.

:func:`dense_ldlt` is a textbook right-looking ``A = L D Lᵀ`` that knows nothing of
trees: on a fully symbolic n × n matrix it costs ``n(n−1)/2 div + (n³−n)/6 (m + a)``,
the "dense" figure of Featherstone §6 (4930m + 4495a for n = 30, div = m); on a
structurally sparse matrix SX skips every operation on an exact zero, so its count
measures the fill-in of the pivot order it is given.
"""
from __future__ import annotations

import casadi as ca

from gen.algorithms.ltdl import ltdl_factor, ltdl_solve
from gen.backend import SXBackend

from .counter import count_expr


def depths(lam: list[int]) -> list[int]:
    """Depth of each node of parent array ``lam`` (``lam[i] < i``, -1 = root)."""
    d: list[int] = []
    for p in lam:
        d.append(1 if p == -1 else d[p] + 1)
    return d


def featherstone_D(lam: list[int]) -> tuple[int, int]:
    """``(D1, D2)`` of Featherstone 2005 Eqs. (8)-(9)."""
    d = depths(lam)
    return sum(x - 1 for x in d), sum(x * (x - 1) // 2 for x in d)


def table1_ltdl(lam: list[int]) -> dict[str, dict[str, int]]:
    """Featherstone 2005 Table 1, LTDL column, as op-class counts."""
    n = len(lam)
    D1, D2 = featherstone_D(lam)
    return {"factorize": {"div": D1, "mul": D2, "add": D2},
            "back_substitution": {"div": n, "mul": 2 * D1, "add": 2 * D1},
            "mul_L": {"div": 0, "mul": D1, "add": D1},
            "solve_L": {"div": 0, "mul": D1, "add": D1}}


def dense_ldlt_formula(n: int) -> dict[str, int]:
    """Dense LDLᵀ of an n × n matrix: ``n(n−1)/2`` div, ``(n³−n)/6`` mul and add."""
    return {"div": n * (n - 1) // 2, "mul": (n ** 3 - n) // 6, "add": (n ** 3 - n) // 6}


def ancestors_or_self(lam: list[int], i: int) -> list[int]:
    out = []
    while i != -1:
        out.append(i)
        i = lam[i]
    return out


def structural_H(lam: list[int]) -> tuple[ca.SX, list[ca.SX]]:
    """A symmetric n × n SX matrix with an independent symbol ``H_i_j`` at every
    structural non-zero (``j`` ancestor-or-self of ``i``) and exact zeros elsewhere.
    Returns ``(H, symbols)``."""
    n = len(lam)
    H = ca.SX.zeros(n, n)
    syms = []
    for i in range(n):
        for j in ancestors_or_self(lam, i):
            s = ca.SX.sym(f"H_{i}_{j}")
            syms.append(s)
            H[i, j] = s
            H[j, i] = s
    return H, syms


def dense_ldlt(A, be):
    """Textbook dense ``A = L D Lᵀ`` (unit lower L), pivots taken top-left first:
    for each pivot k, ``l_ik = a_ik / a_kk`` and the trailing update
    ``a_ij −= l_ik a_jk`` on the lower triangle (k < j ≤ i).  Returns ``(L, D)``."""
    n = A.shape[0]
    a = [[A[i, j] for j in range(n)] for i in range(n)]
    for k in range(n):
        col = [a[i][k] for i in range(n)]             # unscaled column k
        for i in range(k + 1, n):
            lik = col[i] / col[k]
            for j in range(k + 1, i + 1):
                a[i][j] = a[i][j] - lik * col[j]
            a[i][k] = lik
    L = be.eye(n)
    for i in range(n):
        for j in range(i):
            L[i, j] = a[i][j]
    return L, be.vcat([a[k][k] for k in range(n)])


def _cls(c: dict) -> dict[str, int]:
    return {k: c[k] for k in ("div", "mul", "add", "total")} | {
        "rest": c["total"] - c["div"] - c["mul"] - c["add"]}


def ltdl_costs(lam: list[int]) -> dict:
    """Measured op counts of the LTDL factor and solve on :func:`structural_H`, the
    Table 1 predictions, and the dense-LDLᵀ contrasts, for parent array ``lam``."""

    be = SXBackend()
    n = len(lam)
    H, syms = structural_H(lam)
    L, D = ltdl_factor(lam, H, be)
    factor = count_expr(syms, [L, D])
    Ls, Ds, b = ca.SX.sym("L", n, n), ca.SX.sym("D", n), ca.SX.sym("b", n)
    solve = count_expr([Ls, Ds, b], [ltdl_solve(lam, Ls, Ds, b, be)])
    full, full_syms = structural_H(list(range(-1, n - 1)))   # a chain: every entry
    dense_full = count_expr(full_syms, list(dense_ldlt(full, be)))
    dense_sparse = count_expr(syms, list(dense_ldlt(H, be)))   # natural order: fill-in
    rev = list(reversed(range(n)))
    dense_rev = count_expr(syms, list(dense_ldlt(H[rev, rev], be)))  # no fill-in (§3)
    D1, D2 = featherstone_D(lam)
    pred = table1_ltdl(lam)
    return {"n": n, "D1": D1, "D2": D2, "d_max": max(depths(lam)) if n else 0,
            "factor": _cls(factor), "factor_table1": pred["factorize"],
            "solve": _cls(solve), "solve_table1": pred["back_substitution"],
            "dense": _cls(dense_full), "dense_formula": dense_ldlt_formula(n),
            "dense_natural_order_on_H": _cls(dense_sparse),
            "dense_reversed_order_on_H": _cls(dense_rev)}
