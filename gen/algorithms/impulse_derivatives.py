"""Partial derivatives of the impact map: ``(dv+/dq, dv+/dv-, dimpulse/dq,
dimpulse/dv-)`` at ``(q, v-)``, then the values ``(v+, impulse)`` they are taken at
(the forward solve below; Pinocchio's ``impulseDynamics`` leaves them in
``data.dq_after`` and ``data.impulse_c``), the semantics of Pinocchio's
``computeImpulseDynamicsDerivatives`` (whose ``ddq_dv`` output is ``dv+/dv- - I``; rbdgen
returns ``dv+/dv-`` itself).

**Forward solve.**  The impact (Tedrake 2012 §3.2, :mod:`gen.algorithms.impulse`)
``M (v+ - v-) = J^T P``, ``J v+ = -e J v-`` is solved on the dense damped dual, as in
:mod:`gen.algorithms.constrained_derivatives`: ``P_k = D_mu^-1 (rho P_{k-1} - (1 + e) J
v-)``, ``v+ = v- + (J M^-1)^T P_K`` (``iterations`` steps from ``P_0 = 0``; converged, the
minimum-norm impulse).

**Implicit differentiation** at the returned ``(v+, P)``, with ``dv = v+ - v-``::

    M ddv/dx - J^T dP/dx = -dtau/dx,     J dv+/dx = -dc/dx

* x = q: ``dtau/dq`` are the q-partials of ``M(q) dv - J(q)^T P``: ``rnea_derivatives``
  at ``v = 0``, ``a = dv``, no gravity, ``P`` as body-fixed external forces;
  ``dc/dq`` the q-partials of ``J(q) (v+ + e v-)`` (frame velocity partials of
  :mod:`gen.algorithms.world` at the velocity ``v+ + e v-``);
* x = v-: ``dtau = 0`` and ``J dv+/dv- = -e J``, ``dv+/dv- = I + M^-1 J^T dP/dv-``.

Eliminating: ``dP/dq`` from ``R_q = dc/dq - J M^-1 dtau/dq``, ``dP/dv- `` from
``R_v = (1 + e) J``, each by the proximal iteration at ``mu`` (K steps; at
convergence ``-(J M^-1 J^T)^+ R``); ``dv+/dq = M^-1 (J^T dP/dq - dtau/dq)``.  The K
steps, linear in their right-hand side, are the one matrix ``-S_K`` of
:func:`~gen.algorithms.constrained_derivatives.proximal_operator`, formed once and
applied to ``(1 + e) J v-``, ``R_q`` and ``R_v``.  With ``Q = S_K J M^-1`` and
``P = M^-1 - (J M^-1)^T Q`` the outputs are products of dense matrices with the sparse
partials, formed by ``be.product`` (C loops, :mod:`gen.products`); as in
constrained_derivatives (:func:`~gen.algorithms.constrained_derivatives.dual_products`)
``Q``, ``Q^T`` and ``P`` are products too, from ``M^-1 = W D^-1 W^T`` (the tree's
``L^T D L`` at q), so the straight-line code forms none of them::

    dP/dq = Q dtau/dq - S_K dc/dq,      dv+/dq = -Q^T dc/dq - P dtau/dq,
    dP/dv- = -S_K (1 + e) J,             dv+/dv- = I - Q^T (1 + e) J.
Constraints and mimic joints (the partials on the extended tree, mapped back by ``G``) as
in :mod:`gen.algorithms.constrained_derivatives`.
Shapes: q (nq,1), v_minus (nv,1) -> dvplus_dq, dvplus_dv (nv,nv), dimpulse_dq,
dimpulse_dv (m,nv), v_plus (nv,1), impulse (m,1).  Options: ``iterations``, ``mu``, ``restitution`` (e in [0, 1]).
"""
from __future__ import annotations

import numpy as np

from ..constraint_spec import as_constraint_set
from ..errors import RbdgenError
from ..kinematics import chain, extended_state
from ..model import Model
from .aba_derivatives import minv_factor
from .constrained_derivatives import (
    check_set,
    constraint_partials,
    dense_inverse,
    dual_products,
    factored_inverse,
    proximal_operator,
)
from .dense import sym_product
from .minv import minv
from .pinocchio import EXACT_DERIVATIVE_MU, rigid_constraints
from .proximal import DEFAULT_ITERATIONS, DEFAULT_MU, Unmarked
from .world import tau_partials, world_forces, world_pass


def impulse_derivatives(model: Model, q, v_minus, *, be, cset=None, iterations=DEFAULT_ITERATIONS,
                        mu=DEFAULT_MU, restitution=0.0):
    if not 0.0 <= restitution <= 1.0:
        raise RbdgenError(f"restitution coefficient {restitution} must lie in [0, 1] (0: plastic, 1: elastic)")
    cset = as_constraint_set(model, cset)
    check_set(cset, "impulse_derivatives")
    K, e = int(iterations), float(restitution)
    J = cset.jacobian(model, q, be=be)
    if model.has_mimic:
        (Minv,) = minv(model, q, be=Unmarked(be))
        inverse = dense_inverse(J, Minv)
    else:                               # M^-1 = W diag(d) W^T, never formed in the straight-line code
        inverse = factored_inverse(J, *minv_factor(model, q, be), be)
    JMinv = inverse.JMinv
    Sn = -proximal_operator(sym_product(JMinv.T, J.T, be), cset.damping(mu), K, be)   # K steps: X_K = Sn R
    P = Sn @ ((1.0 + e) * (J @ v_minus))                                  # J dv = -(1 + e) J v-
    dv = JMinv.T @ P
    v_plus = v_minus + dv
    be.mark("forward", v_plus, P)

    nv = model.nv
    ext, qe, (de, ve), G = extended_state(model, q, (dv, v_plus + e * v_minus), be)   # mimic: chain rule
    w = world_pass(ext, qe, be.zeros(ext.nv, 1), de, be, gravity=False, coriolis=False)
    ev = cset.evaluate(model, q, be.zeros(nv, 1), be=be, jacobian=False, drift=False)
    F = world_forces(ext, w, cset.body_forces(ext, ev, P, be), be)
    (dtau_dq,) = chain(G, tau_partials(ext, w, F, be, want_v=False)[0], left=True)
    wv = world_pass(ext, qe, ve, be.zeros(ext.nv, 1), be, gravity=False, coriolis=False)
    (dc_dq,) = chain(G, constraint_partials(ext, cset, wv, be, velocity=True)[0])
    be.mark("partials", dtau_dq, dc_dq)

    Qn, QnT, P_ = dual_products(inverse, Sn, be)       # -S_K J M^-1, its transpose, M^-1 - (J M^-1)^T S_K J M^-1
    EJ = (1.0 + e) * J
    m = cset.m
    dvplus_dq = be.product(be.zeros(nv, nv), [(1.0, QnT, dc_dq), (-1.0, P_, dtau_dq)])
    dvplus_dv = be.product(be.eye(nv), [(1.0, QnT, EJ)])
    dP_dq = be.product(be.zeros(m, nv), [(1.0, Sn, dc_dq), (-1.0, Qn, dtau_dq)])
    dP_dv = be.product(be.zeros(m, nv), [(1.0, Sn, EJ)])
    be.mark("kkt", dvplus_dq, dvplus_dv, dP_dq, dP_dv)
    return dvplus_dq, dvplus_dv, dP_dq, dP_dv, v_plus, P


# --- registry helpers ------------------------------------------------------------------

def impulse_derivatives_outputs(model: Model, cset) -> list[tuple[str, int, int]]:
    m, nv = as_constraint_set(model, cset).m, model.nv
    return [("dvplus_dq", nv, nv), ("dvplus_dv", nv, nv), ("dimpulse_dq", m, nv), ("dimpulse_dv", m, nv),
            ("v_plus", nv, 1), ("impulse", m, 1)]


def pinocchio_impulse_derivatives(pin, pm, pd, q, v_minus, *, cset, options):
    """``impulseDynamics`` (one exact solve at damping EXACT_DERIVATIVE_MU), then
    ``computeImpulseDynamicsDerivatives``; its ``ddq_dv`` is ``dv+/dv- - I``; the values are
    the ``data.dq_after`` and ``data.impulse_c`` ``impulseDynamics`` leaves."""
    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    e = float(options.get("restitution", 0.0))
    settings = pin.ProximalSettings(0.0, EXACT_DERIVATIVE_MU, 1)
    pin.impulseDynamics(pm, pd, q, v_minus, cms, cds, e, settings)
    pin.computeImpulseDynamicsDerivatives(pm, pd, cms, cds, e, settings)
    return (np.array(pd.ddq_dq), np.array(pd.ddq_dv) + np.eye(pm.nv), np.array(pd.dlambda_dq),
            np.array(pd.dlambda_dv), np.array(pd.dq_after), np.array(pd.impulse_c))
