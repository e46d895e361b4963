"""Pinocchio as a benchmark peer: its C++ API called through the shim
(:mod:`gen.bench.pinshim`; the model handed over as the Boost text archive of the
``pin.Model`` built in Python), timed as the API call alone (results stay in
``pinocchio::Data``; its CRBA fills the upper triangle).

Each registry row names the shim function timed against it (``pin_peer``; ``--pin-peer``
overrides).  Constrained rows: Pinocchio 4.1's ``constrainedABA`` and ``pv`` do not
compile (see pin_shim.cpp), so every proximal solver is timed against
``constraintDynamics``, whose iterates equal rbdgen's (solo12 3D feet 1.5e-14, ur5 6D
tool0 5.8e-12 relative at 3 iterations).  ``--pin-peer lcaba`` / ``contact_aba`` time
Pinocchio's maximal-coordinate solvers, but their conventions differ (lcaba: agrees to
~2e-6 on 3D contacts, not on 6D; contactABA: its ``mu`` and force conventions do not
reproduce rbdgen's), so the agreement check usually refuses them unless ``check=False`` /
``--no-check``.  The damped Delassus inverses are timed against
``computeDampedDelassusMatrixInverse`` (PV-OSIMr, the same inversion lemma as cABA-OSIM in
Pinocchio's frame form), at the kernel's mu and unit weights; below mu = 1e-4 its own
rounding (~eps / mu) exceeds the cross-check's tolerance (:data:`DELASSUS_MU`).

The impact map is timed against ``impulseDynamics``, which performs ONE damped solve of
the KKT system (``[[-mu, J], [J^T, M]] [-impulse; v+ - v-] = [-(1 + e) J v-; 0]``): that
is rbdgen's first proximal iterate from ``lam_0 = 0`` at the same mu (Sathya 2024 eq. 27b
with ``k = -(1 + e) J v-``), not its K-th.  So the peer runs only where the two compute
the same thing (:func:`impulse_peer_settings`): a kernel of exactly one iteration
(Pinocchio at the kernel's mu), or a tolerance-driven kernel, i.e. the converged map
(Pinocchio at damping :data:`IMPULSE_EXACT_MU`, an exact solve); a fixed K > 1 has no
Pinocchio counterpart and the peer is skipped with that reason (measured at mu = 1e-4,
impulses relative: K = 1 agrees to 2e-11 on solo12's feet and 3e-12 on talos's soles,
K = 3 differs by 1e-4 and 5e-3; converged, 1e-10).

The derivative rows are timed against Pinocchio's analytical derivatives as a user calls
them: ``computeRNEADerivatives``, ``computeABADerivatives``, ``constraintDynamics`` +
``computeConstraintDynamicsDerivatives`` (the forward solve the derivatives are taken at,
then the derivatives, timed together as rbdgen's kernel computes both) and
``impulseDynamics`` + ``computeImpulseDynamicsDerivatives`` (one damped solve, as above)."""
from __future__ import annotations

from ... import pinref
from ...algorithms.proximal import DEFAULT_ITERATIONS, DEFAULT_MU
from ...errors import RbdgenError
from .. import pinshim
from .base import Bench, Plan, c_float

CONSTRAINED_PEERS = ("constraint_dynamics", "contact_aba", "lcaba", "delassus_inv", "impulse_dynamics",
                     "constraint_dynamics_derivatives", "impulse_dynamics_derivatives")
#: constrained peers that run proximal iterations (their count is reported)
ITERATIVE_PEERS = ("constraint_dynamics", "contact_aba", "lcaba", "constraint_dynamics_derivatives")
IMPULSE_PEERS = ("impulse_dynamics", "impulse_dynamics_derivatives")
#: outputs a Pinocchio peer computes differently, so only its other outputs are checked:
#: pin 4.1's contactABA (its constrainedABA) leaves in ``contact_force`` the penalty-scaled
#: multiplier of its own update order, not the constraint force (its ddq agrees with
#: rbdgen's to the augmented Lagrangian's rounding)
NOT_COMPARED = {"contact_aba": ("lam",)}
#: Pinocchio's damped Delassus inverse has its own rounding below mu = 1e-4 (PV-OSIMr), so
#: the Delassus rows of the constrained suite run at this damping on every side
DELASSUS_MU = 1e-4
#: impulseDynamics' damping for the converged impact map (gen.pinref.EXACT_MU)
IMPULSE_EXACT_MU = 1e-12


def impulse_peer_settings(manifest: dict, options: dict) -> tuple[float | None, str | None]:
    """``(damping, None)`` for Pinocchio's ``impulseDynamics`` computing what the impulse
    kernel of ``manifest`` computes, or ``(None, reason)`` (module docstring): one
    iteration = its single damped solve at the same mu; a tolerance = the converged map,
    an exact solve at :data:`IMPULSE_EXACT_MU`."""
    if manifest.get("tolerance") is not None:
        return IMPULSE_EXACT_MU, None
    # the impact map's iteration count is its traced `iterations` output; its derivative
    # row has none, its `iterations` option is the count
    iterations = manifest.get("iterations") or options.get("iterations", DEFAULT_ITERATIONS)
    if iterations == 1:
        return float(options.get("mu", DEFAULT_MU)), None
    return None, (f"Pinocchio's impulseDynamics performs one damped solve (rbdgen's first iterate), not "
                  f"{iterations} iterations: benchmark impulse with iterations=1 or a tolerance")


def unavailable(bench: Bench, peer: str | None) -> str | None:
    """Why Pinocchio's ``peer`` does not compute this row (None: it does); an unknown
    peer name is an error, not a skip."""
    algo = bench.algo
    if not pinref.available():
        return "pinocchio is not installed"
    try:
        pinshim.pin_prefix()          # headers, Eigen (cmeel-eigen), boost
    except RbdgenError as e:
        return str(e)
    if peer is None:
        return f"no Pinocchio peer for {algo.name}"
    if peer not in pinshim.FUNCTION_PART:
        raise RbdgenError(f"unknown Pinocchio peer '{peer}' (choose from {', '.join(pinshim.FUNCTION_PART)})")
    if algo.constrained != (peer in CONSTRAINED_PEERS):
        return f"Pinocchio's {peer} does not compute {algo.name}'s outputs"
    if not algo.constrained and not pinref.supports(bench.model, algo.name):
        if algo.pinocchio is None:
            return f"{algo.name} has no Pinocchio reference (registry) to hold {peer} to"
        if bench.model.has_mimic and not algo.pinocchio.mimic:
            return f"Pinocchio's {peer} does not handle mimic joints"
        return f"Pinocchio's {peer} needs depth-first joint numbering ({bench.model.name} is not)"
    if peer in IMPULSE_PEERS:
        return impulse_peer_settings(bench.manifest, bench.options)[1]
    return None


def _constrained_context(bench: Bench, peer: str) -> dict:
    """The shim's solver settings (the kernel's mu and iteration count, or one damped solve
    for the impact map) and the constraint set as Pinocchio's rigid constraint models."""
    man, options, cset = bench.manifest, bench.options, bench.cset
    iters = man.get("iterations") or options.get("max_iter") or options.get("iterations") or DEFAULT_ITERATIONS
    ctx = {"mu": c_float(options.get("mu", DEFAULT_MU)), "max_iter": int(iters),
           "accuracy": c_float(options.get("tol", 0.0)), "family": pinshim.CONSTRAINED_FAMILY[peer],
           "constraints": [{"type": t, "joint1": j1, "M1": [c_float(x) for x in M1], "joint2": j2,
                            "M2": [c_float(x) for x in M2], "kp": c_float(cset.gains(c)[0]),
                            "kd": c_float(cset.gains(c)[1])}
                           for c, (t, j1, M1, j2, M2) in enumerate(pinshim.constraint_rows(cset))]}
    if peer in IMPULSE_PEERS:                 # one damped solve (impulse_peer_settings)
        mu = impulse_peer_settings(man, options)[0]
        ctx.update({"mu": c_float(mu), "max_iter": 1, "restitution": c_float(options.get("restitution", 0.0))})
    return ctx


def plan(bench: Bench) -> Plan | str:
    peer = bench.pin_peer or bench.algo.pin_peer
    why = unavailable(bench, peer)
    if why:
        return why
    archive = pinshim.model_archive(pinshim.pin_model(bench.model))
    parts = ("core", pinshim.FUNCTION_PART[peer])
    shim = pinshim.build_shim(parts, progress=bench.progress)
    ctx = {"function": peer, "outputs": [{"name": y["name"]} for y in bench.outputs if y["compare"]],
           "constrained": bench.algo.constrained, "iterative": peer in ITERATIVE_PEERS, "constraints": [],
           "mu": "1e-6", "max_iter": 0, "accuracy": "0.0", "family": 0, "restitution": None}
    if bench.algo.constrained:
        ctx.update(_constrained_context(bench, peer))
    return Plan(impl={"name": "pinocchio", "key": "pin", "kind": "pin", "work_size": None, "colmajor": False},
                block="pin", context=ctx, shim=(shim, parts), args=[("model.txt", archive)],
                not_compared=NOT_COMPARED.get(peer, ()), report={"function": peer})
