"""The narrow numeric interface algorithms are written against (docs/DESIGN.md §3.1).

Two implementations: :data:`NUMPY` (float64, the reference path) and :class:`SXBackend`
(CasADi SX, the tracing path).  Every quantity is 2-D so ``@``, ``.T`` and ``[i, j]``
mean the same in both; vectors are columns.  Algorithms never import casadi.

``mark(phase, *values)`` closes a named phase of an algorithm and lists the quantities
later phases consume.  It is a no-op numerically; the SX backend records it so the op
counter can attribute operations to phases (ops of phase k = ops needed for the values
marked up to k minus those needed up to k-1).

``product(base, terms)`` is ``base + sum(sign * A @ X for sign, A, X in terms)`` with
``A`` dense and ``X`` sparse (its zero entries are structural: they come from the tree).
The SX backend forms it entry by entry in the order the C writes it, one multiply-add
per nonzero of ``X`` and row of ``A`` (so the op count is the emitted C's), and records
it: when the result is an output of the kernel, or the ``A`` of a later product,
:mod:`gen.products` writes it as C loops over ``A``'s contiguous columns, which the
compiler vectorises, instead of straight-line code.

``converged(residual, tol)`` is the real test for floats and always ``False`` for SX,
so a traced kernel runs a fixed, recorded number of iterations.
"""
from __future__ import annotations

import casadi as ca  # the only place the algorithms' backend touches casadi
import numpy as np


class NumpyBackend:
    name = "numpy"
    symbolic = False

    def zeros(self, n: int, m: int = 1):
        return np.zeros((n, m))

    def eye(self, n: int):
        return np.eye(n)

    def asarray(self, x):
        a = np.asarray(x, dtype=float)
        return a.reshape(-1, 1) if a.ndim <= 1 else a

    def vcat(self, items):
        return np.vstack([np.reshape(np.asarray(x, dtype=float), (-1, 1)) if np.ndim(x) < 2 else x
                          for x in items])

    def hcat(self, items):
        return np.hstack([self.asarray(x) if np.ndim(x) < 2 else x for x in items])

    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    sqrt = staticmethod(np.sqrt)
    fmax = staticmethod(np.fmax)
    atan2 = staticmethod(np.arctan2)

    @staticmethod
    def if_else(cond, a, b):
        return a if cond else b

    @staticmethod
    def reciprocal(x):
        return 1.0 / x

    @staticmethod
    def converged(residual, tol) -> bool:
        return bool(residual <= tol)

    def mark(self, phase: str, *values) -> None:
        pass

    @staticmethod
    def product(base, terms):
        out = np.array(base, dtype=float)
        for sign, A, X in terms:
            out += sign * (A @ X)
        return out

    def sym(self, name: str, n: int, m: int = 1):
        raise TypeError("the NumPy backend has no symbols")


class SXBackend:
    """CasADi SX backend; one instance per trace (it records the phase marks)."""

    name = "sx"
    symbolic = True

    def __init__(self) -> None:
        self.ca = ca
        self.phases: list[tuple[str, list]] = []
        #: the products formed by :meth:`product`: (result, base, terms), copies
        self.products: list[tuple] = []

    def zeros(self, n: int, m: int = 1):
        return self.ca.SX.zeros(n, m)

    def eye(self, n: int):
        return self.ca.SX.eye(n)

    def asarray(self, x):
        if isinstance(x, self.ca.SX):
            return x
        a = np.asarray(x, dtype=float)
        return self.ca.SX(a.reshape(-1, 1) if a.ndim <= 1 else a)

    def vcat(self, items):
        return self.ca.vertcat(*items)

    def hcat(self, items):
        return self.ca.horzcat(*items)

    def sin(self, x):
        return self.ca.sin(x)

    def cos(self, x):
        return self.ca.cos(x)

    def sqrt(self, x):
        return self.ca.sqrt(x)

    def fmax(self, a, b):
        return self.ca.fmax(a, b)

    def atan2(self, y, x):
        return self.ca.atan2(y, x)

    def if_else(self, cond, a, b):
        return self.ca.if_else(cond, a, b)

    def reciprocal(self, x):
        """``1/x`` to be multiplied by many times.  CasADi rewrites ``y * (1/x)`` into
        ``y / x`` when ``1/x`` is its inverse node, so every product would become a
        division again; ``2/(2x)`` is the same double (scaling by 2 is exact) and keeps
        the products as multiplications, for one extra multiplication."""
        return 2.0 / (2.0 * x)

    @staticmethod
    def converged(residual, tol) -> bool:
        return False

    def mark(self, phase: str, *values) -> None:
        flat = [v for v in values if v is not None]
        self.phases.append((phase, flat))

    def product(self, base, terms):
        """``base + sum(sign * A @ X)`` (module docstring, ``sign`` = +-1), in the C's
        association: per output column c and term, the sum over the nonzeros ``X[k, c]``
        in k order of ``A[:, k] X[k, c]``, then ``Y[:, c] += sign * sum``."""
        ca = self.ca
        base = ca.densify(ca.SX(base))
        rows, cols = base.shape
        terms = [(float(sign), ca.densify(ca.SX(A)), ca.densify(ca.SX(X))) for sign, A, X in terms]
        for sign, A, X in terms:
            if sign not in (1.0, -1.0) or A.shape != (rows, X.shape[0]) or X.shape[1] != cols:
                raise ValueError(f"product: {sign} * {A.shape} @ {X.shape} into {base.shape}")
        dense = [(sign, A.elements(), X.elements(), X.shape[0]) for sign, A, X in terms]
        y = base.elements()                       # column-major, as the C
        for c in range(cols):
            col = y[c * rows:(c + 1) * rows]
            for sign, a, x, inner in dense:
                nz = [k for k in range(inner) if not x[c * inner + k].is_zero()]
                if not nz:
                    continue
                total = [ar * x[c * inner + nz[0]] for ar in a[nz[0] * rows:(nz[0] + 1) * rows]]
                for k in nz[1:]:
                    s = x[c * inner + k]
                    total = [t + ar * s for t, ar in zip(total, a[k * rows:(k + 1) * rows])]
                col = [u + t for u, t in zip(col, total)] if sign > 0 else [u - t for u, t in zip(col, total)]
            y[c * rows:(c + 1) * rows] = col
        Y = ca.reshape(ca.vertcat(ca.SX(0, 1), *y), rows, cols)
        self.products.append((Y, base, terms))
        return ca.SX(Y)

    def sym(self, name: str, n: int, m: int = 1):
        return self.ca.SX.sym(name, n, m)


NUMPY = NumpyBackend()
