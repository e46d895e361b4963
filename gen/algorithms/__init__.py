"""The one registry of algorithms (DESIGN §3.10).

Each entry names the function (written once over the backend), its inputs and outputs
with sizes for a given model (and, for constrained algorithms, constraint set), and a
one-line summary.  Tracing, op counting, emission, building, the generic C binding and
the CLI are generic over this table: adding an algorithm means adding a module and a row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .aba import aba
from .constrained_aba import constrained_aba
from .crba import crba
from .ltdl import crba_solve, ltdl, ltl
from .prox_ltl import prox_ltl
from .prox_ltls import prox_ltls
from .prox_pv import prox_pv
from .proximal import constrained_inputs, constrained_outputs
from .rnea import nle, rnea


@dataclass(frozen=True)
class Algorithm:
    name: str
    fn: Callable                 # fn(model, *inputs, be) -> tuple of 2-D outputs
    inputs: Callable             # (model, cset) -> [(name, rows)]
    outputs: Callable            # (model, cset) -> [(name, rows, cols)]
    summary: str
    source: str
    constrained: bool = False


def _q(m, c):
    return [("q", m.nq)]


def _qv(m, c):
    return [("q", m.nq), ("v", m.nv)]


def _qvx(x):
    return lambda m, c: [("q", m.nq), ("v", m.nv), (x, m.nv)]


def _vec(name):
    return lambda m, c: [(name, m.nv, 1)]


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("rnea", rnea, _qvx("a"), _vec("tau"),
              "inverse dynamics tau = M(q) a + b(q, v)", "Featherstone 2008 Table 5.1"),
    Algorithm("nle", nle, _qv, _vec("b"),
              "nonlinear effects b(q, v) (Coriolis, centrifugal, gravity)", "RNEA with a = 0"),
    Algorithm("crba", crba, _q, lambda m, c: [("M", m.nv, m.nv)],
              "joint-space inertia matrix M(q), full symmetric", "Featherstone 2008 Table 6.2"),
    Algorithm("ltdl", ltdl, _q, lambda m, c: [("L", m.nv, m.nv), ("D", m.nv, 1)],
              "sparse factorisation M = L^T D L (unit lower L)", "Featherstone 2005 Table 2"),
    Algorithm("ltl", ltl, _q, lambda m, c: [("L", m.nv, m.nv)],
              "sparse Cholesky M = L^T L", "Featherstone 2005 Table 2"),
    Algorithm("crba_solve", crba_solve, lambda m, c: [("q", m.nq), ("b", m.nv)], _vec("x"),
              "x = M(q)^-1 b by CRBA + LTDL + sparse substitution", "Featherstone 2005 §5"),
    Algorithm("aba", aba, _qvx("tau"), _vec("ddq"),
              "forward dynamics ddq = M^-1 (tau - b)", "Featherstone 2008 Table 7.1"),
    Algorithm("prox_ltl", prox_ltl, constrained_inputs, constrained_outputs,
              "constrained dynamics (ddq, lam): proximal iterations on the sparse LDL^T of the KKT matrix",
              "Carpentier 2021 Alg. 1, eq. 18", constrained=True),
    Algorithm("prox_ltls", prox_ltls, constrained_inputs, constrained_outputs,
              "constrained dynamics (ddq, lam): ALM on the sparse LTDL of M + J^T J / mu",
              "Sathya 2024 eq. 16, 24", constrained=True),
    Algorithm("constrained_aba", constrained_aba, constrained_inputs, constrained_outputs,
              "constrained dynamics (ddq, lam): ALM in maximal coordinates, O(n + m) sweeps",
              "Sathya 2024 Alg. 1-3", constrained=True),
    Algorithm("prox_pv", prox_pv, constrained_inputs, constrained_outputs,
              "constrained dynamics (ddq, lam): Popov-Vereshchagin with proximal dual iterations",
              "Sathya 2024 Alg. 4", constrained=True),
]}
