"""Inverse joint-space inertia ``M(q)^-1``.

``M`` from CRBA (:mod:`gen.algorithms.crba`), factored ``M = L^T D L`` on the tree's
expanded parent array (Featherstone, "Efficient Factorization of the Joint-Space Inertia
Matrix for Branched Kinematic Trees", IJRR 2005, §4-5: ``L`` has the pattern of the
ancestor chains, no fill-in) and inverted as ``M^-1 = W D^-1 W^T`` with ``W = L^-1``,
which has the same pattern (:func:`~gen.algorithms.sparse_ldl.inverse_from_ltdl`): entry
``(i, j)`` is one multiply-add per common ancestor of dofs ``i`` and ``j``, upper triangle
computed and mirrored, so the result is exactly symmetric.  Traced operations against
the ABA-based algorithm of Carpentier & Mansard (RSS 2018, §IV; Pinocchio's
``computeMinverse``, the reference), rbdgen's earlier form of this row: ur5 428 / 1083,
panda 850 / 1568, solo12 3858 / 5420, anymal_c 4441 / 7004, talos 36646 / 46653, icub
19968 / 29026 (docs/ARCHITECTURE.md).  With mimic joints ``M^-1`` is the dense LDL^T
solve of CRBA's ``M`` against the identity (:func:`~gen.algorithms.aba.mimic_solve`).
Shapes: q (nq,1) -> Minv (nv,nv).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from .aba import mimic_solve
from .crba import crba
from .sparse_ldl import fill_pattern, inverse_from_ltdl, ldl_factor, tree_lower


def minv(model: Model, q, *, be):
    nv = model.nv
    if model.has_mimic:
        Minv = mimic_solve(model, q, be.eye(nv), be)
        return (0.5 * (Minv + Minv.T),)
    (M,) = crba(model, q, be=be)
    pattern = fill_pattern(tree_lower(model))
    dinv, L = ldl_factor(pattern, [M[k, k] for k in range(nv)],
                         {(k, i): M[k, i] for k in range(nv) for i in pattern[k]}, be)
    be.mark("factorisation", *dinv, *L.values())
    Minv, _ = inverse_from_ltdl(pattern, dinv, L, be)
    be.mark("inverse", Minv)
    return (Minv,)


def pinocchio_minv(pin, pm, pd, q, **_):
    """Pinocchio's ``computeMinverse`` (upper triangle), symmetrised; with mimic joints
    (which it refuses) the inverse of its ``crba``."""
    if len(pm.mimicking_joints) > 0:
        M = np.array(pin.crba(pm, pd, q))
        return np.linalg.inv(np.triu(M) + np.triu(M, 1).T)
    M = np.array(pin.computeMinverse(pm, pd, q))
    return np.triu(M) + np.triu(M, 1).T
