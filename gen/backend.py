"""The narrow numeric interface algorithms are written against (DESIGN §3.1).

Two implementations: :data:`NUMPY` (float64, the reference path) and :class:`SXBackend`
(CasADi SX, the tracing path).  Every quantity is 2-D so ``@``, ``.T`` and ``[i, j]``
mean the same in both; vectors are columns.  Algorithms never import casadi.

``mark(phase, *values)`` closes a named phase of an algorithm and lists the quantities
later phases consume.  It is a no-op numerically; the SX backend records it so the op
counter can attribute operations to phases (ops of phase k = ops needed for the values
marked up to k minus those needed up to k-1).

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

    def sym(self, name: str, n: int, m: int = 1):
        raise TypeError("the NumPy backend has no symbols")


class SXBackend:
    """CasADi SX backend; one instance per trace (it records the phase marks)."""

    name = "sx"
    symbolic = True

    def __init__(self) -> None:
        self.ca = ca
        self.phases: list[tuple[str, list]] = []

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

    def sym(self, name: str, n: int, m: int = 1):
        return self.ca.SX.sym(name, n, m)


NUMPY = NumpyBackend()
