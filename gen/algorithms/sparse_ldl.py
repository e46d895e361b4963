"""Sparse LDL^T on a symbolic pattern, unrolled at trace time (Featherstone 2005 Table 2,
Carpentier 2021 Alg. 1): the fill pattern of ``A = L^T D L`` (unit lower ``L``,
elimination from the last index to the first), the factorisation with one reciprocal
per pivot, the two triangular solves and the inverse ``W D^-1 W^T`` (``W = L^-1``).
For a tree's expanded parent array the pattern is the ancestor chain (no fill,
Featherstone 2005 §4); for the KKT matrix with the constraint rows first it adds the
dense constraint block (Carpentier 2021 §IV-C).  Used by ``ltdl``, ``prox_ltl``,
``prox_ltls``, ``prox_lcp``, ``prox_pv`` (its dense Delassus factor), the OSIM rows,
``aba_derivatives`` and ``constrained_derivatives``.
"""
from __future__ import annotations

from ..model import Model


def fill_pattern(lower: list) -> list[list[int]]:
    """``lower[k]``: indices ``i < k`` with ``A[k, i]`` possibly non-zero.  Returns the
    pattern of L in ``A = L^T D L`` (unit lower L, elimination from the last index to the
    first), fill-in included, each row sorted descending.  For a tree's expanded parent
    array it is the ancestor chain (no fill, Featherstone 2005 §4); for the KKT matrix
    with constraint rows first it adds the dense constraint block (Carpentier 2021 §IV-C)."""
    pat = [set(s) for s in lower]
    for k in reversed(range(len(pat))):
        row = sorted(pat[k], reverse=True)
        for a, i in enumerate(row):
            pat[i].update(row[a + 1:])
        pat[k] = row
    return [list(p) for p in pat]


def ldl_factor(pattern, diag, off, be):
    """In place on scalars: ``A = L^T D L``.  ``diag[k] = A[k, k]``, ``off[(k, i)] =
    A[k, i]`` for ``i`` in ``pattern[k]`` (missing entries are 0).  Returns ``(1/D, L)``
    with ``L`` a dict over the pattern.  Loops run over the pattern at trace time."""
    d, H = list(diag), dict(off)
    dinv = ldl_eliminate(pattern, d, H, 0, be)
    return dinv, H


def ldl_eliminate(pattern, d, H, stop: int, be) -> list:
    """Eliminate indices ``len(d) - 1`` down to ``stop`` of ``A = L^T D L`` in place
    (``d``: pivots, ``H``: off-diagonal entries, overwritten by ``L`` on eliminated rows;
    afterwards ``d[:stop]``, ``H`` on ``[:stop]`` hold the Schur complement left).  Each
    pivot is final when its row is eliminated, so its reciprocal is taken once and the
    row is scaled by products (``be.reciprocal``).  Returns the reciprocals ``1/d[k]`` of
    the eliminated pivots (index ``k - stop``)."""
    dinv = [None] * (len(d) - stop)
    for k in reversed(range(stop, len(d))):
        dinv[k - stop] = rk = be.reciprocal(d[k])
        row = pattern[k]
        for a, i in enumerate(row):
            hki = H.get((k, i), 0.0)
            x = hki * rk
            d[i] = d[i] - x * hki
            for j in row[a + 1:]:
                H[(i, j)] = H.get((i, j), 0.0) - x * H.get((k, j), 0.0)
            H[(k, i)] = x
    return dinv


def ldl_solve(pattern, dinv, L, b):
    """``x = A^-1 b`` for ``A = L^T D L``: ``L^-T`` leaves to root, ``D^-1``, ``L^-1``."""
    return ldl_forward(pattern, L, ldl_backward(pattern, dinv, L, b), len(b))


def ldl_backward(pattern, dinv, L, b) -> list:
    """``D^-1 L^-T b`` (leaves to root), the first half of :func:`ldl_solve`."""
    y = list(b)
    for i in reversed(range(len(y))):
        for j in pattern[i]:
            y[j] = y[j] - L[(i, j)] * y[i]
    return [yi * di for yi, di in zip(y, dinv)]


def ldl_forward(pattern, L, y, stop: int, z=()) -> list:
    """``L^-1 y`` on the indices below ``stop`` (root to leaves), the second half of
    :func:`ldl_solve`, continuing the already solved leading entries ``z``."""
    z = list(z)
    for i in range(len(z), stop):
        zi = y[i]
        for j in pattern[i]:
            zi = zi - L[(i, j)] * z[j]
        z.append(zi)
    return z


def tree_lower(model: Model) -> list[set[int]]:
    """Ancestor dofs of every dof (the pattern of M below the diagonal)."""
    lam = model.dof_parents()
    out = []
    for k in range(model.nv):
        s, i = set(), lam[k]
        while i != -1:
            s.add(i)
            i = lam[i]
        out.append(s)
    return out


def tree_ldl(model: Model, M, be):
    """``(pattern, 1/D, L)`` of ``M = L^T D L`` (``M`` the joint-space inertia, an nv x nv
    backend matrix) on the tree pattern: no fill-in (Featherstone 2005 §4)."""
    pattern = fill_pattern(tree_lower(model))
    dinv, L = ldl_factor(pattern, [M[k, k] for k in range(model.nv)],
                         {(k, i): M[k, i] for k in range(model.nv) for i in pattern[k]}, be)
    return pattern, dinv, L


def dense_lower_inverse(pattern, L, be):
    """``W = L^-1`` (:func:`unit_lower_inverse`) as an n x n backend matrix."""
    W = be.zeros(len(pattern), len(pattern))
    for k, row in enumerate(unit_lower_inverse(pattern, L)):
        for j, wkj in row.items():
            W[k, j] = wkj
    return W


def inverse_as_product(W, dinv, be):
    """``W D^-1 W^T = V V^T`` with ``V = W D^-1/2``, formed by ``be.product`` (the C's
    vectorised loops, :mod:`gen.products`): entries (i, j) and (j, i) sum the same products
    ``V_ik V_jk = V_jk V_ik`` in the same k order, so it is exactly symmetric (NumPy:
    matmul's syrk for ``V @ V.T``)."""
    n = len(dinv)
    V = be.hcat([W[:, k:k + 1] * be.sqrt(dinv[k]) for k in range(n)])
    return be.product(be.zeros(n, n), [(1.0, V, V.T)])


def inverse_from_ltdl(pattern, dinv, L, be):
    """``M^-1 = W D^-1 W^T`` with ``W = L^-1`` (:func:`unit_lower_inverse`) for
    ``M = L^T D L``: ``M^-1_ij = sum_k W_ik W_jk / D_k`` over the common ancestors k of i
    and j (upper triangle, mirrored).  Returns ``(M^-1, W)`` (W as one dict per row)."""
    n = len(pattern)
    W = unit_lower_inverse(pattern, L)
    V = [{j: wkj * dinv[j] for j, wkj in W[k].items()} for k in range(n)]
    Minv = be.zeros(n, n)
    for i in range(n):
        for j in range(i, n):
            Minv[i, j] = sparse_dot(V[i], W[j])
            Minv[j, i] = Minv[i, j]
    return Minv, W


def unit_lower_inverse(pattern, L) -> list[dict]:
    """``W = L^-1`` of a unit lower ``L`` whose row k is non-zero on ``pattern[k]`` (the
    ancestors of k for a tree: W has the same pattern, Featherstone 2005 §4), one dict
    per row: ``W_kk = 1``, ``W_kj = -sum_m L_km W_mj`` over ``m`` in ``pattern[k]`` with j
    in ``{m} + pattern[m]``."""
    W = [{} for _ in range(len(pattern))]
    for k in range(len(pattern)):
        W[k][k] = 1.0
        for m in pattern[k]:
            for j, wmj in W[m].items():
                W[k][j] = W[k].get(j, 0.0) - L[(k, m)] * wmj
    return W


def sparse_dot(a: dict, b) -> object:
    """``sum_k a[k] b[k]`` over the keys of ``a`` present in ``b`` (a dict or a list;
    structural zeros of a traced list drop out of the graph), in increasing k."""
    keys = sorted(k for k in a if not isinstance(b, dict) or k in b)
    e = 0.0
    for k in keys:
        e = e + a[k] * b[k]
    return e
