"""Partial derivatives of inverse dynamics, ``(dtau/dq, dtau/dv, M)`` at ``(q, v, a)``,
and the value ``tau`` they are taken at.

Carpentier & Mansard, "Analytical Derivatives of Rigid Body Dynamics Algorithms", RSS
2018, Algorithm 1 (Pinocchio's ``computeRNEADerivatives``): one forward pass in world
(or, on a free-flyer, base) coordinates (placements, subspaces ``J_i = oMi S_i``,
velocities, accelerations with ``a_0 = -g``, inertias, forces, the 3 x 3 blocks ``P_i``
that with the momenta give the body Coriolis matrices ``B_i``, and the per-joint partials
``dVdq``, ``dAdq``, ``dAdv``), a backward pass of subtree sums (``Ycrb``, momenta, ``P``,
``F``), per-joint vectors and dot products for every pair (ancestor, descendant)
(:mod:`gen.algorithms.world`; the pair organisation of IDSVA, Singh, Russell & Wensing,
RA-L 2022).  ``dtau/dq`` is in the tangent space (``q + delta = integrate(q, delta)``),
so it is Pinocchio's matrix; ``dtau/dv`` is also the Coriolis-related matrix; ``M`` is
``dtau/da`` (full, symmetric, the world-frame CRBA ``M_ij = J_i^T Ycrb_i J_j``).
The value ``tau = rnea(q, v, a)`` is ``tau_i = J_i^T F_i`` of the pass's subtree forces
(:func:`~gen.algorithms.world.bias_torques`, RNEA's backward pass in world coordinates;
the forces are the ones the partials sum, so it costs the nv projections only), what
Pinocchio's ``computeRNEADerivatives`` leaves in ``data.tau``: one kernel gives an
optimal-control node its value and derivatives.
Mimic joints (Pinocchio's derivatives refuse them): the same algorithm on the extended
tree, projected by the constant mimic map (:func:`tau_derivatives`).
Shapes: q (nq,1), v (nv,1), a (nv,1) -> dtau_dq, dtau_dv, M (nv,nv), tau (nv,1).
"""
from __future__ import annotations

import numpy as np

from ..kinematics import chain, extended_state
from ..model import Model
from .world import bias_torques, tau_partials, world_pass


def rnea_derivatives(model: Model, q, v, a, *, be):
    return tau_derivatives(model, q, v, a, be, want_M=True, want_tau=True)


def tau_derivatives(model: Model, q, v, a, be, want_M=False, want_tau=False):
    """``(dtau/dq, dtau/dv, M or None, tau or None)``.  With mimic joints: on the extended
    tree (:func:`~gen.kinematics.mimic_extension`), ``X = G^T X_ext G`` for each matrix and
    ``tau = G^T tau_ext``, since ``tau(q, v, a) = G^T tau_ext(q_ext(q), G v, G a)`` and
    ``d q_ext / d q = G``."""
    ext, qe, (ve, ae), G = extended_state(model, q, (v, a), be)
    if G is not None:
        *parts, tau = tau_derivatives(ext, qe, ve, ae, be, want_M, want_tau)
        out = (*chain(G, *parts, left=True), None if tau is None else G.T @ tau)
        be.mark("mimic_projection", *(X for X in out if X is not None))
        return out
    w = world_pass(model, q, v, a, be)
    be.mark("forward", *w.of, *(w.P or []))
    dq, dv, M = tau_partials(model, w, w.of, be, want_M=want_M)
    tau = bias_torques(model, w, be) if want_tau else None
    be.mark("backward", *(X for X in (dq, dv, M, tau) if X is not None))
    return dq, dv, M, tau


def pinocchio_rnea_derivatives(pin, pm, pd, q, v, a, **_):
    """Pinocchio's ``computeRNEADerivatives`` (its M has the upper triangle only) and the
    ``data.tau`` it computes on the way."""
    dq, dv, M = pin.computeRNEADerivatives(pm, pd, q, v, a)
    M = np.array(M)
    return np.array(dq), np.array(dv), np.triu(M) + np.triu(M, 1).T, np.array(pd.tau)
