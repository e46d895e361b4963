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
from .caba_osim import caba_osim, caba_osimf
from .constrained_aba import constrained_aba
from .crba import crba
from .delassus import delassus, delassus_inputs, matrix_output
from .impulse import impulse, impulse_inputs, impulse_outputs
from .kkt_osim import kkt_delassus, kkt_osim
from .ltdl import crba_solve, ltdl, ltl
from .ltl_osim import ltl_osim
from .prox_lcp import prox_lcp
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
    Algorithm("prox_lcp", prox_lcp, constrained_inputs, constrained_outputs,
              "forward dynamics with unilateral normal rows (3D+/6D+): LCP by projected proximal Gauss-Seidel "
              "on the sparse KKT factorisation", "Tedrake 2012 §3.1, Carpentier 2021 eq. 18", constrained=True),
    Algorithm("impulse", impulse, impulse_inputs, impulse_outputs,
              "impact map (v_plus, impulse): M (v+ - v-) = J^T impulse, J v+ = -e J v-, by constrainedABA's "
              "proximal sweeps", "Tedrake 2012 §3.2, Sathya 2024 Alg. 1-3", constrained=True),
    Algorithm("delassus", delassus, delassus_inputs("delassus"), matrix_output("Delassus"),
              "Delassus matrix J M^-1 J^T by CRBA, sparse LTDL and sparse back-substitution",
              "Featherstone 2005 §5", constrained=True),
    Algorithm("kkt_delassus", kkt_delassus, delassus_inputs("kkt_delassus"), matrix_output("Delassus"),
              "Delassus matrix J M^-1 J^T as the Schur complement of the sparse KKT joint pass",
              "Carpentier 2021 Alg. 1, §IV-E", constrained=True),
    Algorithm("caba_osim", caba_osim, delassus_inputs("caba_osim"), matrix_output("Lambda"),
              "damped Delassus inverse (J M^-1 J^T + R)^-1 by the inversion lemma on articulated inertias, O(n + m^2)",
              "Sathya 2024 Alg. 5, eq. 40", constrained=True),
    Algorithm("caba_osimf", caba_osimf, delassus_inputs("caba_osimf"), matrix_output("Lambda"),
              "damped Delassus inverse as caba_osim, split at the floating base",
              "Sathya 2024 §VI-B, eq. 41", constrained=True),
    Algorithm("ltl_osim", ltl_osim, delassus_inputs("ltl_osim"), matrix_output("Lambda"),
              "damped Delassus inverse by sparse LTL of M, then dense Cholesky and inverse",
              "Sathya 2024 §VIII-C (LTL-OSIM), Featherstone 2005", constrained=True),
    Algorithm("kkt_osim", kkt_osim, delassus_inputs("kkt_osim"), matrix_output("Lambda"),
              "damped Delassus inverse from the sparse LDL^T of the KKT matrix",
              "Carpentier 2021 Alg. 1, eq. 24, §IV-E", constrained=True),
]}
