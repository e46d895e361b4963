"""Small dense symmetric positive-definite solves, unrolled over the backend (used for
the 6x6 D block of a free-flyer joint in ABA).  ``A = L D L^T`` without square roots."""
from __future__ import annotations


def ldlt_solve(A, B, be):
    """``X = A^-1 B`` for a small SPD matrix A (n x n) and B (n x k)."""
    n = A.shape[0]
    L = [[None] * n for _ in range(n)]
    D = [None] * n
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d = d - L[j][k] * L[j][k] * D[k]
        D[j] = d
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k] * D[k]
            L[i][j] = s / d
    cols = []
    for c in range(B.shape[1]):
        y = [None] * n
        for i in range(n):                       # L y = b
            s = B[i, c]
            for k in range(i):
                s = s - L[i][k] * y[k]
            y[i] = s
        x = [None] * n
        for i in reversed(range(n)):             # D L^T x = y
            s = y[i] / D[i]
            for k in range(i + 1, n):
                s = s - L[k][i] * x[k]
            x[i] = s
        cols.append(be.vcat(x))
    return be.hcat(cols)
