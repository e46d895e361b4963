"""Tracing: run a registered algorithm on CasADi SX symbols (DESIGN §1).

``trace(model, "aba")`` gives a :class:`Trace`: the symbolic inputs, the output
expressions after common-subexpression elimination, and the phase marks recorded by the
backend, from which :mod:`opcount` attributes operations to phases and :mod:`gen.emit`
generates C.  Structure (parents, joint kinds, constraint placement, iteration counts)
is resolved here, at trace time, which is what makes the emitted code robot-specific.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca

from .algorithms import Algorithm
from .api import get_algorithm
from .backend import SXBackend
from .model import Model


@dataclass
class Trace:
    model: Model
    algorithm: Algorithm
    cset: object
    options: dict
    inputs: list[tuple[str, ca.SX]]
    outputs: list[tuple[str, ca.SX]]
    phases: list[tuple[str, list[ca.SX]]] = field(default_factory=list)

    def function(self, name: str | None = None) -> ca.Function:
        """The whole algorithm as one ``casadi.Function`` (inputs -> outputs)."""
        return ca.Function(name or self.algorithm.name,
                           [s for _, s in self.inputs], [e for _, e in self.outputs],
                           [n for n, _ in self.inputs], [n for n, _ in self.outputs])


def trace(model: Model, algorithm: str | Algorithm, cset=None, **options) -> Trace:
    algo = algorithm if isinstance(algorithm, Algorithm) else get_algorithm(algorithm)
    be = SXBackend()
    syms = [(name, be.sym(name, n)) for name, n in algo.inputs(model, cset)]
    extra = {"cset": cset} if algo.constrained else {}
    outs = algo.fn(model, *[s for _, s in syms], be=be, **extra, **options)
    names = [n for n, _, _ in algo.outputs(model, cset)]
    exprs = ca.cse([ca.SX(o) for o in outs])          # merge repeated sub-expressions, jointly
    return Trace(model, algo, cset, dict(options), syms, list(zip(names, exprs)), be.phases)
