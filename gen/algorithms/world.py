"""World-frame quantities and their tangent-space partials: the shared core of the
analytical derivative algorithms (``rnea_derivatives``, ``aba_derivatives``,
``constrained_derivatives``, ``impulse_derivatives``).

Carpentier & Mansard, "Analytical Derivatives of Rigid Body Dynamics Algorithms", RSS
2018, §III: every spatial quantity is expressed at the world origin in world axes
(Pinocchio's ``oMi``-quantities), where a joint's subspace ``J_j = oMj S_j`` moves with
the body and a perturbation of joint j's coordinates by ``delta`` (Pinocchio's
``q + delta = integrate(q, delta)``, a right perturbation of the joint's own motion)
moves every body of the subtree of j rigidly by the world twist ``u = J_j delta``:
``d oX_k = u x oX_k`` for ``k`` in the subtree.  Derivation used here (rbdgen's own,
equivalent to the paper's Algorithm 1), with ``p = parent(j)`` and ``a_0 = -g``:

* ``ov_k = sum_{l <= k} J_l v_l``, ``oa_k = a_0 + sum_{l <= k} (J_l a_l + (ov_l x J_l) v_l)``;
* per joint column ``u`` (forward pass): ``dVdq = ov_p x u``,
  ``dAdq = oa_p x u + ov_p x dVdq``, ``dAdv = (ov_p + ov_j) x u``; then for ``k >= j``
  ``d ov_k / d delta = u x ov_k + dVdq``, ``d oa_k / d delta = u x oa_k + dAdq + dVdq x
  ov_k`` (the parts of ``ov_k``, ``oa_k`` above j do not rotate), which, inserted in ``of_k = oI_k oa_k + ov_k x* oI_k ov_k``, gives
  ``d of_k = u x* of_k + oI_k dAdq + B_k dVdq`` (q) and ``d of_k = oI_k dAdv + B_k u`` (v)
  with the body Coriolis matrix
  ``B_k w = ov_k x* (oI_k w) - oI_k (ov_k x w) + w x* (oI_k ov_k)``;
* summed over a subtree (``Ycrb_i = sum oI_k``, ``Bc_i = sum B_k``, ``F_i = sum of_k``)
  and projected with ``tau_i = J_i^T F_i``, where ``dJ_i = u x J_i`` cancels ``u x* F_i``
  (``(u x m)^T f = -m^T (u x* f)``)::

      j <= i:  dtau_i/dq_j = J_i^T (Ycrb_i dAdq_j + Bc_i dVdq_j)
               dtau_i/dv_j = J_i^T (Ycrb_i dAdv_j + Bc_i J_j)
      i <  j:  dtau_i/dq_j = J_i^T (u x* F_j + Ycrb_j dAdq_j + Bc_j dVdq_j)
               dtau_i/dv_j = J_i^T (Ycrb_j dAdv_j + Bc_j J_j)

  and ``M_ij = J_i^T Ycrb_i J_j`` (``j <= i``), the world-frame CRBA.

External forces (constraint forces ``J^T lam``) are body-fixed wrenches: they rotate
with the subtree, so they only enter through ``F`` (``of_k - fext_k``).

Frame kinematics (constraint rows), for a frame f on body k with ``oMf``, LOCAL axes:
``v_f = oMf^-1 ov_k``, ``a_f = oMf^-1 (oa_k - a_0)``, and for a supporting joint column u
``d v_f/dq = oMf^-1 dVdq``, ``d v_f/dv = oMf^-1 u``,
``d a_f/dq = oMf^-1 (dAdq - a_0 x u + dVdq x ov_k)``,
``d a_f/dv = oMf^-1 (dAdv + u x ov_k)``.
"""
from __future__ import annotations

from typing import NamedTuple

from ..kinematics import gravity_acceleration, qslice, subspaces, vslice
from ..model import Model
from ..spatial import (
    act_force,
    act_motion,
    ang,
    compose,
    const_transform,
    cross_force,
    cross_motion,
    inertia_matrix,
    inv_motion,
    lin,
    parent_transform,
    skew3,
    transform_inertia6,
)


class World(NamedTuple):
    """Per body, world frame: placements ``oM``, subspaces ``J`` (6 x nv_i), velocities
    ``ov``, accelerations ``oa`` (with ``a_0 = -g`` when gravity is on), inertias ``oI``,
    forces ``of`` (``oI oa + ov x* oI ov``), Coriolis matrices ``B`` and the per-column
    partials ``dVdq``, ``dAdq``, ``dAdv`` (6 x nv_i); ``a0`` the world acceleration."""

    oM: list
    J: list
    ov: list
    oa: list
    oI: list
    of: list
    B: list
    dVdq: list
    dAdq: list
    dAdv: list
    a0: object


def cols(fn, X):
    """``fn`` applied to every column of the 6 x k matrix ``X``, as a 6 x k matrix."""
    return [fn(X[:, c:c + 1]) for c in range(X.shape[1])]


def motion_cross_matrix(m, be):
    """6 x 6 matrix of ``x -> m x x`` (motion cross product, [linear; angular]):
    ``[[ [w], [v] ], [0, [w]]]``, Featherstone 2008 eq. 2.31."""
    W, V = skew3(ang(m), be), skew3(lin(m), be)
    X = be.zeros(6, 6)
    X[0:3, 0:3] = W
    X[0:3, 3:6] = V
    X[3:6, 3:6] = W
    return X


def force_cross_matrix(m, be):
    """6 x 6 matrix of ``f -> m x* f``: ``-motion_cross_matrix(m)^T``."""
    W, V = skew3(ang(m), be), skew3(lin(m), be)
    X = be.zeros(6, 6)
    X[0:3, 0:3] = W
    X[3:6, 0:3] = V
    X[3:6, 3:6] = W
    return X


def force_bar_matrix(h, be):
    """6 x 6 matrix of ``w -> w x* h`` (h fixed): ``[[0, -[h_l]], [-[h_l], -[h_a]]]``."""
    Hl, Ha = skew3(lin(h), be), skew3(ang(h), be)
    X = be.zeros(6, 6)
    X[0:3, 3:6] = -Hl
    X[3:6, 0:3] = -Hl
    X[3:6, 3:6] = -Ha
    return X


def world_pass(model: Model, q, v, a, be, gravity: bool = True, coriolis: bool = True) -> World:
    """The forward pass (RSS 2018 Alg. 1, forward loop) in world frame.  ``gravity``:
    ``a_0 = -g`` (else 0); ``coriolis``: form ``B`` (skip it when only M or
    the q-partials at v = 0 are needed)."""
    S = subspaces(model, be)
    a0 = gravity_acceleration(model, be) if gravity else be.zeros(6, 1)
    zero = be.zeros(6, 1)
    n = model.nbodies
    oM, J, ov, oa, oI, of, B = [], [], [], [], [], [], []
    dVdq, dAdq, dAdv = [], [], []
    for i, b in enumerate(model.bodies):
        X = parent_transform(b, qslice(model, i, q), be)
        M = X if b.parent == -1 else compose(oM[b.parent], X)
        vp = zero if b.parent == -1 else ov[b.parent]
        ap = a0 if b.parent == -1 else oa[b.parent]
        Ji = be.hcat(cols(lambda s: act_motion(M, s, be), S[i]))      # J_i = oMi S_i
        vJ = Ji @ vslice(model, i, v)
        vi = vp + vJ                                                   # ov_i = ov_p + J_i v_i
        ai = ap + Ji @ vslice(model, i, a) + cross_motion(vi, vJ, be)  # + (ov_i x J_i) v_i
        Ii = transform_inertia6(M, inertia_matrix(b.inertia, be), be)  # oI_i = oMi^* I_i oMi^-1
        hi = Ii @ vi
        oM.append(M)
        J.append(Ji)
        ov.append(vi)
        oa.append(ai)
        oI.append(Ii)
        of.append(Ii @ ai + cross_force(vi, hi, be))
        if coriolis:
            B.append(force_cross_matrix(vi, be) @ Ii - Ii @ motion_cross_matrix(vi, be) + force_bar_matrix(hi, be))
        if b.parent == -1:                  # ov_p = 0: dVdq = 0, dAdq = a_0 x u, dAdv = ov_i x u
            dVdq.append(be.zeros(6, b.nv))
            dAdq.append(be.hcat(cols(lambda u: cross_motion(a0, u, be), Ji)))
            dAdv.append(be.hcat(cols(lambda u: cross_motion(vi, u, be), Ji)))
        else:
            dV = be.hcat(cols(lambda u: cross_motion(vp, u, be), Ji))
            dVdq.append(dV)
            dAdq.append(be.hcat([cross_motion(ap, Ji[:, c:c + 1], be) + cross_motion(vp, dV[:, c:c + 1], be)
                                 for c in range(b.nv)]))
            dAdv.append(be.hcat(cols(lambda u: cross_motion(vp + vi, u, be), Ji)))
    assert len(oM) == n
    return World(oM, J, ov, oa, oI, of, B, dVdq, dAdq, dAdv, a0)


def world_forces(model: Model, w: World, fext_local, be) -> list:
    """``of_k - oMk^* fext_k`` (``fext_local``: per body LOCAL force or None)."""
    if fext_local is None:
        return list(w.of)
    return [f if fe is None else f - act_force(w.oM[k], fe, be) for k, (f, fe) in enumerate(zip(w.of, fext_local))]


def composite(model: Model, items: list) -> list:
    """Subtree sums ``sum_{k >= i} items_k`` (backward pass)."""
    out = list(items)
    for i in reversed(range(model.nbodies)):
        p = model.bodies[i].parent
        if p != -1:
            out[p] = out[p] + out[i]
    return out


def tau_partials(model: Model, w: World, F: list, be, want_q=True, want_v=True, want_M=False):
    """``(dtau_dq, dtau_dv, M)`` (nv x nv each, None when not wanted) from the forward
    pass ``w`` and the world forces ``F`` (per body, before the subtree sums), by the
    formulas of the module docstring.  A pass without Coriolis matrices (``w.B`` empty:
    ``v = 0``, where ``B = 0``) gives the q-partials and M only."""
    nv = model.nv
    if want_v and not w.B:
        raise ValueError("tau_partials: dtau/dv needs the Coriolis matrices (world_pass(coriolis=True))")
    Yc = composite(model, w.oI)
    Fc = composite(model, F)
    Bc = composite(model, w.B) if w.B else None
    dq = be.zeros(nv, nv) if want_q else None
    dv = be.zeros(nv, nv) if want_v else None
    M = be.zeros(nv, nv) if want_M else None
    JY = [w.J[i].T @ Yc[i] for i in range(model.nbodies)]
    JB = [w.J[i].T @ Bc[i] for i in range(model.nbodies)] if Bc is not None else None

    def qblock(i, j):                   # J_i^T (Ycrb_i dAdq_j + Bc_i dVdq_j)
        blk = JY[i] @ w.dAdq[j]
        return blk if JB is None else blk + JB[i] @ w.dVdq[j]

    for i, b in enumerate(model.bodies):
        si = slice(b.idx_v, b.idx_v + b.nv)
        if want_q:      # column block of joint i seen from its strict ancestors (case i < j)
            G = be.hcat([cross_force(w.J[i][:, c:c + 1], Fc[i], be) for c in range(b.nv)]) + Yc[i] @ w.dAdq[i]
            if Bc is not None:
                G = G + Bc[i] @ w.dVdq[i]
        if want_v:
            H = Yc[i] @ w.dAdv[i] + Bc[i] @ w.J[i]
        for j in model.ancestors(i):
            bj = model.bodies[j]
            sj = slice(bj.idx_v, bj.idx_v + bj.nv)
            if want_q:
                dq[si, sj] = qblock(i, j)
            if want_v:
                dv[si, sj] = JY[i] @ w.dAdv[j] + JB[i] @ w.J[j]
            if want_M and j != i:
                blk = JY[i] @ w.J[j]
                M[si, sj] = blk
                M[sj, si] = blk.T
            elif want_M:                # diagonal block: upper triangle, mirrored (exactly symmetric)
                for r in range(b.nv):
                    for c in range(r, b.nv):
                        M[b.idx_v + r, b.idx_v + c] = (JY[i][r:r + 1, :] @ w.J[i][:, c:c + 1])[0, 0]
                        M[b.idx_v + c, b.idx_v + r] = M[b.idx_v + r, b.idx_v + c]
            if j != i:
                if want_q:
                    dq[sj, si] = w.J[j].T @ G
                if want_v:
                    dv[sj, si] = w.J[j].T @ H
    return dq, dv, M


def frame_partials(model: Model, w: World, body: int, placement, size: int, be, velocity_only: bool = False):
    """Partials of a LOCAL frame's motion on ``body`` (placement: the frame in the body,
    a model SE3): per supporting dof column, ``(dv_f/dq, dv_f/dv, da_f/dq, da_f/dv)`` as
    dicts dof -> 6 x 1, and the frame's ``v_f``, ``a_f`` (no gravity), by the frame
    formulas of the module docstring.  ``velocity_only`` skips the acceleration terms."""
    oMf = compose(w.oM[body], const_transform(placement, be))
    ovk = w.ov[body]
    vf = inv_motion(oMf, ovk, be)
    af = None if velocity_only else inv_motion(oMf, w.oa[body] - w.a0, be)
    dvq, dvv, daq, dav = {}, {}, {}, {}
    for j in model.ancestors(body):
        bj = model.bodies[j]
        for c in range(bj.nv):
            d = bj.idx_v + c
            u = w.J[j][:, c:c + 1]
            dV = w.dVdq[j][:, c:c + 1]
            dvq[d] = inv_motion(oMf, dV, be)
            dvv[d] = inv_motion(oMf, u, be)
            if not velocity_only:
                daq[d] = inv_motion(oMf, w.dAdq[j][:, c:c + 1] - cross_motion(w.a0, u, be)
                                    + cross_motion(dV, ovk, be), be)
                dav[d] = inv_motion(oMf, w.dAdv[j][:, c:c + 1] + cross_motion(u, ovk, be), be)
    return vf, af, dvq, dvv, daq, dav
