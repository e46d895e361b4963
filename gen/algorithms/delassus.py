"""The Delassus matrix ``J M^-1 J^T`` through the sparse LTDL factorisation of M, and the
pieces shared by the Delassus / operational-space-inertia (OSIM) algorithms
(``delassus``, ``kkt_delassus``, ``ltl_osim``, ``kkt_osim``, ``caba_osim``, ``caba_osimf``).

**The method** (Featherstone 2005 §5, docs/REFERENCES.md): CRBA,
then ``M = L^T D L`` (:func:`ltdl.ltdl_factor`, no fill-in), so that::

    J M^-1 J^T = (J L^-1) D^-1 (J L^-1)^T = Z D^-1 Z^T,    z_r = L^-T j_r.

Each row ``z_r`` is a back-substitution leaves to root (Table 3's ``L^-T``) that only
touches the dofs supporting the row's constraint and their ancestors (the tree's
sparsity: ``z_r`` is as sparse as ``j_r`` up to the ancestor closure), and entry
``(r, s)`` sums over the dofs supporting both rows.  The result is symmetric: the upper
triangle is computed and mirrored.

**Conventions.**  ``J`` is the LOCAL constraint Jacobian of :mod:`gen.constraints`
(Pinocchio's ``RigidConstraintModel`` with ``LOCAL`` reference frames), so the result is
Pinocchio's ``computeDelassusMatrix``.  Loop closures between two moving bodies are
handled (their rows are supported by both branches).

**Damping of the OSIM algorithms** (Pinocchio's sense, as the proximal solvers, see
:mod:`gen.algorithms.proximal`): they return the damped Delassus inverse
``Lambda_mu = (J M^-1 J^T + R)^-1`` with ``R = diag(rho)``, ``rho = mu / weight`` on the
rows of each constraint (:meth:`gen.constraints.ConstraintSet.damping`), ``mu`` default
``1e-6``: Pinocchio's ``computeDampedDelassusMatrixInverse(..., mu)`` for unit weights.
Sathya 2024 writes the penalty ``mu_S = 1 / mu`` (``1e6``):
``Lambda_mu^-1 = Lambda^-1 + (1/mu_S) I`` (eq. 13b); a weight ``w`` multiplies
``mu_S`` (Remark 2, ``R_E^-1``).  Baumgarte gains play no role.

Shapes: q (nq,1) -> Delassus (m,m).  The constraint set is fixed at trace time and must
not be empty.
"""
from __future__ import annotations

from ..constraint_spec import as_constraint_set
from ..constraints import ConstraintSet
from ..errors import RbdgenError
from ..model import Model
from .crba import crba
from .ltdl import ltdl_factor


def delassus(model: Model, q, *, be, cset=None):
    """``J M^-1 J^T`` (m x m) at q for the constraint set ``cset`` (module docstring)."""
    cset = delassus_set(model, cset, "delassus")
    lam = model.dof_parents()
    (M,) = crba(model, q, be=be)
    L, D = ltdl_factor(lam, M, be)
    Dinv = [be.reciprocal(D[k, 0]) for k in range(model.nv)]
    be.mark("factorisation", L, be.vcat(Dinv))
    J = cset.jacobian(model, q, be=be)
    be.mark("jacobian", J)
    sup = row_supports(model, cset)
    Z = [back_substitute(lam, L, J, r, sup[r], unit=True) for r in range(cset.m)]   # z = L^-T j
    ZD = [{k: z[k] * Dinv[k] for k in z} for z in Z]                               # D^-1 z
    out = gram(Z, ZD, sup, be)                                                     # Z D^-1 Z^T
    be.mark("delassus", out)
    return (out,)


# --- registry helpers ----------------------------------------------------------------------

def damping(cset: ConstraintSet, mu, params, runtime_params, be) -> list:
    """Per-row ``rho = mu / weight`` of a damped Delassus inverse: floats from the built-in
    ``mu`` and weights, or, with ``runtime_params`` (the row's run-time input names, registry
    ``runtime``: ``mu`` 1 x 1, ``weights`` one per constraint), from the trailing inputs
    ``params``: numbers on the NumPy path (checked), one backend value per constraint in a
    trace (docs/ARCHITECTURE.md, "Run-time parameters")."""
    if not runtime_params:
        return [float(x) for x in cset.damping(mu)]
    given = dict(zip(runtime_params, params))
    mu = given["mu"][0, 0]
    weights = [given["weights"][c, 0] for c in range(len(cset))]
    if not be.symbolic:
        return [float(x) for x in cset.with_weights([float(w) for w in weights]).damping(float(mu))]
    return [mu / w for c, w in zip(cset.constraints, weights) for _ in range(c.size)]


def delassus_set(model: Model, cset, name: str) -> ConstraintSet:
    """The (validated) constraint set of a Delassus algorithm; it must not be empty."""
    cset = as_constraint_set(model, cset)
    if not cset.m:
        raise RbdgenError(f"{name} computes an m x m matrix over the constraints: give constraints, "
                          f"e.g. '6D:FRAME' or '3D:FRAME_A,3D:FRAME_B'")
    return cset


def delassus_inputs(name: str):
    """Registry inputs ``[("q", nq)]``, the constraint set checked early."""
    def inputs(model: Model, cset):
        delassus_set(model, cset, name)
        return [("q", model.nq)]
    return inputs


def matrix_output(out: str):
    """Registry outputs ``[(out, m, m)]``."""
    def outputs(model: Model, cset):
        m = as_constraint_set(model, cset).m
        return [(out, m, m)]
    return outputs


# --- structure (plain ints) and sparse pieces -------------------------------------------------

def row_supports(model: Model, cset: ConstraintSet) -> list[list[int]]:
    """Per constraint row, the dofs where ``J L^-1`` may be non-zero: the ancestor closure
    (over the expanded parent array) of the constraint's support, ascending."""
    lam = model.dof_parents()
    out = []
    for c, con in enumerate(cset.constraints):
        s: set[int] = set()
        for d in cset.support(model, c):
            while d != -1 and d not in s:
                s.add(d)
                d = lam[d]
        out += [sorted(s)] * con.size
    return out


def back_substitute(lam, L, J, r, support, unit: bool) -> dict:
    """``z = L^-T j_r`` on the dofs of ``support`` (ancestor-closed): leaves to root,
    ``z_i = y_i / L_ii`` (1 if ``unit``), ``y_j -= L_ij z_i`` for the ancestors j of i
    (Featherstone 2005 Table 3).  Returns {dof: value}."""
    y = {k: J[r, k] for k in support}
    for i in reversed(support):
        if not unit:
            y[i] = y[i] / L[i, i]
        j = lam[i]
        while j != -1:
            y[j] = y[j] - L[i, j] * y[i]
            j = lam[j]
    return y


def gram(Z, ZW, sup, be, diag=None):
    """``G = Z W Z^T (+ diag)``, ``G_rs = sum_k Z_rk (W Z^T)_ks`` over the dofs supporting
    both rows; ``ZW`` the rows already scaled (``Z`` itself for ``W = 1``).  Upper
    triangle computed, mirrored."""
    m = len(Z)
    sets = [set(s) for s in sup]
    G = be.zeros(m, m)
    for r in range(m):
        for s in range(r, m):
            g = dot([(Z[r][k], ZW[s][k]) for k in sorted(sets[r] & sets[s])])
            if diag is not None and r == s:
                g = g + diag[r]
            G[r, s] = g
            G[s, r] = g
    return G


def dot(pairs):
    """``sum a b`` over (a, b) pairs, 0.0 when empty (no leading ``0 +``)."""
    out = 0.0
    for a, b in pairs:
        out = a * b if isinstance(out, float) and out == 0.0 else out + a * b
    return out


def inverse_from_lower(m: int, L, dinv, be):
    """``A^-1 = V diag(dinv) V^T`` with ``V = L^-1`` for ``A = L^T diag(1/dinv) L``:
    ``L(i, j)`` gives the lower factor (``j <= i``); with ``dinv`` None the factor is
    a Cholesky one (``A = L^T L``, diagonal from ``L``), otherwise L is unit lower.
    ``V`` by forward substitution, ``V_ij = -V_ii sum_{k=j}^{i-1} L_ik V_kj``; the result's
    upper triangle is computed and mirrored."""
    V = [[None] * m for _ in range(m)]
    for i in range(m):
        V[i][i] = 1.0 if dinv is not None else be.reciprocal(L(i, i))
        for j in range(i):
            s = dot([(L(i, k), V[k][j]) for k in range(j, i)])
            V[i][j] = -s if dinv is not None else -(s * V[i][i])
    VW = V if dinv is None else [[V[i][k] * dinv[k] for k in range(i + 1)] for i in range(m)]
    out = be.zeros(m, m)
    for i in range(m):
        for j in range(i, m):
            out[i, j] = dot([(VW[i][k], V[j][k]) for k in range(i + 1)])
            out[j, i] = out[i, j]
    return out
