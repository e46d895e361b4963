"""Inverse joint-space inertia ``M(q)^-1``.

``M`` from CRBA (:mod:`gen.algorithms.crba`), factored ``M = L^T D L`` on the tree's
expanded parent array (Featherstone, "Efficient Factorization of the Joint-Space Inertia
Matrix for Branched Kinematic Trees", IJRR 2005, §4-5: ``L`` has the pattern of the
ancestor chains, no fill-in) and inverted as ``M^-1 = W D^-1 W^T`` with ``W = L^-1``,
which has the same pattern: entry ``(i, j)`` sums one product per common ancestor of dofs
``i`` and ``j``.  Two forms of that last step, by the size measured to suit each
(interleaved, ns: solo12 307 / 371, anymal_c 316 / 405, g1 2322 / 1670, icub 2676 / 2233,
talos 5014 / 3767, straight-line / loops; docs/ARCHITECTURE.md):

* below :data:`LOOP_NV` dofs, straight-line sums over the common ancestors, upper
  triangle mirrored (:func:`~gen.algorithms.sparse_ldl.inverse_from_ltdl`);
* from :data:`LOOP_NV` dofs, ``M^-1 = V V^T`` with ``V = W D^-1/2``, a symmetric product
  the C forms in vectorised loops (``be.product``, :mod:`gen.products`).

Either way the result is exactly symmetric.  Traced operations against the ABA-based
algorithm of Carpentier & Mansard (RSS 2018, §IV; Pinocchio's ``computeMinverse``, the
reference and the benchmark peer), rbdgen's earlier form of this row: ur5 428 / 1083,
panda 850 / 1568, solo12 3858 / 5420, anymal_c 4441 / 7004 (straight-line form).  With
mimic joints ``M^-1`` is the dense LDL^T solve of CRBA's ``M`` against the identity
(:func:`~gen.algorithms.aba.mimic_solve`).  Shapes: q (nq,1) -> Minv (nv,nv).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from .aba import mimic_solve
from .crba import crba
from .sparse_ldl import dense_lower_inverse, inverse_as_product, inverse_from_ltdl, tree_ldl

#: the dofs from which ``M^-1`` is formed as a product in loops (module docstring)
LOOP_NV = 32


def minv(model: Model, q, *, be):
    nv = model.nv
    if model.has_mimic:
        Minv = mimic_solve(model, q, be.eye(nv), be)
        return (0.5 * (Minv + Minv.T),)
    (M,) = crba(model, q, be=be)
    pattern, dinv, L = tree_ldl(model, M, be)
    be.mark("factorisation", *dinv, *L.values())
    if nv < LOOP_NV:
        Minv, _ = inverse_from_ltdl(pattern, dinv, L, be)
    else:
        Minv = inverse_as_product(dense_lower_inverse(pattern, L, be), dinv, be)
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
