"""Small dense symmetric matrices, unrolled over the backend: positive-definite solves
(used for the 6x6 D block of a free-flyer joint in ABA) and products known to be
symmetric (:func:`sym_product`).  ``A = L diag(d) L^T`` without square
roots; factor once, solve for as many right-hand sides as needed.  The factor keeps the
reciprocal pivots ``1/d`` so every later division is a multiplication."""
from __future__ import annotations


def ldlt_factor(A, be):
    """Return (L, d, dinv): L as nested lists (strict lower part), d the pivots and dinv
    their reciprocals, for a small SPD matrix A (n x n) given as a backend matrix."""
    n = A.shape[0]
    L = [[None] * n for _ in range(n)]
    d, dinv = [None] * n, [None] * n
    for j in range(n):
        dj = A[j, j]
        for k in range(j):
            dj = dj - L[j][k] * L[j][k] * d[k]
        d[j], dinv[j] = dj, be.reciprocal(dj)
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k] * d[k]
            L[i][j] = s * dinv[j]
    return L, d, dinv


def ldlt_solve(factor, B, be):
    """``X = A^-1 B`` from ``ldlt_factor(A)``, B n x k."""
    L, _, dinv = factor
    n = len(dinv)
    cols = []
    for c in range(B.shape[1]):
        y = [None] * n
        for i in range(n):                       # L y = b
            s = B[i, c]
            for k in range(i):
                s = s - L[i][k] * y[k]
            y[i] = s
        x = [None] * n
        for i in reversed(range(n)):             # diag(d) L^T x = y
            s = y[i] * dinv[i]
            for k in range(i + 1, n):
                s = s - L[k][i] * x[k]
            x[i] = s
        cols.append(be.vcat(x))
    return be.hcat(cols)


def sym_product(A, B, be):
    """``A^T B`` for a product known to be symmetric: upper triangle computed, mirrored."""
    n = A.shape[1]
    out = be.zeros(n, n)
    for r in range(n):
        for c in range(r, n):
            out[r, c] = (A[:, r:r + 1].T @ B[:, c:c + 1])[0, 0]
            out[c, r] = out[r, c]
    return out
