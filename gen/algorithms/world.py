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
  (``(u x m)^T f = -m^T (u x* f)``).  ``B_k`` is never formed: with ``C = oI_k (ov_k x)``
  it is ``-(C + C^T) + bar(hv_k)`` (``hv_k = oI_k ov_k``; ``bar(h) w = w x* h`` is
  antisymmetric), i.e. ``[[0, -2 [hv_l]], [0, -(P_k + [hv_a])]]`` with ``P_k`` symmetric
  3 x 3 (:func:`coriolis_block`), so ``Bc_i`` is the subtree sums of ``hv`` and ``P``
  and acts on angular parts only (:func:`coriolis_apply`)::

      j <= i:  dtau_i/dq_j = J_i^T (Ycrb_i dAdq_j + Bc_i dVdq_j)
               dtau_i/dv_j = J_i^T (Ycrb_i dAdv_j + Bc_i J_j)
      i <  j:  dtau_i/dq_j = J_i^T (u x* F_j + Ycrb_j dAdq_j + Bc_j dVdq_j)
               dtau_i/dv_j = J_i^T (Ycrb_j dAdv_j + Bc_j J_j)

  and ``M_ij = J_i^T Ycrb_i J_j`` (``j <= i``), the world-frame CRBA.

Coordinates: world axes at the world origin, or, on a free-flyer that is the only root,
the base frame at the current q (:func:`base_coordinates`; every formula above is
covariant).  Pair terms are dot products of per-column vectors formed once per joint
(:func:`tau_partials`), the restructuring of IDSVA (Singh, Russell & Wensing, "Efficient
Analytical Derivatives of Rigid-Body Dynamics Using Spatial Vector Algebra", RA-L 2022).

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
    cross3,
    cross_force,
    cross_motion,
    inv_motion,
    lin,
    parent_transform,
    placed_inertia,
    rigid_add,
    rigid_apply,
    rigid_inertia,
    skew3,
)


class World(NamedTuple):
    """Per body, in the reference coordinates (:func:`base_coordinates`): placements
    ``oM``, subspaces ``J`` (6 x nv_i), velocities ``ov``, accelerations ``oa`` (with
    ``a_0 = -g`` when gravity is on), inertias ``oI`` as rigid triples ``(m, h, Ib)``,
    momenta ``hv = oI ov``, forces ``of`` (``oI oa + ov x* hv``), Coriolis blocks ``P``
    (3 x 3 symmetric, :func:`coriolis_block`; None without Coriolis terms) and the
    per-column partials ``dVdq``, ``dAdq``, ``dAdv`` (6 x nv_i); ``a0`` the acceleration
    of the reference frame (``-g`` in its axes)."""

    oM: list
    J: list
    ov: list
    oa: list
    oI: list
    hv: list
    of: list
    P: list | None
    dVdq: list
    dAdq: list
    dAdv: list
    a0: object


def colsof(X):
    """The columns of the 6 x k matrix ``X`` (6 x 1 each)."""
    return [X[:, c:c + 1] for c in range(X.shape[1])]


def base_coordinates(model: Model) -> bool:
    """True when body 0 is a free-flyer and the only root.  The pass then works in the
    axes of the base frame at the current q instead of the world's (every formula of
    the module docstring is covariant: cross products, inertia transforms and
    force-motion pairings keep their form under a constant change of coordinates):
    ``oM_0 = 1``, ``J_0 = S_0 = 1_6`` (so products with the base columns are free) and the
    gravity term ``a_0 = oM_0^-1 (-g)`` rotates instead of every leg's placement."""
    roots = [i for i, b in enumerate(model.bodies) if b.parent == -1]
    return roots == [0] and model.bodies[0].kind == "free" and model.bodies[0].mimic is None


def coriolis_block(Y, ov, be):
    """``P = [h][v] + [v][h] + Ib [w] - [w] Ib`` (3 x 3 symmetric) of a rigid body
    ``Y = (m, h, Ib)`` moving with ``ov = (v, w)``: with ``C = oI (ov x)``, the body
    Coriolis matrix ``B w' = ov x* (oI w') - oI (ov x w') + w' x* (oI ov)`` is
    ``-(C + C^T) + bar(hv)`` (``bar(hv) w' = w' x* hv`` is antisymmetric), and in blocks
    ``C + C^T = [[0, [hv_l]], [-[hv_l], P]]`` (``hv = oI ov``), so
    ``B = [[0, -2 [hv_l]], [0, -(P + [hv_a])]]``: B acts on the angular part only and
    is summed over a subtree through ``hv`` and ``P`` (:func:`coriolis_apply`).  Entry
    form: ``[h][v] + [v][h] = v h^T + h v^T - 2 (h.v) 1`` and ``Ib [w] - [w] Ib = T + T^T``
    with ``T = Ib [w]``; upper triangle computed and mirrored."""
    _, h, Ib = Y
    v, w = lin(ov), ang(ov)
    T = Ib @ skew3(w, be)
    P = be.zeros(3, 3)
    for r in range(3):
        s, t = (r + 1) % 3, (r + 2) % 3
        P[r, r] = 2.0 * (T[r, r] - (h[s, 0] * v[s, 0] + h[t, 0] * v[t, 0]))   # 2 (T_rr + h_r v_r - h.v)
        for c in range(r + 1, 3):
            P[r, c] = T[r, c] + T[c, r] + v[r, 0] * h[c, 0] + h[r, 0] * v[c, 0]
            P[c, r] = P[r, c]
    return P


def coriolis_terms(hv, P, be):
    """``(2 hv_l, hv_a, P)``: the composite Coriolis matrix ``Bc`` of a subtree from its
    momentum ``hv`` and block ``P`` (:func:`coriolis_block`), the factor 2 applied once."""
    return 2.0 * lin(hv), ang(hv), P


def coriolis_apply(K, x, be):
    """``Bc x = (-2 hv_l x x_a, -(P x_a + hv_a x x_a)) = (x_a x 2 hv_l, x_a x hv_a - P x_a)``
    (``K`` from :func:`coriolis_terms`)."""
    l2, ha, P = K
    xa = ang(x)
    return be.vcat([cross3(xa, l2, be), cross3(xa, ha, be) - P @ xa])


def coriolis_apply_t(K, u, be):
    """Angular part of ``Bc^T u = (0, 2 hv_l x u_l - P u_a + hv_a x u_a)`` (its linear part is 0)."""
    l2, ha, P = K
    ua = ang(u)
    return cross3(l2, lin(u), be) + cross3(ha, ua, be) - P @ ua


def world_pass(model: Model, q, v, a, be, gravity: bool = True, coriolis: bool = True) -> World:
    """The forward pass (RSS 2018 Alg. 1, forward loop) in world (or base,
    :func:`base_coordinates`) coordinates.  ``gravity``: ``a_0 = -g`` (else 0);
    ``coriolis``: form the Coriolis blocks ``P`` (skip them when only M or the
    q-partials at v = 0 are needed).  With ``ov_j = ov_p + J_j v_j``:
    ``oa_j = oa_p + J_j a_j + dVdq_j v_j`` (``dVdq_j = ov_p x J_j``), and for a one-dof joint
    ``dAdv = (ov_p + ov_j) x u = 2 ov_p x u = 2 dVdq`` (``u x u = 0``)."""
    S = subspaces(model, be)
    a0 = gravity_acceleration(model, be) if gravity else be.zeros(6, 1)
    base = base_coordinates(model)
    oM, J, ov, oa, oI, hv, of, P = [], [], [], [], [], [], [], []
    dVdq, dAdq, dAdv = [], [], []
    for i, b in enumerate(model.bodies):
        X = parent_transform(b, qslice(model, i, q), be)
        if base and i == 0:             # reference axes = the base's: oM_0 = 1, J_0 = 1_6
            a0 = inv_motion(X, a0, be)
            M, Ji = (be.eye(3), be.zeros(3, 1)), S[0]
            Y = rigid_inertia(b.inertia, be)
        else:
            M = X if b.parent == -1 or (base and b.parent == 0) else compose(oM[b.parent], X)
            Ji = be.hcat([act_motion(M, s, be) for s in colsof(S[i])])   # J_i = oMi S_i
            Y = placed_inertia(M, b.inertia, be)                         # oI_i = oMi^* I_i oMi^-1
        vJ = Ji @ vslice(model, i, v)
        aJ = Ji @ vslice(model, i, a)
        if b.parent == -1:              # ov_p = 0: dVdq = 0, dAdq = a_0 x u, dAdv = ov_i x u
            vi, ai = vJ, a0 + aJ
            dV = be.zeros(6, b.nv)
            dA = be.hcat([cross_motion(a0, u, be) for u in colsof(Ji)])
            dAv = dV if b.nv == 1 else be.hcat([cross_motion(vi, u, be) for u in colsof(Ji)])
        else:
            vp, ap = ov[b.parent], oa[b.parent]
            dV = be.hcat([cross_motion(vp, u, be) for u in colsof(Ji)])
            vi, ai = vp + vJ, ap + aJ + dV @ vslice(model, i, v)          # (ov_i x J_i) v_i = (ov_p x J_i) v_i
            dA = be.hcat([cross_motion(ap, Ji[:, c:c + 1], be) + cross_motion(vp, dV[:, c:c + 1], be)
                          for c in range(b.nv)])
            dAv = 2.0 * dV if b.nv == 1 else be.hcat([cross_motion(vp + vi, u, be) for u in colsof(Ji)])
        hi = rigid_apply(Y, vi, be)
        oM.append(M)
        J.append(Ji)
        ov.append(vi)
        oa.append(ai)
        oI.append(Y)
        hv.append(hi)
        of.append(rigid_apply(Y, ai, be) + cross_force(vi, hi, be))
        if coriolis:
            P.append(coriolis_block(Y, vi, be))
        dVdq.append(dV)
        dAdq.append(dA)
        dAdv.append(dAv)
    return World(oM, J, ov, oa, oI, hv, of, P if coriolis else None, dVdq, dAdq, dAdv, a0)


def world_forces(model: Model, w: World, fext_local, be) -> list:
    """``of_k - oMk^* fext_k`` (``fext_local``: per body LOCAL force or None)."""
    if fext_local is None:
        return list(w.of)
    return [f if fe is None else f - act_force(w.oM[k], fe, be) for k, (f, fe) in enumerate(zip(w.of, fext_local))]


def composite(model: Model, items: list, add=lambda x, y: x + y) -> list:
    """Subtree sums ``sum_{k >= i} items_k`` (backward pass); ``add`` for non-array items."""
    out = list(items)
    for i in reversed(range(model.nbodies)):
        p = model.bodies[i].parent
        if p != -1:
            out[p] = add(out[p], out[i])
    return out


def _dot(x, y):
    return (x.T @ y)[0, 0]


def tau_partials(model: Model, w: World, F: list, be, want_q=True, want_v=True, want_M=False):
    """``(dtau_dq, dtau_dv, M)`` (nv x nv each, None when not wanted) from the forward
    pass ``w`` and the world forces ``F`` (per body, before the subtree sums), by the
    formulas of the module docstring, with ``Ycrb`` a rigid triple and ``Bc`` through
    :func:`coriolis_apply`.  Per column u of joint i the row factors are
    ``t1 = Ycrb_i u`` and ``t4 = Bc_i^T u`` (angular part only), per column of joint j
    the column factors ``G_j`` (q) and ``H_j`` (v), so each (ancestor, descendant) pair
    costs dot products only (as in IDSVA, Singh, Russell & Wensing, RA-L 2022):
    ``dtau_i/dq_j = t1.dAdq_j + t4.dVdq_j``, ``dtau_i/dv_j = t1.dAdv_j + t4.J_j``,
    ``M_ij = t1.J_j`` (j <= i), ``dtau_j/dq_i = J_j.G_i``, ``dtau_j/dv_i = J_j.H_i`` (j < i).
    A pass without Coriolis blocks (``w.P`` None: ``v = 0``, where ``B = 0``) gives the
    q-partials and M only."""
    nv = model.nv
    coriolis = w.P is not None
    if want_v and not coriolis:
        raise ValueError("tau_partials: dtau/dv needs the Coriolis blocks (world_pass(coriolis=True))")
    Yc = composite(model, w.oI, rigid_add)
    Fc = composite(model, F)
    if coriolis:
        K = [coriolis_terms(h, P, be) for h, P in zip(composite(model, w.hv), composite(model, w.P))]
    dq = be.zeros(nv, nv) if want_q else None
    dv = be.zeros(nv, nv) if want_v else None
    M = be.zeros(nv, nv) if want_M else None
    for i, b in enumerate(model.bodies):
        Ji = w.J[i]
        t1 = [rigid_apply(Yc[i], u, be) for u in colsof(Ji)]
        t4 = [coriolis_apply_t(K[i], u, be) for u in colsof(Ji)] if coriolis and (want_q or want_v) else None
        if want_q:      # G_i = u x* Fc_i + Ycrb_i dAdq_i + Bc_i dVdq_i
            G = [cross_force(Ji[:, c:c + 1], Fc[i], be) + rigid_apply(Yc[i], w.dAdq[i][:, c:c + 1], be)
                 + (coriolis_apply(K[i], w.dVdq[i][:, c:c + 1], be) if coriolis else 0.0)
                 for c in range(b.nv)]
        if want_v:      # H_i = Ycrb_i dAdv_i + Bc_i u
            H = [rigid_apply(Yc[i], w.dAdv[i][:, c:c + 1], be) + coriolis_apply(K[i], Ji[:, c:c + 1], be)
                 for c in range(b.nv)]
        for j in model.ancestors(i):
            bj = model.bodies[j]
            for r in range(b.nv):
                ri = b.idx_v + r
                for c in range(bj.nv):
                    cj = bj.idx_v + c
                    u = w.J[j][:, c:c + 1]
                    if want_q:
                        e = _dot(t1[r], w.dAdq[j][:, c:c + 1])
                        dq[ri, cj] = e + _dot(t4[r], ang(w.dVdq[j][:, c:c + 1])) if coriolis else e
                    if want_v:
                        dv[ri, cj] = _dot(t1[r], w.dAdv[j][:, c:c + 1]) + _dot(t4[r], ang(u))
                    if want_M and (j != i or c >= r):   # diagonal block: upper triangle, mirrored
                        M[ri, cj] = _dot(t1[r], u)
                        M[cj, ri] = M[ri, cj]
                    if j != i:
                        if want_q:
                            dq[cj, ri] = _dot(u, G[r])
                        if want_v:
                            dv[cj, ri] = _dot(u, H[r])
    return dq, dv, M


def bias_torques(model: Model, w: World, be):
    """``tau_i = J_i^T Fc_i`` (nv x 1) of the forces ``w.of`` (RNEA's backward pass in world
    coordinates): ``rnea(q, v, a)`` for a pass at ``a``, ``nle(q, v)`` at ``a = 0``."""
    Fc = composite(model, w.of)
    return be.vcat([_dot(u, Fc[i]) for i in range(model.nbodies) for u in colsof(w.J[i])])


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
