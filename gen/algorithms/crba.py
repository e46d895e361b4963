"""Composite-rigid-body algorithm for the joint-space inertia matrix M(q).

Featherstone 2008, Table 6.2, LOCAL frames.  Composite inertias are accumulated in
10-parameter form (m, h = m c, Ib) and transformed with ``spatial.rigid_transform``:
the ``m 1`` block never goes through a rotation (talos: 10529 -> 7015 operations
against the 6x6 block transform).  Output: the
full symmetric nv x nv matrix; only entries (i, j) with j an ancestor-or-self dof of i
are non-zero (branch-induced sparsity, Featherstone 2005 §3).  With mimic joints
(``gen.model``) the blocks are accumulated into ``G^T M_ext G``: block (i, j) adds to the
dofs ``dof_columns`` maps bodies i and j to, times their factors.
"""
from __future__ import annotations

from ..kinematics import dof_columns, qslice, subspaces
from ..model import Model
from ..spatial import (
    act_force,
    parent_transform,
    rigid_add,
    rigid_apply,
    rigid_inertia,
    rigid_to_parent,
)


def crba(model: Model, q, *, be):
    S = subspaces(model, be, mimic=True)
    liMi = [parent_transform(b, qslice(model, i, q), be) for i, b in enumerate(model.bodies)]
    Ic = [rigid_inertia(b.inertia, be) for b in model.bodies]
    for i in reversed(range(model.nbodies)):           # Ic_parent += X^* Ic_i X^-1
        p = model.bodies[i].parent
        if p != -1:
            Ic[p] = rigid_add(Ic[p], rigid_to_parent(model.bodies[i], qslice(model, i, q), Ic[i], be))
    be.mark("composite", *[x for Y in Ic for x in Y[1:]])
    if model.has_mimic:
        return (_columns_mimic(model, S, liMi, Ic, be),)
    M = be.zeros(model.nv, model.nv)
    for i, b in enumerate(model.bodies):
        F = be.hcat([rigid_apply(Ic[i], S[i][:, k:k + 1], be) for k in range(b.nv)])  # F = Ic_i S_i
        si = slice(b.idx_v, b.idx_v + b.nv)
        M[si, si] = S[i].T @ F
        j = i
        while model.bodies[j].parent != -1:             # walk F up the support of i
            F = _act_force_cols(liMi[j], F, be)
            j = model.bodies[j].parent
            bj = model.bodies[j]
            sj = slice(bj.idx_v, bj.idx_v + bj.nv)
            block = S[j].T @ F
            M[sj, si] = block
            M[si, sj] = block.T
    be.mark("columns", M)
    return (M,)


def _columns_mimic(model: Model, S, liMi, Ic, be):
    """The columns pass of :func:`crba` accumulated into ``G^T M_ext G``."""
    M = be.zeros(model.nv, model.nv)
    for i in range(model.nbodies):
        ci = dof_columns(model, i)
        F = be.hcat([rigid_apply(Ic[i], S[i][:, k:k + 1], be) for k in range(len(ci))])
        j = i
        while True:
            block = S[j].T @ F                          # M_ext[j, i] = S_j^T X F
            for kj, (dj, sj) in enumerate(dof_columns(model, j)):
                for ki, (di, si) in enumerate(ci):
                    e = (sj * si) * block[kj, ki]
                    M[dj, di] = M[dj, di] + e
                    if j != i:
                        M[di, dj] = M[di, dj] + e
            if model.bodies[j].parent == -1:
                break
            F = _act_force_cols(liMi[j], F, be)
            j = model.bodies[j].parent
    be.mark("columns", M)
    return M


def _act_force_cols(X, F, be):
    return be.hcat([act_force(X, F[:, k:k + 1], be) for k in range(F.shape[1])])
