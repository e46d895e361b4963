"""The Hessian of ``lam^T ddq(q, v, tau)`` with respect to ``(q, v, tau)``: forward
dynamics' second derivatives contracted with a multiplier, what a DDP or exact-Hessian SQP
solver needs from ``ddq = aba(q, v, tau)`` (issue 35 §2), with the gradient and the value.

Convention (the chart of the first-order rows): q is perturbed in the tangent space,
``F(delta, v, tau) = lam^T ddq(integrate(q, delta), v, tau)``, and the outputs are the
derivatives of F at ``delta = 0``: the gradient, and the Hessian, symmetric, in the chart
``delta -> integrate(q, delta)`` (what a solver working in that chart sees).  Differentiating
the first-order tangent derivative instead (``d/d delta_k`` of ``lam^T ddq_dq`` at
``integrate(q, delta)``, Pinocchio's convention for its ``d2tau_dqdq``) gives this Hessian
plus ``1/2 g . [e_k, e_j]`` (``g`` the tangent gradient, ``[.,.]`` the Lie bracket of the
joint's group, by the Baker-Campbell-Hausdorff formula ``exp(d) exp(e) = exp(d + e + [d, e]/2
+ ...)``): an antisymmetric term, nonzero only within a spherical, planar or free joint.
Its symmetric part is the chart Hessian returned here.

Method (second-order adjoint of ``rnea(q, v, ddq) = tau``; Nganga & Wensing, RA-L 2021;
Singh, Russell & Wensing, RA-L 2022): with ``mu = M^-1 lam`` and
``L(x, a) = lam^T a - mu^T (rnea(q, v, a) - tau)``, stationary in ``a`` at ``a = ddq``,
``A = d ddq / d(q, v, tau) = (ddq_dq, ddq_dv, M^-1)`` (:func:`aba_derivatives`) and
``L_aa = 0`` (rnea is linear in a)::

    gradient:  lam^T A = (lam^T ddq_dq, lam^T ddq_dv, mu^T)
    Hessian:   L_xx + L_xa A + A^T L_ax,  L_xx = -mu^T d2 rnea/dx2 (q, v blocks),
               L_qa[k, j] = -B[j, k],  B[j, k] = sum_i mu_i dM_ij/dq_k

so, with ``C_xy[j, k] = sum_i mu_i`` of Pinocchio's tensors at ``a = ddq``
(:mod:`gen.algorithms.rnea_second_order`: ``d2tau_dqdq``, ``dtau_dqdv``, ``d2tau_dvdv``)::

    h_qq   = -(C_qq + C_qq^T) / 2 - (P + P^T),   P = B^T ddq_dq
    h_qv   = -C_qv - B^T ddq_dv
    h_vv   = -(C_vv + C_vv^T) / 2      (C_vv is symmetric; halved to be so in floating point)
    h_qtau = -B^T M^-1
    (h_vtau = 0, h_tautau = 0: ddq is affine in tau)

``h_qq`` and ``h_vv`` are exactly symmetric (each entry and its mirror are the same
rounded sums: ``x + y = y + x``).  The tensors are never formed: the C's are contracted
with ``mu`` inside the directional derivatives of the world-frame recursion
(:func:`~gen.algorithms.rnea_second_order.contracted_second_order`: per direction, the
pair formulas summed over rows first, through subtree sums of ``Ycrb J mu`` and
``Bc^T J mu`` and the ancestors' ``sum J mu``): per direction a pass over the bodies it
moves, where forming the tensors costs a pass over their pairs.  Neither ``M^-1`` nor
``ddq_dq``, ``ddq_dv`` is formed either: with ``ddq_dx = Z_x - M^-1 X_x`` (``X`` the RNEA
partials at ``a = ddq``, ``Z`` a free-flyer base's closed-form columns, as in
:mod:`~gen.algorithms.aba_derivatives`), ``mu`` and ``M^-1 B`` come from the tree-sparse
factor ``M^-1 = W diag(d) W^T`` (``W = L^-1``), ``h_qtau = -(M^-1 B)^T``,
``P = B^T Z_q + h_qtau X_q``, ``h_qv = -C_qv - B^T Z_v - h_qtau X_v`` and the gradient is
``Z^T lam - X^T mu`` (products with the sparse ``X`` and ``Z``).  With mimic joints the
matrices of :func:`aba_derivatives` (a dense solve of M) are used instead.

Shapes: q (nq,1), v (nv,1), tau (nv,1), lam (nv,1) -> h_qq, h_qv, h_vv, h_qtau (nv,nv),
g_q, g_v, g_tau (nv,1), ddq (nv,1).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from ..spatial import ang, lin, skew3
from .aba_derivatives import aba_derivatives, columns_from, forward_ltdl
from .rnea_second_order import contracted_second_order, richardson_columns
from .world import base_coordinates, tau_partials, world_pass


def aba_hessian_product(model: Model, q, v, tau, lam, *, be):
    if model.has_mimic:
        return _mimic_hessian(model, q, v, tau, lam, be)
    nv = model.nv
    ddq, W, d = forward_ltdl(model, q, v, tau, be)
    mu = _minv_apply(W, d, lam, be)
    be.mark("aba", ddq, mu)
    w = world_pass(model, q, v, ddq, be)
    Xq, Xv, _ = tau_partials(model, w, w.of, be)
    # ddq_dq = Zq - M^-1 Xq, ddq_dv = Zv - M^-1 Xv (aba_derivatives: a free-flyer base's
    # columns in closed form, Zq and Zv, the other columns from dtau/dq, dtau/dv at a = ddq)
    Zq, Zv = be.zeros(nv, nv), be.zeros(nv, nv)
    if base_coordinates(model):
        Zq[0:3, 3:6] = -skew3(lin(w.a0), be)
        Zv[0:3, 0:3] = -skew3(ang(v[0:6, 0:1]), be)
        Xq, Xv = columns_from(Xq, 6, be), columns_from(Xv, 3, be)
    be.mark("rnea_derivatives", Xq, Xv)
    C_qq, C_vv, C_qv, B = contracted_second_order(model, q, v, ddq, mu, be)
    be.mark("second_order", C_qq, C_vv, C_qv, B)
    h_qtau = -_minv_apply(W, d, B, be).T            # -B^T M^-1 = -(M^-1 B)^T
    P = B.T @ Zq + h_qtau @ Xq                       # B^T ddq_dq
    h_qq = -0.5 * (C_qq + C_qq.T) - (P + P.T)
    h_qv = -C_qv - B.T @ Zv - h_qtau @ Xv            # -C_qv - B^T ddq_dv
    h_vv = -0.5 * (C_vv + C_vv.T)
    grads = (Zq.T @ lam - Xq.T @ mu, Zv.T @ lam - Xv.T @ mu, mu)
    be.mark("hessian", h_qq, h_qv, h_vv, h_qtau, *grads)
    return (h_qq, h_qv, h_vv, h_qtau, *grads, ddq)


def _minv_apply(W, d, X, be):
    """``M^-1 X = W diag(d) W^T X`` with ``W = L^-1`` (tree-sparse: its structural zeros
    cost nothing) and ``d = 1/D`` of :func:`~gen.algorithms.aba_derivatives.forward_ltdl`."""
    Y = W.T @ X
    return W @ be.vcat([d[k] * Y[k:k + 1, :] for k in range(Y.shape[0])])


def _mimic_hessian(model: Model, q, v, tau, lam, be):
    """Mimic joints: from :func:`aba_derivatives`' matrices (the dense solve of M and the
    RNEA partials on the extended tree)."""
    A_q, A_v, Minv, ddq = aba_derivatives(model, q, v, tau, be=be)
    mu = Minv @ lam
    C_qq, C_vv, C_qv, B = contracted_second_order(model, q, v, ddq, mu, be)
    be.mark("second_order", C_qq, C_vv, C_qv, B)
    P = B.T @ A_q
    h_qq = -0.5 * (C_qq + C_qq.T) - (P + P.T)
    h_vv = -0.5 * (C_vv + C_vv.T)
    grads = (A_q.T @ lam, A_v.T @ lam, mu)
    out = (h_qq, -C_qv - B.T @ A_v, h_vv, -B.T @ Minv, *grads)
    be.mark("hessian", *out)
    return (*out, ddq)


def pinocchio_aba_hessian_product(pin, pm, pd, q, v, tau, lam, **_):
    """Pinocchio's reference: it has no second-order forward dynamics, so Richardson
    differences (central at ``h`` and ``h/2``) of ``lam^T`` its ``computeABADerivatives``
    along ``pin.integrate(q, d)``, v and tau, symmetrised in q (the chart Hessian, module
    docstring); the gradient ``lam^T`` its derivatives and the value its ``data.ddq``."""
    nv = pm.nv

    def grad(qq, vv, tt):
        dq, dv, Minv = (np.array(X) for X in pin.computeABADerivatives(pm, pd, qq, vv, tt))
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        return np.concatenate([lam @ dq, lam @ dv, lam @ Minv]), np.array(pd.ddq)

    def diff(f):                                # rows: gradient entries, columns: directions
        return richardson_columns(f, nv)

    Dq = diff(lambda d: grad(pin.integrate(pm, q, d), v, tau)[0])
    Dv = diff(lambda d: grad(q, v + d, tau)[0])
    Dt = diff(lambda d: grad(q, v, tau + d)[0])
    g, ddq = grad(q, v, tau)
    h_qq = Dq[:nv]
    return (0.5 * (h_qq + h_qq.T), Dv[:nv], Dv[nv:2 * nv], Dt[:nv], g[:nv], g[nv:2 * nv], g[2 * nv:], ddq)


#: its outputs (:func:`aba_hessian_product`): the Hessian blocks, the gradient, the value
HESSIAN_BLOCKS = ("h_qq", "h_qv", "h_vv", "h_qtau")
GRADIENT = ("g_q", "g_v", "g_tau")
_CHART = " (q in the chart integrate(q, d), d = 0)"
HESSIAN_DOCS = {
    "lam": "multiplier on ddq (the Hessian is that of lam^T ddq)",
    "h_qq": "d2(lam^T ddq)/dq2, symmetric" + _CHART,
    "h_qv": "d2(lam^T ddq)/dq dv (rows q, columns v)" + _CHART,
    "h_vv": "d2(lam^T ddq)/dv2, symmetric",
    "h_qtau": "d2(lam^T ddq)/dq dtau (rows q, columns tau) = -(d(M^T mu)/dq)^T M^-1, mu = M^-1 lam" + _CHART,
    "g_q": "d(lam^T ddq)/dq = ddq_dq^T lam" + _CHART,
    "g_v": "d(lam^T ddq)/dv = ddq_dv^T lam",
    "g_tau": "d(lam^T ddq)/dtau = M^-1 lam",
    "ddq": "forward dynamics ddq = aba(q, v, tau), the point the derivatives are taken at"}


def hessian_inputs(model: Model, cset):
    return [("q", model.nq), ("v", model.nv), ("tau", model.nv), ("lam", model.nv)]


def hessian_outputs(model: Model, cset):
    """The four ``nv x nv`` Hessian blocks (``h_vtau`` and ``h_tautau`` are zero: ddq is
    affine in tau), the gradient's three ``nv``-vectors, then ``ddq``."""
    nv = model.nv
    return [(n, nv, nv) for n in HESSIAN_BLOCKS] + [(n, nv, 1) for n in GRADIENT] + [("ddq", nv, 1)]
