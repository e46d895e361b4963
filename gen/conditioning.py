"""Condition numbers of what a formulation factorises, and the rounding floors they set
(the registry rows' :class:`~gen.algorithms.registry.Floor`): read by verification
(:mod:`gen.verify`, tolerances) and by the automatic choice (:mod:`gen.choose`, which
excludes a formulation whose floor exceeds the requested ``tol``)."""
from __future__ import annotations

import numpy as np

from .algorithms import ALGORITHMS
from .algorithms.proximal import default_mu
from .api import run
from .backend import NUMPY

EPS = float(np.finfo(float).eps)


def damped_condition(model, cset, q, mu: float) -> float:
    """Condition number of the damped Delassus matrix ``J M^-1 J^T + Rho`` at ``q``
    (``Rho = diag(mu / w)``, :meth:`~gen.constraints.ConstraintSet.damping`; ~lambda_max / mu
    on a redundant set)."""
    lam = np.linalg.eigvalsh(run(model, "delassus", q, constraints=cset) + np.diag(cset.damping(mu)))
    return float(lam[-1] / lam[0])


def augmented_condition(model, cset, q, mu: float) -> float:
    """The augmented Lagrangian's rounding amplification ``|M_mu| |M^-1|`` at ``q``,
    ``M_mu = M + J^T Rho^-1 J`` (Sathya 2024 eq. 16a with Pinocchio's damping
    ``Rho = diag(mu / w)``): the factorised matrix's entries are ~1/mu, so its rounding
    ``eps |M_mu|`` acts on the dynamics equation, whose solution responds through ``M^-1``.
    It is kappa(M_mu) where the constraints leave free directions (their eigenvalues are
    M's) and stays ~|J|^2 / (mu lambda_min(M)) where they leave none (ur5 6D:tool0: kappa(M_mu)
    2.8e5, the impact map 4.5e-8 from Pinocchio's exact solve, this 1e9)."""
    M = run(model, "crba", q)
    J = cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)
    top = np.linalg.eigvalsh(M + J.T @ np.diag(1.0 / cset.damping(mu)) @ J)[-1]
    return float(top / np.linalg.eigvalsh(M)[0])


CONDITION = {"augmented": augmented_condition, "delassus": damped_condition}


def kernel_mu(algorithm, options: dict) -> float:
    """The damping ``mu`` a kernel of ``algorithm`` with ``options`` runs at: the option,
    else the row's default for its mode (a run with ``tol`` uses the solver's converged
    default, :func:`gen.algorithms.proximal.default_mu`)."""
    if options.get("mu") is not None:
        return float(options["mu"])
    own = next((o.default for o in algorithm.options if o.name == "mu"), None)
    solver = getattr(algorithm.fn, "converged_mu", None)
    if solver is not None:
        return default_mu(None, options.get("tol"), solver)
    return float(own) if own is not None else default_mu(None, None)


def floor_at(name: str, model, cset, q, mu: float) -> float:
    """The conditioned floor ``slack eps kappa`` of ``name``'s row at ``q`` and damping
    ``mu`` (0.0 for a row without one): what two correct computations may differ by."""
    f = ALGORITHMS[name].floor
    if not f.kappa or cset is None or not cset.m:
        return 0.0
    return f.slack * EPS * CONDITION[f.kappa](model, cset, q, mu)


