"""Partial derivatives of forward dynamics, ``(dddq/dq, dddq/dv, M^-1)`` at ``(q, v, tau)``.

Carpentier & Mansard, RSS 2018, §IV (Pinocchio's ``computeABADerivatives``): since
``rnea(q, v, aba(q, v, tau)) = tau`` for all arguments, differentiating gives
``M dddq/dx + dtau/dx |_(a = ddq) = 0`` for x in (q, v) and ``dddq/dtau = M^-1``, so::

    ddq      = aba(q, v, tau)                          (Featherstone 2008 Table 7.1)
    dtau/dq, dtau/dv at a = ddq                        (rnea_derivatives, RSS 2018 Alg. 1)
    M^-1                                               (minv, RSS 2018 §IV)
    dddq/dq = -M^-1 dtau/dq,   dddq/dv = -M^-1 dtau/dv

With mimic joints ``aba`` and ``minv`` are the dense solve of ``M`` and the RNEA partials
are taken on the extended tree (:func:`~gen.algorithms.rnea_derivatives.tau_derivatives`).
``dddq/dq`` is in the tangent space (``q + delta = integrate(q, delta)``), Pinocchio's.
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq_dq, ddq_dv, Minv (nv,nv).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from .aba import aba
from .minv import minv
from .proximal import Unmarked
from .rnea_derivatives import tau_derivatives


def aba_derivatives(model: Model, q, v, tau, *, be):
    sub = Unmarked(be)
    (ddq,) = aba(model, q, v, tau, be=sub)
    (Minv,) = minv(model, q, be=sub)
    be.mark("aba_minv", ddq, Minv)
    dq, dv, _ = tau_derivatives(model, q, v, ddq, sub)
    be.mark("rnea_derivatives", dq, dv)
    out = -(Minv @ dq), -(Minv @ dv)
    be.mark("product", *out)
    return out[0], out[1], Minv


def pinocchio_aba_derivatives(pin, pm, pd, q, v, tau, **_):
    """Pinocchio's ``computeABADerivatives``; its Minv has the upper triangle only."""
    dq, dv, Minv = pin.computeABADerivatives(pm, pd, q, v, tau)
    Minv = np.array(Minv)
    return np.array(dq), np.array(dv), np.triu(Minv) + np.triu(Minv, 1).T
