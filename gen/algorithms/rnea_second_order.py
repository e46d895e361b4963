"""Second-order partial derivatives of inverse dynamics: Pinocchio's
``ComputeRNEASecondOrderDerivatives`` tensors ``d2tau_dqdq``, ``d2tau_dvdv``,
``dtau_dqdv``, ``dtau_dadq`` at ``(q, v, a)``.

Definition (Pinocchio's, checked by its unit test against finite differences of
``computeRNEADerivatives``): with ``q`` perturbed in the tangent space
(``q + delta = integrate(q, delta)``, :mod:`gen.configuration`),

* ``d2tau_dqdq[i, j, k] = d/dq_k (dtau/dq)[i, j]``,
* ``d2tau_dvdv[i, j, k] = d/dv_k (dtau/dv)[i, j]``,
* ``dtau_dqdv[i, j, k] = d/dv_k (dtau/dq)[i, j]``,
* ``dtau_dadq[i, j, k] = d/dq_k M[i, j]``.

``d/dq_k`` is the derivative of the first-order matrix *as a function of q*: on a joint
with several rotational dofs (spherical, free) ``d2tau_dqdq`` is not symmetric in
``(j, k)`` (the two tangent perturbations do not commute); ``d2tau_dvdv`` always is.

Layout: each ``nv x nv x nv`` tensor is an ``(nv, nv^2)`` output whose column-major
memory is the Eigen Tensor's (``Data::Tensor3x``, column-major): element ``(i, j, k)`` at
``i + nv j + nv^2 k``, i.e. column ``j + nv k``.

Method (rbdgen's own): forward-mode differentiation, in closed form, of the world-frame
first-order algorithm (:mod:`gen.algorithms.world`, Carpentier & Mansard RSS 2018 with
the pair organisation of Singh, Russell & Wensing RA-L 2022).  Along a q-direction
(column ``u`` of joint ``s``) every quantity of a body in the subtree of ``s`` turns
rigidly with ``u`` on top of its explicit dependence: ``D J = u x J``,
``D oI = u x* oI - oI (u x)`` (a rigid triple, :func:`_turn_inertia`), and the
recursions of :func:`~gen.algorithms.world.world_pass` differentiated term by term give
``D ov``, ``D oa``, ``D dVdq``, ``D dAdq``, ``D dAdv``, ``D of``, ``D P``; along a
v-direction only velocities enter.  Bodies outside the subtree of ``s`` do not move; the
subtree sums (``Ycrb``, ``F``, momenta, Coriolis blocks) and the pair formulas of
:func:`~gen.algorithms.world.tau_partials` are then differentiated by the product rule.
Per direction this costs about one first-order evaluation.
"""
from __future__ import annotations

from typing import NamedTuple

from ..kinematics import extended_state, vslice
from ..model import Model
from ..spatial import ang, cross3, cross_force, cross_motion, lin, rigid_add, rigid_apply, skew3
from .world import World, coriolis_apply, coriolis_apply_t, coriolis_block, coriolis_terms, composite, \
    colsof, world_pass


class Tangent(NamedTuple):
    """Directional derivatives of the per-body quantities of :class:`World` (same shapes;
    ``oI`` rigid triples)."""

    J: list
    ov: list
    oa: list
    oI: list
    hv: list
    of: list
    P: list
    dVdq: list
    dAdq: list
    dAdv: list


def _turn_inertia(u, Y, be):
    """``u x* Y - Y (u x)`` as a rigid triple: the rate of change of the inertia ``Y = (m, h, Ib)``
    (``f = (m v - h x w, h x v + Ib w)``) carried by the twist ``u = (ul, ua)``:
    ``(0, ua x h + m ul, [ua] Ib - Ib [ua] - [ul][h] - [h][ul])`` (blocks of the 6 x 6
    products with ``u x = [[ua], [ul]; 0, [ua]]``, ``u x* = [[ua], 0; [ul], [ua]]``)."""
    m, h, Ib = Y
    ul, ua = lin(u), ang(u)
    Wa, Wl, H = skew3(ua, be), skew3(ul, be), skew3(h, be)
    return 0.0 * m, cross3(ua, h, be) + m * ul, Wa @ Ib - Ib @ Wa - Wl @ H - H @ Wl


def _cols(X, f, be):
    return be.hcat([f(x) for x in colsof(X)])


def _tangent_pass(model: Model, w: World, v, a, s: int, c: int, wrt_q: bool, be) -> Tangent:
    """Derivatives of the forward pass ``w`` along column ``c`` of joint ``s``: w.r.t.
    ``q`` (tangent space) when ``wrt_q``, else w.r.t. ``v``.  Bodies outside the subtree
    of ``s`` get zeros."""
    u = w.J[s][:, c:c + 1]
    z6 = be.zeros(6, 1)
    out = Tangent(*([] for _ in Tangent._fields))
    for i, b in enumerate(model.bodies):
        if s not in model.ancestors(i):
            zJ = be.zeros(6, b.nv)
            Y = w.oI[i]
            for lst, x in zip(out, (zJ, z6, z6, (0.0 * Y[0], be.zeros(3, 1), be.zeros(3, 3)), z6, z6,
                                    be.zeros(3, 3), zJ, zJ, zJ)):
                lst.append(x)
            continue
        Ji, vi, ai = w.J[i], vslice(model, i, v), vslice(model, i, a)
        root = b.parent == -1
        vp = z6 if root else w.ov[b.parent]
        ap = w.a0 if root else w.oa[b.parent]
        Dvp = z6 if i == s else out.ov[b.parent]
        Dap = z6 if i == s else out.oa[b.parent]
        if wrt_q:
            DJ = _cols(Ji, lambda x: cross_motion(u, x, be), be)
            DY = _turn_inertia(u, w.oI[i], be)
        else:
            DJ = be.zeros(6, b.nv)
            DY = (0.0 * w.oI[i][0], be.zeros(3, 1), be.zeros(3, 3))
        dV = w.dVdq[i]
        DdV = _cols(Ji, lambda x: cross_motion(Dvp, x, be), be) + _cols(DJ, lambda x: cross_motion(vp, x, be), be)
        Dv = Dvp + DJ @ vi
        Da = Dap + DJ @ ai + DdV @ vi
        if not wrt_q and i == s:                      # the explicit v-dependence of joint s
            Dv = Dv + u
            Da = Da + dV[:, c:c + 1]
        DdA = be.hcat([cross_motion(Dap, Ji[:, r:r + 1], be) + cross_motion(ap, DJ[:, r:r + 1], be)
                       + cross_motion(Dvp, dV[:, r:r + 1], be) + cross_motion(vp, DdV[:, r:r + 1], be)
                       for r in range(b.nv)])
        DdAv = be.hcat([cross_motion(Dvp + Dv, Ji[:, r:r + 1], be) + cross_motion(vp + w.ov[i], DJ[:, r:r + 1], be)
                        for r in range(b.nv)])
        Y, ov, hv = w.oI[i], w.ov[i], w.hv[i]
        Dh = rigid_apply(DY, ov, be) + rigid_apply(Y, Dv, be)
        Df = (rigid_apply(DY, w.oa[i], be) + rigid_apply(Y, Da, be)
              + cross_force(Dv, hv, be) + cross_force(ov, Dh, be))
        DP = coriolis_block(DY, ov, be) + coriolis_block(Y, Dv, be) if wrt_q else coriolis_block(Y, Dv, be)
        for lst, x in zip(out, (DJ, Dv, Da, DY, Dh, Df, DP, DdV, DdA, DdAv)):
            lst.append(x)
    return out


def _dot(x, y):
    return (x.T @ y)[0, 0]


class _Sums(NamedTuple):
    Yc: list
    Fc: list
    K: list


def _sums(model: Model, oI, of, hv, P, be) -> _Sums:
    """Subtree sums: composite inertias, forces and Coriolis terms (:func:`coriolis_terms`)."""
    K = [coriolis_terms(h, p, be) for h, p in zip(composite(model, hv), composite(model, P))]
    return _Sums(composite(model, oI, rigid_add), composite(model, of), K)


def _partials_tangent(model: Model, w: World, S: _Sums, t: Tangent, dS: _Sums, be, want_q: bool, want_M: bool):
    """The derivatives of ``(dtau_dq, dtau_dv, M)`` (the pair formulas of
    :func:`~gen.algorithms.world.tau_partials`) along the direction of ``t``, by the
    product rule; ``dtau_dq`` and ``M`` only when wanted."""
    nv = model.nv
    dq = be.zeros(nv, nv) if want_q else None
    dv = be.zeros(nv, nv)
    dM = be.zeros(nv, nv) if want_M else None
    for i, b in enumerate(model.bodies):
        Yc, K, DYc, DK = S.Yc[i], S.K[i], dS.Yc[i], dS.K[i]
        Ji, DJi = w.J[i], t.J[i]
        t1, Dt1, t4, Dt4, G, DG, H, DH = [], [], [], [], [], [], [], []
        for r in range(b.nv):
            x, Dx = Ji[:, r:r + 1], DJi[:, r:r + 1]
            t1.append(rigid_apply(Yc, x, be))
            Dt1.append(rigid_apply(DYc, x, be) + rigid_apply(Yc, Dx, be))
            t4.append(coriolis_apply_t(K, x, be))
            Dt4.append(coriolis_apply_t(DK, x, be) + coriolis_apply_t(K, Dx, be))
            dA, DdA = w.dAdq[i][:, r:r + 1], t.dAdq[i][:, r:r + 1]
            dV, DdV = w.dVdq[i][:, r:r + 1], t.dVdq[i][:, r:r + 1]
            dAv, DdAv = w.dAdv[i][:, r:r + 1], t.dAdv[i][:, r:r + 1]
            if want_q:      # G = x x* Fc + Yc dAdq + Bc dVdq
                G.append(cross_force(x, S.Fc[i], be) + rigid_apply(Yc, dA, be) + coriolis_apply(K, dV, be))
                DG.append(cross_force(Dx, S.Fc[i], be) + cross_force(x, dS.Fc[i], be) + rigid_apply(DYc, dA, be)
                          + rigid_apply(Yc, DdA, be) + coriolis_apply(DK, dV, be) + coriolis_apply(K, DdV, be))
            H.append(rigid_apply(Yc, dAv, be) + coriolis_apply(K, x, be))      # H = Yc dAdv + Bc x
            DH.append(rigid_apply(DYc, dAv, be) + rigid_apply(Yc, DdAv, be) + coriolis_apply(DK, x, be)
                      + coriolis_apply(K, Dx, be))
        for j in model.ancestors(i):
            bj = model.bodies[j]
            for r in range(b.nv):
                ri = b.idx_v + r
                for c in range(bj.nv):
                    cj = bj.idx_v + c
                    y, Dy = w.J[j][:, c:c + 1], t.J[j][:, c:c + 1]
                    dA, DdA = w.dAdq[j][:, c:c + 1], t.dAdq[j][:, c:c + 1]
                    dV, DdV = w.dVdq[j][:, c:c + 1], t.dVdq[j][:, c:c + 1]
                    dAv, DdAv = w.dAdv[j][:, c:c + 1], t.dAdv[j][:, c:c + 1]
                    if want_q:
                        dq[ri, cj] = (_dot(Dt1[r], dA) + _dot(t1[r], DdA)
                                      + _dot(Dt4[r], ang(dV)) + _dot(t4[r], ang(DdV)))
                    dv[ri, cj] = (_dot(Dt1[r], dAv) + _dot(t1[r], DdAv)
                                  + _dot(Dt4[r], ang(y)) + _dot(t4[r], ang(Dy)))
                    if want_M and (j != i or c >= r):
                        dM[ri, cj] = _dot(Dt1[r], y) + _dot(t1[r], Dy)
                        dM[cj, ri] = dM[ri, cj]
                    if j != i:
                        if want_q:
                            dq[cj, ri] = _dot(Dy, G[r]) + _dot(y, DG[r])
                        dv[cj, ri] = _dot(Dy, H[r]) + _dot(y, DH[r])
    return dq, dv, dM


def second_order_tensors(model: Model, q, v, a, be):
    """The four tensors, each a list of nv slices (``nv x nv`` matrices, slice ``k`` the
    derivative along direction ``k``), on a model without mimic joints."""
    w = world_pass(model, q, v, a, be)
    be.mark("forward", *w.of, *w.P)
    S = _sums(model, w.oI, w.of, w.hv, w.P, be)
    qq, vv, qv, aq = [], [], [], []
    for s, b in enumerate(model.bodies):
        for c in range(b.nv):
            for wrt_q in (True, False):
                t = _tangent_pass(model, w, v, a, s, c, wrt_q, be)
                dS = _sums(model, t.oI, t.of, t.hv, t.P, be)
                dq, dv, dM = _partials_tangent(model, w, S, t, dS, be, want_q=True, want_M=wrt_q)
                if wrt_q:
                    qq.append(dq)
                    aq.append(dM)
                else:
                    qv.append(dq)
                    vv.append(dv)
    return qq, vv, qv, aq


def _project(G, T, nv, be):
    """Slices ``T`` of the extended tree mapped to the model: ``sum_k G[k, kk] G^T T_k G``."""
    P = [G.T @ X @ G for X in T]
    return [sum((G[k, kk] * X for k, X in enumerate(P)), be.zeros(nv, nv)) for kk in range(nv)]


def rnea_second_order(model: Model, q, v, a, *, be):
    ext, qe, (ve, ae), G = extended_state(model, q, (v, a), be)
    tensors = second_order_tensors(ext, qe, ve, ae, be)
    if G is not None:       # tau = G^T tau_ext(q_ext(q), G v, G a), d q_ext / d q = G (constant)
        tensors = [_project(G, T, model.nv, be) for T in tensors]
    out = tuple(be.hcat(T) for T in tensors)
    be.mark("backward", *out)
    return out
