"""The record types of the algorithm registry and the one option checker.

A registry row (:class:`Algorithm`) holds every per-algorithm fact the rest of rbdgen
needs: the function (written once over the backend), its inputs and outputs with shapes
and one-line docs, its family, its options with their validation, its Pinocchio
reference, its generic-C entry, the verification tolerance floor with its reason, its
benchmark peer and the committed reports that include it.  Tracing, op counting,
emission, building, verification, benchmarking, the suites, the scaling study, the CLI
and the tests read these rows; no other module keeps a list of algorithm names.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..constraint_spec import as_constraint_set, parse_constraints
from ..constraints import ConstraintSet
from ..errors import RbdgenError
from ..model import Model

#: families; the constrained ones need a constraint set
FAMILIES = {"dynamics": False, "factorisation": False, "solver": True, "delassus": True, "event": True}

#: the committed reports an algorithm can belong to (``reports`` of a row)
REPORTS = {"opcount": "opcount/reports/<robot>: op counts per named robot (unconstrained)",
           "opcount-constrained": "opcount/reports/constrained: K = 1, 3 on the named constraint sets",
           "suite": "bench/reports/*-suite: every named robot, specialised vs generic vs Pinocchio",
           "suite-constrained": "bench/reports/*-constrained: the named constraint sets",
           "scaling": "bench/reports/scaling: chains and binary trees (Sathya 2024 Fig. 3)",
           "callgrind": "bench/reports/*-callgrind: instructions per call",
           "derivatives": "opcount/reports/derivatives.md (analytical vs AD) and bench/reports/*-derivatives "
                          "(specialised vs Pinocchio and the generic C)",
           "golden": "generated/: the committed C of ur5, solo12 and talos (tests/test_golden.py)"}

#: one-line docs of the input and output names shared by several rows (a row's
#: ``docs`` override them)
COMMON_DOCS = {"q": "configuration", "v": "joint velocity", "a": "joint acceleration",
               "tau": "joint torque",
               "v_minus": "joint velocity before the impact", "v_plus": "joint velocity after the impact", "b": "right-hand side", "ddq": "joint acceleration",
               "M": "joint-space inertia matrix (full, symmetric)",
               "lam": "constraint forces (local frames, M ddq + b = tau + J^T lam)",
               "iterations": "proximal iterations performed",
               "mu": "proximal damping, Pinocchio's sense (run-time parameter; rho = mu / weight per row)",
               "gains": "Baumgarte gains [Kp, Kd, Kv] of the constraint set (run-time parameters)",
               "weights": "constraint weights, one per constraint: damping mu / weight on its rows (run-time)",
               "residual": "|J ddq - a_c*|_inf of the result"}


# --- options -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    """A keyword option: ``kind`` int or float, the closed (or, with ``open_low``, open
    at ``low``) range ``[low, high]``, ``default`` (None: absent), a one-line doc; or,
    with ``choices``, ``kind`` str and one of ``choices``; or ``kind`` bool (a switch)."""

    name: str
    kind: type
    default: object
    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    doc: str = ""
    floor: str = ""          # why values below ``low`` are refused (an accuracy floor), if so
    choices: tuple[str, ...] = ()

    def check(self, algorithm: str, value, spelled: str | None = None):
        """``value`` converted to ``kind``, or an :class:`RbdgenError` naming the option
        (as ``spelled``, default its name)."""
        what = f"{algorithm}: option {spelled or self.name}={value!r}"
        if self.choices:
            if not isinstance(value, str) or value not in self.choices:
                raise RbdgenError(f"{what} is not one of {', '.join(self.choices)}")
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise RbdgenError(f"{what} must be True or False")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise RbdgenError(f"{what} is not a number")
        x = float(value)
        if not math.isfinite(x):
            raise RbdgenError(f"{what} must be finite")
        if self.kind is int:
            if x != int(x):
                raise RbdgenError(f"{what} must be an integer")
            x = int(x)
        below = x <= self.low if self.open_low else x < self.low
        if below and self.floor and x > 0:
            raise RbdgenError(f"{what} is below the accuracy floor {self.low:g} of {algorithm}: {self.floor}")
        if below or x > self.high:
            lo = "(" if self.open_low else "["
            hi = "inf)" if self.high == math.inf else f"{self.high:g}]"
            raise RbdgenError(f"{what} is outside {lo}{self.low:g}, {hi}")
        return x


ITERATIONS = Option("iterations", int, 3, 1, doc="fixed number of proximal iterations")
MU = Option("mu", float, 1e-6, 0.0, open_low=True,
            doc="proximal damping in Pinocchio's sense (Sathya 2024's penalty is 1/mu; docs/ARCHITECTURE.md)")
#: the accuracy floor of the augmented-Lagrangian formulations (prox_ltls, constrained_aba,
#: impulse, caba_osim[f]): ``J^T J / mu`` enters the inertia, so rounding in the directions
#: the constraints leave free grows like ``c eps / mu`` (c = |J|^2 / lambda_min(M), up to ~100
#: on the named robots: icub's light legs); at 1e-6 that is ~2e-8 relative, below it the
#: result is wrong while the iteration reports a tiny residual (issue 12: solo12 at 1e-9,
#: 1e-12, 1e-15 gives 2e-5, 3e-2, 4 relative).  Measured in tests/test_convergence.py.
ALM_MU_FLOOR = 1e-6
ALM_MU = Option("mu", float, 1e-6, ALM_MU_FLOOR,
                doc="proximal damping in Pinocchio's sense (Sathya 2024's penalty is 1/mu); >= "
                    f"{ALM_MU_FLOOR:g}, the augmented-Lagrangian accuracy floor",
                floor="1/mu enters the inertia and rounding grows like eps/mu (docs/ARCHITECTURE.md)")
TOL = Option("tol", float, None, 0.0, doc="early exit once the true constraint residual is <= tol")
MAX_ITER = Option("max_iter", int, None, 1, doc="iteration cap with tol")
RESTITUTION = Option("restitution", float, 0.0, 0.0, 1.0, doc="coefficient of restitution e (0: plastic)")
#: the run-time parameters of a constrained solver (issue 14 §5): with the option on, the
#: row's ``runtime`` values (names below) are traced as symbolic inputs after its own and
#: the C takes them per call instead of folding them into the graph as constants
RUNTIME_PARAMS = Option("runtime_params", bool, False,
                        doc="take mu, the Baumgarte gains and the weights as inputs instead of building them in")
#: run-time parameter -> its input size for a constraint set: ``mu`` (Pinocchio's damping),
#: ``gains`` = [Kp, Kd, Kv] (the set's Baumgarte gains as
#: :class:`gen.constraints.ConstraintSet` stores them) and ``weights`` (one per constraint;
#: rho = mu / weight on its rows), in this order
RUNTIME_INPUTS = {"mu": lambda cset: 1, "gains": lambda cset: 3, "weights": len}
PROXIMAL = (ITERATIONS, MU, TOL, MAX_ITER, RUNTIME_PARAMS)          # the dual formulations
PROXIMAL_ALM = (ITERATIONS, ALM_MU, TOL, MAX_ITER, RUNTIME_PARAMS)  # the augmented-Lagrangian ones
#: the derivative rows' route (issue 13 §2): the analytical algorithm (the row's ``fn``)
#: or automatic differentiation of its value algorithm (:class:`ADRoute`); absent, the
#: trace takes the one of lower estimated cost (gen.trace.estimated_cost)
ROUTES = ("analytical", "ad")
ROUTE = Option("route", str, None, choices=ROUTES,
               doc="analytical | ad (default: the one of lower estimated cost, decided when tracing)")
#: options that select the traced graph and are not passed to the row's ``fn``
TRACE_OPTIONS = frozenset({"route"})


@dataclass(frozen=True)
class ADRoute:
    """The automatic-differentiation route of a derivative row: CasADi's symbolic
    Jacobian of the traced graph of the value algorithm ``value`` (its first ``outputs``
    outputs) with respect to each of its inputs, the q-columns composed with the tangent
    map of :func:`gen.configuration.tangent_map` (Pinocchio's ``q + d = integrate(q, d)``).
    The row's outputs are, per value output, the Jacobians in input order, then the value
    outputs themselves (the value the derivatives are taken at, as on the analytical route).  Taken by
    :func:`gen.trace.trace` (algorithms never import casadi).

    ``hessian``: instead, the row's last input is a multiplier ``lam`` on the value's
    first output ``y`` (``outputs`` = 1) and the route is CasADi's Hessian (reverse-mode
    gradient, then its Jacobian: forward over reverse) of ``lam^T y`` in the chart
    ``integrate(q, d)``: the row's outputs are the Hessian blocks ``(q, q)`` (symmetric),
    ``(q, v)``, ``(v, v)``, ``(q, x)`` of the inputs ``(q, v, x)``, the gradient ``(q, v,
    x)``, then ``y`` (:func:`gen.trace.trace_ad_hessian`).  A Hessian route is traced only
    when ``route="ad"`` is asked for: the analytical route is the default without comparing
    (forward over reverse takes minutes to trace on a humanoid, talos 2.4 min alone and 9.5
    on a loaded machine, and costs 3.4-7.6x the analytical operations on every robot
    measured, opcount/reports/derivatives.md)."""

    value: str
    outputs: int
    hessian: bool = False


# --- references, generic C, tolerances ----------------------------------------------------

@dataclass(frozen=True)
class PinocchioRef:
    """Pinocchio's counterpart: ``fn(pin, pm, pd, *inputs, cset=None, options=None)``
    returns rbdgen's outputs (vectors 1-D, matrices 2-D, a tuple for several; for a
    solver its leading outputs).  ``fn`` receives the ``pinocchio`` module: rows never
    import it.  Where the reference exists (:func:`gen.pinref.supports`):
    ``depth_first`` -- Pinocchio needs every subtree numbered contiguously;
    ``joint1_only`` -- it reads only joint1's side of a constraint (none when frame A
    is on the world); ``unit_weights`` -- it has no per-constraint weights;
    ``iterate`` -- it is the K-th proximal iterate (a tolerance-driven run has none);
    ``converged`` -- it is a converged solution: NumPy runs with these options;
    ``mimic`` -- it applies to models with mimic joints (Pinocchio's JointModelMimic);
    ``anchored_only`` -- it is wrong on a loop between two moving bodies (pin 4.1's
    ``impulseDynamics`` returns a v+ violating its own ``J v+ = 0`` there,
    tests/test_loops.py);
    ``full_rank`` -- it is an exact solve with ``J M^-1 J^T``, defined only where J has
    full row rank (a redundant set, a frame constrained twice, has none)."""

    fn: Callable
    call: str
    depth_first: bool = True
    mimic: bool = False
    joint1_only: bool = False
    unit_weights: bool = False
    iterate: bool = False
    converged: dict | None = None
    anchored_only: bool = False
    full_rank: bool = False


#: the generic C's header, whose ``rbg_algo`` enum numbers the algorithms
GENERIC_HEADER = Path(__file__).resolve().parents[1] / "generic" / "rbg.h"


@functools.lru_cache(maxsize=1)
def generic_algo_ids() -> dict[str, int]:
    """``{"RBG_ALGO_<NAME>": value}``: the ``rbg_algo`` enum as ``rbg.h`` declares it
    (one source for the ids, read by the binding and the serialiser)."""
    text = GENERIC_HEADER.read_text()
    enum = text[text.index("typedef enum rbg_algo"):]
    enum = enum[:enum.index("}")]
    return {name: int(value) for name, value in re.findall(r"(RBG_ALGO_\w+)\s*=\s*(\d+)", enum)}


@dataclass(frozen=True)
class GenericC:
    """The hand-written generic C (``gen/generic``): ``entry`` the C function
    ``rbg_<name>``, whose ``rbg_algo`` id is ``RBG_ALGO_<NAME>`` of ``rbg.h``;
    ``work(nbodies, nv, m)`` its workspace in doubles (the ``RBG_WORK_*`` macro of
    ``rbg.h``; tests/test_generic*.py compare the two); ``anchored_only``: its articulated sweeps take
    constraints relative to the world only (a loop between two moving bodies is refused,
    ``RBG_ERR_LOOP``; the specialised kernel closes it)."""

    entry: str
    work: Callable[[int, int, int], int]
    anchored_only: bool = False

    @property
    def algo_id(self) -> int:
        """The ``rbg_algo`` value of :attr:`entry` in ``rbg.h``."""
        name = "RBG_ALGO_" + self.entry.removeprefix("rbg_").upper()
        ids = generic_algo_ids()
        if name not in ids:
            raise ValueError(f"{self.entry}: rbg.h's rbg_algo enum has no {name}")
        return ids[name]


@dataclass(frozen=True)
class Floor:
    """Verification tolerance floors (relative) and why (:mod:`gen.verify`): ``c_numpy``
    for compiled C vs NumPy, ``pinocchio`` against Pinocchio; ``kappa``: the matrix the
    formulation factorises, whose condition number kappa (computed at every state
    compared) amplifies rounding — ``"augmented"`` (``|M + J^T Rho^-1 J| |M^-1|``, the
    augmented-Lagrangian rows, :func:`gen.conditioning.augmented_condition`) or ``"delassus"`` (``J M^-1 J^T + Rho``, the KKT
    derivatives); every tolerance is then at least ``slack eps kappa``.  The tolerance
    applied is the largest of ``rtol`` and these floors."""

    c_numpy: float = 0.0
    pinocchio: float = 0.0
    reason: str = "exact algorithm: rounding only"
    kappa: str | None = None
    slack: float = 1.0


#: rounding of a solve with condition number kappa, relative: measured up to 33 eps kappa
#: (impulse_derivatives, talos' soles constrained twice, kappa 2.5e8: C vs NumPy 1.8e-6;
#: constrained_derivatives there 1.5 eps kappa, 8.7e-8; ur5 tool0 3D twice 6.5)
CONDITION_SLACK = 100.0


#: the augmented Lagrangian's normwise bound eps |M + J^T Rho^-1 J| |M^-1| of a backward-stable
#: solve; measured 1e-3 to 1.2e-2 of it on solo12's four feet (kappa 5e9, with and without
#: FMA), ~2e-5 of it on talos' soles
ALM_FLOOR = Floor(reason="augmented Lagrangian: 1/mu enters the inertia, rounding grows with "
                         "|M + J^T Rho^-1 J| |M^-1| (~|J|^2 / (mu lambda_min(M)))", kappa="augmented")
KKT_FLOOR = Floor(reason="implicit differentiation through the damped Delassus matrix: rounding grows with "
                         "its condition number", kappa="delassus", slack=CONDITION_SLACK)
OSIM_FLOOR = Floor(reason="the inverse of the damped Delassus matrix: rounding grows with its condition number",
                   kappa="delassus", slack=CONDITION_SLACK)


@dataclass(frozen=True)
class Jacobian:
    """Where a row's first derivatives come from: the derivative row ``row`` evaluated on
    this row's inputs (followed by zeros for any further input of ``row``, e.g. ``a = 0``
    for ``nle`` from ``rnea_derivatives``) and this row's options that ``row`` also takes;
    ``blocks`` maps an output to the names of ``row``'s outputs holding its derivative with
    respect to each input, in input order (w.r.t. q in the tangent space).  Outputs not
    in ``blocks`` (``iterations``, ``residual``) are diagnostics without derivatives.
    Used by :func:`gen.casadi_api.casadi_external`."""

    row: str
    blocks: dict


# --- the row ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Algorithm:
    """One registry row; see the module docstring."""

    name: str
    fn: Callable                 # fn(model, *inputs, be[, cset], **options) -> tuple of 2-D outputs
    inputs: Callable             # (model, cset) -> [(name, rows)]
    outputs: Callable            # (model, cset) -> [(name, rows, cols)]
    family: str
    summary: str
    source: str
    docs: dict = field(default_factory=dict)
    options: tuple[Option, ...] = ()
    pinocchio: PinocchioRef | None = None
    generic: GenericC | None = None
    generic_note: str = ""       # why there is no generic C (with generic None)
    floor: Floor = Floor()
    pin_peer: str | None = None  # the Pinocchio shim function timed against it (gen/bench/pin_shim.cpp)
    mujoco_peer: str | None = None  # the MuJoCo call sequence timed against it (gen.bench.mujoco_peer.CALLS)
    mujoco_ref: str | None = None   # MuJoCo's computation of its value, MJCF models (gen.mujocoref.REFERENCES)
    adam_peer: str | None = None    # ADAM's quantity timed against it (gen.bench.peers.adam)
    #: the speed target against its Pinocchio peer in its reports (Pinocchio's median over ours)
    pin_target: float | None = None
    reports: frozenset = frozenset()
    jacobian: Jacobian | None = None  # its derivative row (gen.casadi_api.casadi_external)
    ad: ADRoute | None = None    # the AD route (a derivative row; its options include ROUTE)
    #: (model, cset) -> why the row does not apply to them (a one-line message naming the
    #: row), or None: what ``-a all`` leaves out and the generic C refuses
    refuses: Callable | None = None
    runtime: tuple[str, ...] = ()  # its run-time parameters (RUNTIME_INPUTS order) under RUNTIME_PARAMS

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: unknown family {self.family}")
        if not set(self.reports) <= set(REPORTS):
            raise ValueError(f"{self.name}: unknown reports {set(self.reports) - set(REPORTS)}")
        if self.generic is None and not self.generic_note:
            raise ValueError(f"{self.name}: no generic C and no note saying why")
        if (self.ad is not None) != (ROUTE in self.options):
            raise ValueError(f"{self.name}: the route option goes with an AD route, and only with one")
        if bool(self.runtime) != (RUNTIME_PARAMS in self.options) or \
                list(self.runtime) != [n for n in RUNTIME_INPUTS if n in self.runtime]:
            raise ValueError(f"{self.name}: the runtime_params option goes with run-time parameters, and only with them")

    @property
    def constrained(self) -> bool:
        return FAMILIES[self.family]

    @property
    def scalar_option(self) -> str | None:
        """The option its generic C takes as a plain argument after the options struct (the
        impact map's ``restitution``, a damped Delassus inverse's ``mu``), or None."""
        if self.generic is None:
            return None
        names = {o.name for o in self.options}
        return "restitution" if "restitution" in names else "mu" if "mu" in names and not self.iterative else None

    @property
    def iterative(self) -> bool:
        return any(o.name == "tol" for o in self.options)

    def input_spec(self, model: Model, cset, options: dict) -> list[tuple[str, int]]:
        """``(name, size)`` of the inputs a kernel with ``options`` takes: the row's
        inputs, then, with ``runtime_params``, its run-time parameters (:attr:`runtime`:
        ``mu``, ``gains``, ``weights``; :data:`RUNTIME_INPUTS`)."""
        if not options.get("runtime_params"):
            return self.inputs(model, cset)
        cset = as_constraint_set(model, cset)
        return self.inputs(model, cset) + [(n, RUNTIME_INPUTS[n](cset)) for n in self.runtime]

    def doc(self, name: str) -> str:
        """The one-line doc of input or output ``name``."""
        return self.docs.get(name, COMMON_DOCS.get(name, ""))

    def check_options(self, options: dict, spell: Callable[[str], str] = str) -> dict:
        """The one option checker (API, CLI, emission, driver): every option known to
        this row and in range, converted; an unknown one is an error listing the valid
        options.  ``spell`` writes an option's name in messages (the CLI: ``--max-iter``)."""
        known = {o.name: o for o in self.options}
        unknown = [k for k in options if k not in known]
        if unknown:
            valid = ", ".join(map(spell, known)) or "none"
            raise RbdgenError(f"{self.name} has no option {', '.join(map(spell, unknown))} (options: {valid})")
        return {k: (None if v is None else known[k].check(self.name, v, spell(k))) for k, v in options.items()}

    def fn_options(self, options: dict) -> dict:
        """``options`` without those that select the traced graph (:data:`TRACE_OPTIONS`):
        what ``fn`` takes; ``runtime_params`` on becomes the names of the row's run-time
        inputs (:attr:`runtime`), which its inputs end with."""
        out = {k: v for k, v in options.items() if k not in TRACE_OPTIONS}
        if out.get("runtime_params"):
            out["runtime_params"] = self.runtime
        return out

    def constraint_set(self, model: Model, constraints) -> ConstraintSet | None:
        """The one constraint resolution: a spec string or a parsed set for a constrained
        row (required), None for the others (constraints given to them are an error)."""
        if constraints is None or constraints == "":
            if self.constrained:
                raise RbdgenError(f"{self.name} is a constrained algorithm: give constraints, "
                                  f"e.g. '6D:FRAME' or '3D:FRAME_A,3D:FRAME_B'")
            return None
        if not self.constrained:
            raise RbdgenError(f"{self.name} takes no constraints (got '{constraints}')")
        if isinstance(constraints, str):
            return parse_constraints(model, constraints)
        return constraints
