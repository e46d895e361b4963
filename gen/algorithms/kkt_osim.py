"""The OSIM and the inverse OSIM read from the sparse factorisation of the KKT matrix.

Carpentier, Budhiraja, Mansard, RSS 2021 (docs/REFERENCES.md),
§IV-C to §IV-E.  With the constraint rows first (Pinocchio's sign, ``x = -lam``)::

    K_mu = [[-R, J], [J^T, M]] = [[I, J M^-1], [0, I]] diag(-Lambda_mu^-1, M) [[I, 0], [M^-1 J^T, I]]

so eliminating the joints leaves to root (Algorithm 1, "pass over the joints": the
tree's sparsity plus the constraint rows on their supporting joints, eq. 25-27) leaves
``-Lambda_mu^-1 = -(J M^-1 J^T + R)`` in the m x m block, and its dense ``L^T D L``
("dense factorization related to the OSIM") is the upper-left block of the KKT factors
(eq. 24, §IV-E: "U_Lambda^-1 and -D_Lambda^-1 correspond to the upper left block").

* ``kkt_osim``: ``Lambda_mu = (J M^-1 J^T + R)^-1`` from those factors,
  ``Lambda_mu = L_c^-1 (-D_c)^-1 L_c^-T`` (Carpentier 2021 §V-C, Fig. 7);
* ``kkt_delassus``: the inverse OSIM without damping, ``J M^-1 J^T`` (Fig. 6), read as
  the Schur complement left by the joint pass on ``K_0`` (``R = 0``: the dense block is
  not factored, so redundant sets are fine).

Damping: ``R = diag(mu / weight)``, Pinocchio's ``mu`` (default 1e-6; Sathya's penalty
is 1/mu), see :mod:`gen.algorithms.delassus`.  Loop closures between two moving bodies
are handled (the fill-in pattern is computed at trace time).
Shapes: q (nq,1) -> Lambda (m,m) / Delassus (m,m).
"""
from __future__ import annotations

from ..model import Model
from .crba import crba
from .delassus import damping, delassus_set, inverse_from_lower
from .prox_ltl import kkt_pattern
from .proximal import DEFAULT_MU
from .sparse_ldl import fill_pattern, ldl_eliminate, ldl_factor


def kkt_osim(model: Model, q, *params, be, cset=None, mu=DEFAULT_MU, runtime_params=()):
    """``Lambda_mu = (J M^-1 J^T + R)^-1`` (m x m) at q from the KKT factors (eq. 24);
    ``params``: run-time ``mu`` and weights (:func:`~gen.algorithms.delassus.damping`)."""
    cset = delassus_set(model, cset, "kkt_osim")
    m, rho = cset.m, damping(cset, mu, params, runtime_params, be)
    diag, off = _schur(model, cset, q, [-x for x in rho], be)             # -Lambda_mu^-1
    dense = fill_pattern([set(range(k)) for k in range(m)])
    dinv, Lc = ldl_factor(dense, diag, off, be)                           # = Lc^T Dc Lc
    be.mark("osim_factorisation", be.vcat(dinv), *[Lc[e] for e in sorted(Lc)])
    out = inverse_from_lower(m, lambda i, j: Lc[(i, j)], [-x for x in dinv], be)
    be.mark("inverse", out)
    return (out,)


def kkt_delassus(model: Model, q, *, be, cset=None):
    """``J M^-1 J^T`` (m x m) at q: the Schur complement left by the joint pass on ``K_0``."""
    cset = delassus_set(model, cset, "kkt_delassus")
    m = cset.m
    diag, off = _schur(model, cset, q, [0.0] * m, be)                    # -J M^-1 J^T
    out = be.zeros(m, m)
    for r in range(m):
        out[r, r] = -diag[r]
        for s in range(r):
            out[r, s] = -off[(r, s)]
            out[s, r] = out[r, s]
    be.mark("delassus", out)
    return (out,)


def _schur(model: Model, cset, q, block, be):
    """CRBA, J, and the pass over the joints of Algorithm 1 on ``[[diag(block), J],
    [J^T, M]]``: returns the m x m block left, ``diag(block) - J M^-1 J^T``, as its
    diagonal (list) and strictly lower part ({(r, s): value}, s < r)."""
    m = cset.m
    (M,) = crba(model, q, be=be)
    J = cset.jacobian(model, q, be=be)
    be.mark("jacobian", J)
    pattern, d, H = kkt_pattern(model, cset, M, J, block)
    ldl_eliminate(pattern, d, H, m, be)                 # eliminate the joints, leaves first
    off = {(r, s): H.get((r, s), 0.0) for r in range(m) for s in range(r)}
    be.mark("joint_pass", be.vcat(d[:m]), *off.values())
    return d[:m], off
