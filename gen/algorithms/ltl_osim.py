"""LTL-OSIM: the damped Delassus inverse ``Lambda_mu = (J M^-1 J^T + R)^-1`` through the
sparse Cholesky factorisation of M, then a dense Cholesky of ``Lambda_mu^-1`` and its
inverse.

The standard joint-space method that Sathya & Carpentier 2024 benchmark cABA-OSIM
against (§VIII-C, "LTL-OSIM"; the inverse is formed, not only the Cholesky factor, as
in their comparison), in Featherstone 2005's reversed form (docs/REFERENCES.md):

1. CRBA, ``M = L^T L`` (Featherstone 2005 Table 2 right, no fill-in);
2. ``Y = J L^-1``: each row ``y_r = L^-T j_r`` by back-substitution over the dofs that
   support its constraint and their ancestors (Table 3);
3. ``Lambda_mu^-1 = Y Y^T + R`` over the dofs supporting both rows (upper triangle, mirrored);
4. the dense ``m x m`` Cholesky ``Lambda_mu^-1 = C^T C`` (the same reversed LTL on a
   fully connected chain), then ``Lambda_mu = C^-1 C^-T``.

O(n d^2 + m n d + m^3) for tree depth d.  Damping: ``R = diag(mu / weight)``,
Pinocchio's ``mu`` (default 1e-6; Sathya's penalty is 1/mu), see
:mod:`gen.algorithms.delassus`.  Loop closures between two moving bodies are handled.
Shapes: q (nq,1) -> Lambda (m,m).
"""
from __future__ import annotations

from ..model import Model
from .crba import crba
from .delassus import (
    back_substitute,
    damping,
    delassus_set,
    gram,
    inverse_from_lower,
    row_supports,
)
from .ltdl import ltl_factor
from .proximal import DEFAULT_MU


def ltl_osim(model: Model, q, *params, be, cset=None, mu=DEFAULT_MU, runtime_params=()):
    """``Lambda_mu = (J M^-1 J^T + R)^-1`` (m x m) at q, ``R = diag(mu / weight)``;
    ``params``: run-time ``mu`` and weights (:func:`~gen.algorithms.delassus.damping`)."""
    cset = delassus_set(model, cset, "ltl_osim")
    m, rho = cset.m, damping(cset, mu, params, runtime_params, be)
    lam = model.dof_parents()
    (M,) = crba(model, q, be=be)
    L = ltl_factor(lam, M, be)                                                    # M = L^T L
    be.mark("factorisation", L)
    J = cset.jacobian(model, q, be=be)
    be.mark("jacobian", J)
    sup = row_supports(model, cset)
    Y = [back_substitute(lam, L, J, r, sup[r], unit=False) for r in range(m)]    # y = L^-T j
    A = gram(Y, Y, sup, be, diag=rho)                                             # Y Y^T + R
    be.mark("delassus", A)
    C = ltl_factor([r - 1 for r in range(m)], A, be)                              # A = C^T C
    be.mark("cholesky", C)
    out = inverse_from_lower(m, lambda i, j: C[i, j], None, be)                   # C^-1 C^-T
    be.mark("inverse", out)
    return (out,)
