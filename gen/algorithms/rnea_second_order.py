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

Method (rbdgen's own): closed-form directional derivatives of the world-frame
first-order algorithm (:mod:`gen.algorithms.world`, Carpentier & Mansard RSS 2018 with
the pair organisation of Singh, Russell & Wensing RA-L 2022), one direction per dof.
Along a q-direction (column ``u`` of joint ``s``) every quantity of a body in the
subtree of ``s`` turns rigidly with ``u`` (``D x = u x x + E(x)``: ``D J = u x J``,
``D Ycrb = u x* Ycrb - Ycrb (u x)``) plus an explicit part ``E`` from the velocity
``dVdq_u`` and acceleration ``dAdq_u`` the perturbation adds (:func:`_explicit`); the
bodies above ``s`` see the change of the subtree sums of ``s``, the others nothing.  In
the pair formulas of :func:`~gen.algorithms.world.tau_partials` the turning parts of two
bodies both below ``s`` cancel (``(u x* f).m + f.(u x m) = 0``), so those pairs cost
their explicit terms only and ``dM`` vanishes there (:func:`_q_partials`, which also
gives ``dtau_dqdv``).  ``d2tau_dvdv`` on the rows of one-dof joints is the doubled
Christoffel symbols of ``dtau_dadq`` (:func:`_christoffel`: two adds an entry); on the rows
of multi-dof joints along v-directions, where only velocities move (:func:`_v_partials`).
Symmetric halves are formed once (:func:`second_order_tensors`).
Mimic joints: the extended tree, projected by the constant mimic map (:func:`_project`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kinematics import extended_state
from ..model import Model
from ..spatial import ang, cross3, cross_force, cross_motion, lin, rigid_add, rigid_apply, skew3
from .world import World, coriolis_apply, coriolis_apply_t, coriolis_block, coriolis_terms, composite, \
    colsof, world_pass


def _turn_inertia(u, Y, be):
    """``u x* Y - Y (u x)`` as a rigid triple: the rate of change of the inertia ``Y = (m, h, Ib)``
    (``f = (m v - h x w, h x v + Ib w)``) carried by the twist ``u = (ul, ua)``:
    ``(0, ua x h + m ul, [ua] Ib - Ib [ua] - [ul][h] - [h][ul])`` (blocks of the 6 x 6
    products with ``u x = [[ua], [ul]; 0, [ua]]``, ``u x* = [[ua], 0; [ul], [ua]]``)."""
    m, h, Ib = Y
    ul, ua = lin(u), ang(u)
    Wa, Wl, H = skew3(ua, be), skew3(ul, be), skew3(h, be)
    return 0.0 * m, cross3(ua, h, be) + m * ul, Wa @ Ib - Ib @ Wa - Wl @ H - H @ Wl


def _turn_coriolis(u, K, be):
    """The rate of change of Coriolis terms ``K = (2 hv_l, hv_a, P)`` (:func:`coriolis_terms`)
    of a subtree carried rigidly by the twist ``u``: ``hv`` is a force (``u x* hv``) and
    ``P`` the lower-right block of ``N = C + C^T`` (:func:`coriolis_block`), which turns as
    ``u x* N + N (u x*)^T``: ``[ua] P - P [ua] + [ul][hv_l] + [hv_l][ul]``."""
    l2, ha, P = K
    ul, ua = lin(u), ang(u)
    Wa, Wl, L = skew3(ua, be), skew3(ul, be), skew3(0.5 * l2, be)
    dh = cross_force(u, be.vcat([0.5 * l2, ha]), be)
    return 2.0 * lin(dh), ang(dh), Wa @ P - P @ Wa + Wl @ L + L @ Wl


def _add_terms(K1, K2):
    return tuple(x + y for x, y in zip(K1, K2))


def _cols(X, f, be):
    return be.hcat([f(x) for x in colsof(X)])


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


def _v_partials(model: Model, w: World, S: _Sums, s: int, c: int, cols, rows, be):
    """``d/dv dtau_dv`` along column ``c`` of joint ``s`` (twist ``u``) in the columns
    ``cols`` and the rows ``rows``.  Along v only velocities move: ``D ov_m = u`` for ``m``
    in the subtree of ``s``, so ``D dAdv_j = (D ov_p + D ov_j) x J_j``, the subtree sums' Coriolis terms
    change by ``(Yc u, P(Yc, u))`` (an ancestor of ``s`` by those of ``s``), and with
    ``Yc`` and ``J`` fixed the pair formulas of :func:`~gen.algorithms.world.tau_partials`
    give ``D dtau_i/dv_j = (D Bc_i^T J_i).J_j + (Yc_i J_i).D dAdv_j`` and
    ``D dtau_j/dv_i = J_j.(Yc_i D dAdv_i + D Bc_i J_i)``."""
    nv = model.nv
    u = w.J[s][:, c:c + 1]
    z6 = be.zeros(6, 1)
    inside = [s in model.ancestors(i) for i in range(model.nbodies)]
    DAv, DK = [], []
    for i, b in enumerate(model.bodies):
        if not inside[i]:
            DAv.append(None)
            DK.append(None)
            continue
        Dvp = u if i != s else z6
        DAv.append(_cols(w.J[i], lambda x: cross_motion(Dvp + u, x, be), be))
        dh = rigid_apply(S.Yc[i], u, be)
        DK.append((2.0 * lin(dh), ang(dh), coriolis_block(S.Yc[i], u, be)))
    for i in model.ancestors(s)[1:]:
        DK[i] = DK[s]
    dv = be.zeros(nv, nv)
    for i, b in enumerate(model.bodies):
        if DK[i] is None:
            continue
        for r in range(b.nv):
            x, ri = w.J[i][:, r:r + 1], b.idx_v + r
            t1 = rigid_apply(S.Yc[i], x, be)
            Dt4 = coriolis_apply_t(DK[i], x, be)
            DH = coriolis_apply(DK[i], x, be)
            if inside[i]:
                DH = DH + rigid_apply(S.Yc[i], DAv[i][:, r:r + 1], be)
            for j in model.ancestors(i):
                bj = model.bodies[j]
                for cc in range(bj.nv):
                    cj, y = bj.idx_v + cc, w.J[j][:, cc:cc + 1]
                    if cj in cols and ri in rows:
                        e = _dot(Dt4, ang(y))
                        dv[ri, cj] = e + _dot(t1, DAv[j][:, cc:cc + 1]) if inside[j] else e
                    if j != i and ri in cols and cj in rows:
                        dv[cj, ri] = _dot(y, DH)
    return dv


class _Explicit(NamedTuple):
    """The explicit parts ``E = D - u x`` of a q-direction's derivatives (twist ``u`` of
    column ``c`` of joint ``s``) for the bodies in the subtree of ``s``, None elsewhere,
    and the full derivatives of the subtree sums at ``s`` (what its ancestors see)."""

    dV: list
    dA: list
    dAv: list
    Fc: list
    K: list
    Yc_s: tuple
    Fc_s: object
    K_s: tuple


def _explicit(model: Model, w: World, S: _Sums, s: int, c: int, be) -> _Explicit:
    """Every quantity of a body in the subtree of ``s`` turns with ``u`` plus an explicit
    part: the velocity ``dVu = ov_p(s) x u`` and acceleration terms (:func:`_tangent`).
    With Jacobi's identity ``D(a x x) = u x (a x x) + E(a) x x + a x E(x)``:
    ``E(dVdq_j) = dVu x J_j``, ``E(dAdq_j) = Ea x J_j + dVu x dVdq_j + ov_p x E(dVdq_j)``,
    with ``Ea = oa_p x u`` for ``j = s`` (its parent does not move) and
    ``dAu + dVu x ov_p`` below, ``E(dAdv_j) = 2 dVu x J_j``; ``E(Yc) = 0``, ``E(Fc) = Yc dAu + Bc dVu``,
    ``E(hv) = Yc dVu``, ``E(P) = P(Yc, dVu)``."""
    u = w.J[s][:, c:c + 1]
    dVu, dAu = w.dVdq[s][:, c:c + 1], w.dAdq[s][:, c:c + 1]
    out = _Explicit([], [], [], [], [], None, None, None)
    for i, b in enumerate(model.bodies):
        if s not in model.ancestors(i):
            for lst in out[:5]:
                lst.append(None)
            continue
        p = b.parent
        vp = be.zeros(6, 1) if p == -1 else w.ov[p]
        ap = w.a0 if p == -1 else w.oa[p]
        Ea = cross_motion(ap, u, be) if i == s else dAu + cross_motion(dVu, w.ov[p], be)
        EdV = _cols(w.J[i], lambda x: cross_motion(dVu, x, be), be)
        EdA = be.hcat([cross_motion(Ea, w.J[i][:, r:r + 1], be) + cross_motion(dVu, w.dVdq[i][:, r:r + 1], be)
                       + cross_motion(vp, EdV[:, r:r + 1], be) for r in range(b.nv)])
        Yc, K = S.Yc[i], S.K[i]
        dh = rigid_apply(Yc, dVu, be)
        out.dV.append(EdV)
        out.dA.append(EdA)
        out.dAv.append(2.0 * EdV)
        out.Fc.append(rigid_apply(Yc, dAu, be) + coriolis_apply(K, dVu, be))
        out.K.append((2.0 * lin(dh), ang(dh), coriolis_block(Yc, dVu, be)))
    return out._replace(Yc_s=_turn_inertia(u, S.Yc[s], be), Fc_s=cross_force(u, S.Fc[s], be) + out.Fc[s],
                        K_s=_add_terms(_turn_coriolis(u, S.K[s], be), out.K[s]))


def _q_factors(model: Model, w: World, S: _Sums, E: _Explicit, s: int, u, i: int, be):
    """Per column x of body i: ``(x, t1, t4, G, H)`` (:func:`~gen.algorithms.world.tau_partials`)
    and the derivatives of ``t1, t4, G, H`` along the q-direction of ``E``, split as
    ``(turning, explicit)`` in the subtree of ``s`` (``D t1 = u x* t1`` there) and full
    (``(None, D)``) above it."""
    Yc, K = S.Yc[i], S.K[i]
    rows = []
    for r in range(model.bodies[i].nv):
        x, dA, dV = w.J[i][:, r:r + 1], w.dAdq[i][:, r:r + 1], w.dVdq[i][:, r:r + 1]
        t1 = rigid_apply(Yc, x, be)
        t4 = coriolis_apply_t(K, x, be)
        dAv = w.dAdv[i][:, r:r + 1]
        G = cross_force(x, S.Fc[i], be) + rigid_apply(Yc, dA, be) + coriolis_apply(K, dV, be)
        H = rigid_apply(Yc, dAv, be) + coriolis_apply(K, x, be)
        if E.dV[i] is not None:
            EG = (cross_force(x, E.Fc[i], be) + rigid_apply(Yc, E.dA[i][:, r:r + 1], be)
                  + coriolis_apply(K, E.dV[i][:, r:r + 1], be) + coriolis_apply(E.K[i], dV, be))
            EH = rigid_apply(Yc, E.dAv[i][:, r:r + 1], be) + coriolis_apply(E.K[i], x, be)
            rows.append((x, t1, t4, G, H, (cross_force(u, t1, be), None),
                         (cross3(ang(u), t4, be), coriolis_apply_t(E.K[i], x, be)), (cross_force(u, G, be), EG),
                         (cross_force(u, H, be), EH)))
        else:
            DG = cross_force(x, E.Fc_s, be) + rigid_apply(E.Yc_s, dA, be) + coriolis_apply(E.K_s, dV, be)
            DH = rigid_apply(E.Yc_s, dAv, be) + coriolis_apply(E.K_s, x, be)
            rows.append((x, t1, t4, G, H, (None, rigid_apply(E.Yc_s, x, be)), (None, coriolis_apply_t(E.K_s, x, be)),
                         (None, DG), (None, DH)))
    return rows


def _add(*xs):
    xs = [x for x in xs if x is not None]
    return sum(xs[1:], xs[0]) if xs else None


def _q_partials(model: Model, w: World, S: _Sums, s: int, c: int, cols, be):
    """Along column ``c`` of joint ``s`` (tangent space of q): ``D dtau_dq`` in the columns
    ``cols``, ``D dtau_dv`` and ``D M``, from :func:`_explicit`.  Where both bodies of a
    pair are in the subtree of ``s`` the turning parts cancel (``(u x* f).m + f.(u x m) =
    0``): only explicit parts remain, and ``D M`` vanishes."""
    nv = model.nv
    dq, dv, dM = be.zeros(nv, nv), be.zeros(nv, nv), be.zeros(nv, nv)
    E = _explicit(model, w, S, s, c, be)
    u = w.J[s][:, c:c + 1]
    related = set(model.ancestors(s)) | {i for i in range(model.nbodies) if s in model.ancestors(i)}
    for i in sorted(related):
        b = model.bodies[i]
        rows = _q_factors(model, w, S, E, s, u, i, be)
        for j in model.ancestors(i):
            bj = model.bodies[j]
            inside = E.dV[j] is not None
            for r, (x, t1, t4, G, H, Dt1, Dt4, DG, DH) in enumerate(rows):
                ri = b.idx_v + r
                for cc in range(bj.nv):
                    cj = bj.idx_v + cc
                    y, dA, dV, dAv = (X[j][:, cc:cc + 1] for X in (w.J, w.dAdq, w.dVdq, w.dAdv))
                    if inside:      # both turn: explicit parts only
                        if cj in cols:
                            dq[ri, cj] = (_dot(t1, E.dA[j][:, cc:cc + 1]) + _dot(t4, ang(E.dV[j][:, cc:cc + 1]))
                                          + _dot(Dt4[1], ang(dV)))
                        dv[ri, cj] = _dot(t1, E.dAv[j][:, cc:cc + 1]) + _dot(Dt4[1], ang(y))
                    else:
                        T1, T4 = _add(*Dt1), _add(*Dt4)
                        if cj in cols:
                            dq[ri, cj] = _dot(T1, dA) + _dot(T4, ang(dV))
                        dv[ri, cj] = _dot(T1, dAv) + _dot(T4, ang(y))
                        if j != i or cc >= r:
                            dM[ri, cj] = _dot(T1, y)
                            dM[cj, ri] = dM[ri, cj]
                    if j != i:
                        if ri in cols:
                            dq[cj, ri] = _dot(y, DG[1]) if inside else _dot(y, _add(*DG))
                        dv[cj, ri] = _dot(y, DH[1]) if inside else _dot(y, _add(*DH))
    return dq, dv, dM


def _symmetric_pairs(model: Model):
    """``same[d]``: the dofs of the joint of dof ``d``.  ``d2tau_dqdq[:, j, k]`` is symmetric
    in ``(j, k)`` when the two dofs are of different joints (their coordinates are
    independent, the perturbations commute) or of a one-dof joint; within a spherical,
    planar or free joint it is not (the tangent perturbations do not commute)."""
    same = {}
    for b in model.bodies:
        for d in range(b.idx_v, b.idx_v + b.nv):
            same[d] = set(range(b.idx_v, b.idx_v + b.nv))
    return same


def _christoffel(aq, i: int, j: int, k: int):
    """``d2tau_dvdv[i, j, k]`` on the row ``i`` of a one-dof joint from the slices ``aq[k] =
    d/dq_k M`` (Christoffel symbols of the first kind, doubled): with ``X_k`` the tangent
    direction of dof ``k``, ``tau_i = M_i. a + sum_jk (X_k M_ij - X_i M_jk / 2) v_j v_k +
    g_i`` (Lagrange's equation for the coordinate ``q_i``; the Boltzmann-Hamel equations
    add no term on it: ``X_i = d/dq_i`` commutes with every other direction, including a
    free-flyer's or spherical joint's), so its Hessian in v is ``X_k M_ij + X_j M_ik -
    X_i M_jk``.  On the rows of a multi-dof joint the directions do not commute (a
    structure-constant term appears): those rows come from :func:`_v_partials`."""
    return aq[k][i, j] + aq[j][i, k] - aq[i][j, k]


def second_order_tensors(model: Model, q, v, a, be):
    """The four tensors, each a list of nv slices (``nv x nv`` matrices, slice ``k`` the
    derivative along direction ``k``), on a model without mimic joints.  Slice ``k`` of
    ``d2tau_dqdq`` and of ``d2tau_dvdv`` is formed in the columns ``j <= k`` (and, for
    ``d2tau_dqdq``, the columns of ``k``'s own joint); the others are mirrored from slice
    ``j`` (:func:`_symmetric_pairs`; ``d2tau_dvdv`` is a Hessian in ``v``, its one-dof
    rows :func:`_christoffel` of ``dtau_dadq``).  The mixed
    tensor ``dtau_dqdv[:, j, k] = d/dv_k (dtau/dq)[:, j] = d/dq_j (dtau/dv)[:, k]`` (v is a
    vector space: the partials commute) comes from the q-directions.  The columns ``j <= k``
    of ``d2tau_dqdq`` (a column before the direction's, on a chain its ancestors) are the
    cheap side: there the direction moves the row bodies by turning parts and the subtree
    sums at ``s`` (:func:`_q_factors`), and the explicit parts of a column body (``E(dAdq)``,
    three cross products per column and direction) are needed for ``k``'s own joint only."""
    w = world_pass(model, q, v, a, be)
    be.mark("forward", *w.of, *w.P)
    S = _sums(model, w.oI, w.of, w.hv, w.P, be)
    nv = model.nv
    same = _symmetric_pairs(model)
    dirs = [(s, c, b.idx_v + c) for s, b in enumerate(model.bodies) for c in range(b.nv)]
    qq, vv, vq, aq = [], [], [], []
    for s, c, k in dirs:
        dq, dv, dM = _q_partials(model, w, S, s, c, set(range(k + 1)) | same[k], be)
        qq.append(dq)
        vq.append(dv)
        aq.append(dM)
    be.mark("q_directions", *qq, *vq, *aq)
    one_dof = [b.idx_v for b in model.bodies if b.nv == 1]
    multi = set(range(nv)) - set(one_dof)
    for s, c, k in dirs:
        vv.append(_v_partials(model, w, S, s, c, set(range(k + 1)), multi, be) if multi else be.zeros(nv, nv))
    for k in range(nv):
        for j in range(k + 1):
            for i in one_dof:
                vv[k][i, j] = _christoffel(aq, i, j, k)
    qv = [be.hcat([vq[j][:, k:k + 1] for j in range(nv)]) for k in range(nv)]   # d/dv_k dtau_dq = d/dq_j dtau_dv
    for k in range(nv):
        for j in range(k + 1, nv):
            vv[k][:, j] = vv[j][:, k]
            if j not in same[k]:
                qq[k][:, j] = qq[j][:, k]
    return qq, vv, qv, aq


def _project(G, T, nv, be):
    """Slices ``T`` of the extended tree mapped to the model: ``sum_k G[k, kk] G^T T_k G``."""
    P = [G.T @ X @ G for X in T]
    return [sum((G[k, kk] * X for k, X in enumerate(P)), be.zeros(nv, nv)) for kk in range(nv)]


def second_order_slices(model: Model, q, v, a, be):
    """The four tensors as lists of nv slices (:func:`second_order_tensors`) on any model:
    with mimic joints on the extended tree, projected by the constant mimic map."""
    ext, qe, (ve, ae), G = extended_state(model, q, (v, a), be)
    tensors = second_order_tensors(ext, qe, ve, ae, be)
    if G is not None:       # tau = G^T tau_ext(q_ext(q), G v, G a), d q_ext / d q = G (constant)
        tensors = [_project(G, T, model.nv, be) for T in tensors]
    return tensors


def rnea_second_order(model: Model, q, v, a, *, be):
    out = tuple(be.hcat(T) for T in second_order_slices(model, q, v, a, be))
    be.mark("backward", *out)
    return out


#: the step of the Pinocchio references' differences (:func:`richardson_columns`):
#: truncation O(h^4) (Richardson), rounding ~eps |first derivative| / h
PIN_FD_STEP = 1e-3


def richardson_columns(f, n: int, h: float = PIN_FD_STEP) -> np.ndarray:
    """The derivative of the vector function ``f(d)`` at ``d = 0`` along each unit
    direction of R^n, one column per direction: central differences at ``h`` and ``h/2``
    combined by Richardson extrapolation (truncation O(h^4)); the references of the
    second-order rows differentiate Pinocchio's first-order derivatives with it."""
    cols = []
    for e in np.eye(n):
        d1 = (f(h * e) - f(-h * e)) / (2 * h)
        d2 = (f(h / 2 * e) - f(-h / 2 * e)) / h
        cols.append((4 * d2 - d1) / 3)
    return np.column_stack(cols)


def pinocchio_rnea_second_order(pin, pm, pd, q, v, a, **_):
    """Pinocchio's reference for the four tensors.  The pin 4.1 Python binding does not
    expose ``ComputeRNEASecondOrderDerivatives`` (the C++ one is compared in
    tests/test_second_order.py through the benchmark shim), so this is Pinocchio's own
    definition of them, as its unit test checks them: differences of
    ``computeRNEADerivatives`` along ``pin.integrate(q, d)`` and along v, central at ``h``
    and ``h/2`` combined (Richardson)."""
    nv = pm.nv
    n2 = nv * nv

    def first(qq, vv):
        dq, dv, M = (np.array(X) for X in pin.computeRNEADerivatives(pm, pd, qq, vv, a))
        M = np.triu(M) + np.triu(M, 1).T
        return np.concatenate([dq.ravel(order="F"), dv.ravel(order="F"), M.ravel(order="F")])

    def diff(f):                               # rows: (i, j) column-major, columns: k
        return richardson_columns(f, nv)

    def as_out(F):       # (i, j) x k -> nv x nv^2, (i, j, k) in column j + nv k
        return F.reshape(-1, order="F").reshape(nv, n2, order="F")

    Fq = diff(lambda d: first(pin.integrate(pm, q, d), v))
    Fv = diff(lambda d: first(q, v + d))
    return as_out(Fq[:n2]), as_out(Fv[n2:2 * n2]), as_out(Fv[:n2]), as_out(Fq[2 * n2:])


# --- contracted with a multiplier (aba_hessian_product) ------------------------------------

class _MuSums(NamedTuple):
    """Direction-independent factors of the tensors contracted with ``mu`` over their first
    index: per body ``xm = J mu_i`` (the joint's columns weighted by its entries of mu),
    ``U`` the sum of ``xm`` over the strict ancestors, ``YU = Ycrb U``, ``KU = Bc^T U``
    (angular part), the row factors ``t1 = Ycrb x``, ``G``, ``H`` of
    :func:`~gen.algorithms.world.tau_partials` per column ``x``, and the subtree sums ``A1``
    of ``Ycrb xm`` and ``A4`` of ``Bc^T xm`` (sums over the rows below a body)."""

    xm: list
    U: list
    YU: list
    KU: list
    t1: list
    G: list
    H: list
    A1: list
    A4: list
    N_below: list
    N: list


def _coriolis_t_matrix(Y, z, be):
    """The 3 x 6 matrix ``N`` with ``N u = Bc(Y, u)^T z`` (angular part; ``Bc(Y, u)`` the
    Coriolis matrix of inertia ``Y`` moving with ``u``, :func:`coriolis_terms`), bilinear in
    ``(u, z)``: its columns at the unit twists."""
    cols = []
    for m in range(6):
        e = be.zeros(6, 1)
        e[m, 0] = 1.0
        dh = rigid_apply(Y, e, be)
        cols.append(coriolis_apply_t((2.0 * lin(dh), ang(dh), coriolis_block(Y, e, be)), z, be))
    return be.hcat(cols)


def _mu_sums(model: Model, w: World, S: _Sums, mu, be) -> _MuSums:
    xm = [w.J[i] @ mu[b.idx_v:b.idx_v + b.nv, :] for i, b in enumerate(model.bodies)]
    U = []
    for b in model.bodies:
        U.append(be.zeros(6, 1) if b.parent == -1 else U[b.parent] + xm[b.parent])
    t1, G, H = [], [], []
    for i in range(model.nbodies):
        cols = colsof(w.J[i])
        t1.append([rigid_apply(S.Yc[i], x, be) for x in cols])
        G.append([cross_force(x, S.Fc[i], be) + rigid_apply(S.Yc[i], w.dAdq[i][:, r:r + 1], be)
                  + coriolis_apply(S.K[i], w.dVdq[i][:, r:r + 1], be) for r, x in enumerate(cols)])
        H.append([rigid_apply(S.Yc[i], w.dAdv[i][:, r:r + 1], be) + coriolis_apply(S.K[i], x, be)
                  for r, x in enumerate(cols)])
    # N_i u = sum over l below i of Bc(Ycrb_l, u)^T xm_l, plus Bc(Ycrb_i, u)^T U_i: the
    # explicit Coriolis terms of a direction (u = dVdq of its column, or a v-direction's
    # twist) seen by the rows below i and the columns above it
    N_below = composite(model, [_coriolis_t_matrix(Y, x, be) for Y, x in zip(S.Yc, xm)])
    N = [n + _coriolis_t_matrix(Y, u, be) for n, Y, u in zip(N_below, S.Yc, U)]
    return _MuSums(xm, U, [rigid_apply(Y, u, be) for Y, u in zip(S.Yc, U)],
                   [coriolis_apply_t(K, u, be) for K, u in zip(S.K, U)], t1, G, H,
                   composite(model, [rigid_apply(Y, x, be) for Y, x in zip(S.Yc, xm)]),
                   composite(model, [coriolis_apply_t(K, x, be) for K, x in zip(S.K, xm)]), N_below, N)


class _Acc:
    """An nv-vector accumulated entry by entry."""

    def __init__(self, nv):
        self.x = [None] * nv

    def add(self, k, e):
        self.x[k] = e if self.x[k] is None else self.x[k] + e

    def vector(self, be):
        out = be.zeros(len(self.x), 1)
        for k, e in enumerate(self.x):
            if e is not None:
                out[k, 0] = e
        return out


class _Row(NamedTuple):
    """Direction-independent factors of one row ``x`` (column of joint i) of the contracted
    q-directions (:func:`_q_contracted`): a direction ``(u, dVu, dAu)`` moving body i
    (i below the joint of u) adds ``dAu.dA + dVu.dV`` to ``mu^T D dtau_dq`` at x (on the
    joint of u itself ``Ea.k1 - dAu.k6 + dVu.dVs``) and ``dVu.r3`` to ``mu^T D dtau_dv``; a
    v-direction ``u`` adds ``u.r3`` (on its own joint ``u.r3s``).  Derived from the
    explicit parts of :func:`_explicit` dotted with the row sums ``AY = A1 + YU``,
    ``AK = A4 + KU`` (:class:`_MuSums`), ``E(Fc)`` with ``x x U`` and ``E(K)`` through
    ``N``, each moved to the direction's side by ``(a x b).f = -b.(a x* f)``: with
    ``k1 = x x* AY``, ``E(dAdq) = Ea x x + dVu x dV + ov_p x (dVu x x)`` and
    ``Ea = dAu + dVu x ov_p`` below the joint of u, ``AY.E(dAdq) = dAu.k1 + dVu.(dV x* AY
    - x x* (ov_p x* AY) + ov_p x* k1)``."""

    k1: object
    k6: object
    dA: object
    dV: object
    dVs: object
    r3: object
    r3s: object


def _row_factors(model: Model, w: World, S: _Sums, Z: _MuSums, be) -> list:
    rows = []
    for i, b in enumerate(model.bodies):
        AY, AK = Z.A1[i] + Z.YU[i], Z.A4[i] + Z.KU[i]
        vp = be.zeros(6, 1) if b.parent == -1 else w.ov[b.parent]
        g = cross_force(vp, AY, be)
        out = []
        for r in range(b.nv):
            x, dV = w.J[i][:, r:r + 1], w.dVdq[i][:, r:r + 1]
            k1 = cross_force(x, AY, be)
            xU = cross_motion(x, Z.U[i], be)
            k6 = rigid_apply(S.Yc[i], xU, be)
            k57 = cross3(ang(x), AK, be) - coriolis_apply_t(S.K[i], xU, be)
            k9 = Z.N[i].T @ ang(x)
            dVs = cross_force(dV, AY, be) - cross_force(x, g, be) + Z.N[i].T @ ang(dV) + be.vcat([be.zeros(3, 1), k57])
            out.append(_Row(k1, k6, k1 - k6, dVs + cross_force(vp, k1, be), dVs, 2.0 * k1 + k9, k1 + k9))
        rows.append(out)
    return rows


def _q_contracted(model: Model, w: World, S: _Sums, Z: _MuSums, R: list, s: int, c: int, be):
    """Along column ``c`` of joint ``s``: ``mu^T D dtau_dq``, ``mu^T D dtau_dv`` and
    ``mu^T D M`` (nv-vectors), the pair formulas of :func:`_q_partials` summed over the rows
    first: a column ``j`` sees the rows below it through the subtree sums of :class:`_MuSums`
    (in the subtree of ``s`` the explicit parts, on the path above ``s`` the turning sums
    plus the path's own rows, a running sum), a row ``i`` the columns above it through ``U``
    (``U.(u x* f) = -(u x U).f``, ``U.(Y z) = (Y U).z``, ``U.(Bc z) = (Bc^T U).z``); in the
    subtree of ``s`` both together are the row factors of :class:`_Row`."""
    b = model.bodies[s]
    u, dVu, dAu = (X[s][:, c:c + 1] for X in (w.J, w.dVdq, w.dAdq))
    Ea = cross_motion(w.a0 if b.parent == -1 else w.oa[b.parent], u, be)
    dq, dv, dM = _Acc(model.nv), _Acc(model.nv), _Acc(model.nv)
    uUs = cross_motion(u, Z.U[s], be)
    for i in range(model.nbodies):
        if s not in model.ancestors(i):
            continue
        for r, f in enumerate(R[i]):
            k = model.bodies[i].idx_v + r
            if i == s:
                dq.add(k, _dot(Ea, f.k1) - _dot(dAu, f.k6) + _dot(dVu, f.dVs) - _dot(uUs, Z.G[i][r]))
            else:
                dq.add(k, _dot(dAu, f.dA) + _dot(dVu, f.dV) - _dot(uUs, Z.G[i][r]))
            dv.add(k, _dot(dVu, f.r3) - _dot(uUs, Z.H[i][r]))        # E(dAdv) = 2 E(dVdq), s included
            dM.add(k, -_dot(uUs, Z.t1[i][r]))
    # the subtree sums at s change by turning and explicit parts (:func:`_explicit`)
    dh = rigid_apply(S.Yc[s], dVu, be)
    Yc_s = _turn_inertia(u, S.Yc[s], be)
    K_s = _add_terms(_turn_coriolis(u, S.K[s], be), (2.0 * lin(dh), ang(dh), coriolis_block(S.Yc[s], dVu, be)))
    Fc_s = cross_force(u, S.Fc[s], be) + rigid_apply(S.Yc[s], dAu, be) + coriolis_apply(S.K[s], dVu, be)
    T1 = cross_force(u, Z.A1[s], be)
    T4 = cross3(ang(u), Z.A4[s], be) + Z.N_below[s] @ dVu
    P = be.zeros(6, 1)
    for j in model.ancestors(s)[1:]:        # the path above s: everything turns or changes
        bj = model.bodies[j]
        P = P + Z.xm[j]
        R1 = T1 + rigid_apply(Yc_s, P + Z.U[j], be)      # the rows below j, then the columns above it
        R4 = T4 + coriolis_apply_t(K_s, P + Z.U[j], be)
        for r in range(bj.nv):
            k, x = bj.idx_v + r, w.J[j][:, r:r + 1]
            dA, dV, dAv = (X[j][:, r:r + 1] for X in (w.dAdq, w.dVdq, w.dAdv))
            dq.add(k, _dot(R1, dA) + _dot(R4, ang(dV)) - _dot(cross_motion(x, Z.U[j], be), Fc_s))
            dv.add(k, _dot(R1, dAv) + _dot(R4, ang(x)))
            dM.add(k, _dot(R1, x))
    return dq.vector(be), dv.vector(be), dM.vector(be)


def _v_contracted(model: Model, w: World, S: _Sums, Z: _MuSums, R: list, s: int, c: int, be):
    """``mu^T D dtau_dv`` along column ``c`` of joint ``s`` of v (:func:`_v_partials` summed
    over the rows first, as :func:`_q_contracted`): in the subtree of ``s`` ``u.r3``
    (:class:`_Row`: ``D dAdv = 2 u x J`` below s, ``u x J`` on it, ``D K = K(Ycrb, u)``), on
    the path above it the changed Coriolis sums of ``s``."""
    u = w.J[s][:, c:c + 1]
    out = _Acc(model.nv)
    for i in range(model.nbodies):
        if s in model.ancestors(i):
            for r, f in enumerate(R[i]):
                out.add(model.bodies[i].idx_v + r, _dot(u, f.r3s if i == s else f.r3))
    dh = rigid_apply(S.Yc[s], u, be)
    DK = (2.0 * lin(dh), ang(dh), coriolis_block(S.Yc[s], u, be))
    V4 = Z.N_below[s] @ u
    P = be.zeros(6, 1)
    for j in model.ancestors(s)[1:]:
        b = model.bodies[j]
        P = P + Z.xm[j]
        R4 = V4 + coriolis_apply_t(DK, P + Z.U[j], be)
        for r in range(b.nv):
            out.add(b.idx_v + r, _dot(R4, ang(w.J[j][:, r:r + 1])))
    return out.vector(be)


def contracted_second_order(model: Model, q, v, a, mu, be):
    """``(C_qq, C_vv, C_qv, B)``, nv x nv: the four tensors of :func:`rnea_second_order`
    contracted with ``mu`` over their first index, ``C[j, k] = sum_i mu_i T[i, j, k]``
    (``B`` from ``dtau_dadq``), without forming them: per direction one pass over the
    bodies it moves (:func:`_q_contracted`, :func:`_v_contracted`).  Mimic joints: on the
    extended tree with ``mu_ext = G mu``, then ``G^T C G``."""
    ext, qe, (ve, ae, me), G = extended_state(model, q, (v, a, mu), be)
    w = world_pass(ext, qe, ve, ae, be)
    S = _sums(ext, w.oI, w.of, w.hv, w.P, be)
    Z = _mu_sums(ext, w, S, me, be)
    R = _row_factors(ext, w, S, Z, be)
    dirs = [(s, c) for s, b in enumerate(ext.bodies) for c in range(b.nv)]
    qcols = [_q_contracted(ext, w, S, Z, R, s, c, be) for s, c in dirs]
    C_qq = be.hcat([x for x, _, _ in qcols])
    C_qv = be.hcat([x for _, x, _ in qcols]).T        # row k: along q_k
    B = be.hcat([x for _, _, x in qcols])
    C_vv = be.hcat([_v_contracted(ext, w, S, Z, R, s, c, be) for s, c in dirs])
    out = (C_qq, C_vv, C_qv, B)
    return out if G is None else tuple(G.T @ X @ G for X in out)
