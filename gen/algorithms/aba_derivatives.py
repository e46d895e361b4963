"""Partial derivatives of forward dynamics, ``(dddq/dq, dddq/dv, M^-1)`` at ``(q, v, tau)``,
and the value ``ddq`` they are taken at.

Carpentier & Mansard, RSS 2018, §IV (Pinocchio's ``computeABADerivatives``): since
``rnea(q, v, aba(q, v, tau)) = tau`` for all arguments, differentiating gives
``M dddq/dx + dtau/dx |_(a = ddq) = 0`` for x in (q, v) and ``dddq/dtau = M^-1``.
Computed on one world pass (:mod:`gen.algorithms.world`; CSE shares everything that does
not depend on the acceleration between its two evaluations)::

    b = J_i^T Fc_i at a = 0, M_ij = J_i^T Ycrb_i J_j    (world-frame RNEA and CRBA)
    M = L^T D L                                          (Featherstone 2005, tree sparsity)
    ddq = M^-1 (tau - b)                                 (two sparse triangular solves)
    M^-1 = V V^T,  V = L^-1 D^-1/2                       (be.product: C loops, gen.products)
    dtau/dq, dtau/dv at a = ddq                          (RSS 2018 Alg. 1, world.py)
    dddq/dq = -M^-1 dtau/dq,   dddq/dv = -M^-1 dtau/dv    (be.product: a column of M^-1
                                                          per nonzero of dtau, which the C
                                                          runs as vectorised loops, gen.products)

A free-flyer base that is the only root gives six columns of ``dddq/dq`` and three of
``dddq/dv`` in closed form (exact identities, no solve).  In the base's axes gravity is a
linear acceleration ``a_g = R^T (-g)`` of the base: ``ddq = fd_0(q, v, tau) - E a_g``
with ``fd_0`` free of gravity and of the base pose (every other quantity is relative to
the base; tau's base rows are a body-fixed wrench), ``E`` the base's linear rows.  A
tangent perturbation ``delta`` of the base position changes nothing; one of its
orientation gives ``a_g -> a_g + a_g x delta``, so ``dddq/dq[:, 0:6] = [0, -E [a_g]x]``.
A change ``delta`` of the base's LOCAL linear velocity is a uniform boost of the whole
system (Galilean invariance: joint and classical accelerations unchanged), under which
the base's spatial acceleration ``d/dt (R^T pdot)`` changes by ``-w x delta``, so
``dddq/dv[:, 0:3] = -E [w]x`` (w the base's angular velocity).

With mimic joints ``aba`` and ``minv`` are the dense solve of ``M`` and the RNEA partials
are taken on the extended tree (:func:`~gen.algorithms.rnea_derivatives.tau_derivatives`).
``dddq/dq`` is in the tangent space (``q + delta = integrate(q, delta)``), Pinocchio's.
The last output is the ``ddq`` solved above (the point the partials are taken at, what
Pinocchio's ``computeABADerivatives`` leaves in ``data.ddq``): one kernel gives an
optimal-control node its value and derivatives, no second forward pass.  It is ``aba``'s
value by another exact algorithm (``L^T D L`` solve instead of articulated inertias), equal
to rounding.
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq_dq, ddq_dv, Minv (nv,nv), ddq (nv,1).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from ..spatial import ang, lin, skew3
from .aba import aba
from .minv import minv
from .proximal import Unmarked
from .rnea_derivatives import tau_derivatives
from .sparse_ldl import dense_lower_inverse, inverse_as_product, ldl_solve, tree_ldl
from .world import base_coordinates, bias_torques, tau_partials, world_pass


def aba_derivatives(model: Model, q, v, tau, *, be):
    if model.has_mimic:
        return _mimic_aba_derivatives(model, q, v, tau, be)
    ddq, W, d = forward_ltdl(model, q, v, tau, be)
    Minv = inverse_as_product(W, d, be)
    be.mark("aba_minv", ddq, Minv)
    w = world_pass(model, q, v, ddq, be)
    dq, dv, _ = tau_partials(model, w, w.of, be)
    be.mark("rnea_derivatives", dq, dv)
    out = [be.zeros(model.nv, model.nv), be.zeros(model.nv, model.nv)]
    known = (0, 0)
    if base_coordinates(model):         # the free-flyer's columns in closed form (module docstring)
        out[0][0:3, 3:6] = -skew3(lin(w.a0), be)
        out[1][0:3, 0:3] = -skew3(ang(v[0:6, 0:1]), be)
        known = (6, 3)
    out = [be.product(Y, [(-1.0, Minv, columns_from(X, k, be))]) for Y, X, k in zip(out, (dq, dv), known)]
    be.mark("product", *out)
    return out[0], out[1], Minv, ddq


def columns_from(X, first: int, be):
    """``X`` with its columns before ``first`` zero."""
    if not first:
        return X
    out = be.zeros(*X.shape)
    out[:, first:] = X[:, first:]
    return out


def forward_ltdl(model: Model, q, v, tau, be):
    """``(ddq, W, d)`` of a model without mimic joints, from one world pass at ``a = 0``
    (``b``, ``M``), ``M = L^T D L`` on the tree pattern and two sparse solves for ``ddq``;
    ``W = L^-1`` (nv x nv, nonzero on each row's ancestors) and ``d = 1/D`` give
    ``M^-1 = W diag(d) W^T``."""
    nv = model.nv
    w0 = world_pass(model, q, v, be.zeros(nv, 1), be)
    pattern, dinv, L, W = _tree_ltdl(model, w0, be)
    rhs = tau - bias_torques(model, w0, be)
    ddq = be.vcat(ldl_solve(pattern, dinv, L, [rhs[k, 0] for k in range(nv)]))
    return ddq, W, dinv


def minv_factor(model: Model, q, be):
    """``(W, d)`` with ``M^-1 = W diag(d) W^T`` at q (:func:`forward_ltdl` without the
    velocity, gravity and solve)."""
    zero = be.zeros(model.nv, 1)
    _, dinv, _, W = _tree_ltdl(model, world_pass(model, q, zero, zero, be, gravity=False, coriolis=False), be)
    return W, dinv


def _tree_ltdl(model: Model, w0, be):
    """``(pattern, d, L, W)``: ``M = L^T D L`` on the tree pattern (``M`` the world-frame
    CRBA of the pass ``w0``), ``d = 1/D`` and ``W = L^-1`` as an nv x nv matrix."""
    _, _, M = tau_partials(model, w0, w0.of, be, want_q=False, want_v=False, want_M=True)
    pattern, dinv, L = tree_ldl(model, M, be)
    return pattern, dinv, L, dense_lower_inverse(pattern, L, be)


def _mimic_aba_derivatives(model: Model, q, v, tau, be):
    """Mimic joints: ``aba`` and ``minv`` (the dense solve) and the RNEA partials on the
    extended tree."""
    sub = Unmarked(be)
    (ddq,) = aba(model, q, v, tau, be=sub)
    (Minv,) = minv(model, q, be=sub)
    be.mark("aba_minv", ddq, Minv)
    dq, dv, _, _ = tau_derivatives(model, q, v, ddq, sub)
    be.mark("rnea_derivatives", dq, dv)
    out = [be.product(be.zeros(model.nv, model.nv), [(-1.0, Minv, X)]) for X in (dq, dv)]
    be.mark("product", *out)
    return out[0], out[1], Minv, ddq


def pinocchio_aba_derivatives(pin, pm, pd, q, v, tau, **_):
    """Pinocchio's ``computeABADerivatives`` (its Minv has the upper triangle only) and the
    ``data.ddq`` it computes on the way."""
    dq, dv, Minv = pin.computeABADerivatives(pm, pd, q, v, tau)
    Minv = np.array(Minv)
    return np.array(dq), np.array(dv), np.triu(Minv) + np.triu(Minv, 1).T, np.array(pd.ddq)
