"""Automatic choice among equivalent algorithms (issue 15 §4): ``-a auto`` and ``-a auto_osim``.

Two pseudo-algorithm names stand for a family of registry rows that compute the same
quantity by different formulations (:data:`AUTO`):

``auto``
    constrained forward dynamics ``(ddq, lam, iterations, residual)``: the iterative
    rows of family ``solver`` (``prox_ltl``, ``prox_ltls``, ``constrained_aba``,
    ``prox_pv``).  They return the same K-th proximal iterate (Pinocchio's
    ``constraintDynamics`` semantics), so for one option set only their cost differs.
``auto_osim``
    the damped Delassus inverse ``(J M^-1 J^T + R)^-1``: the ``delassus`` rows taking
    ``mu`` (``caba_osim``, ``caba_osimf``, ``ltl_osim``, ``kkt_osim``).

:func:`choose` traces every candidate with the same robot, constraint set and options
and counts its operations (:func:`opcount.count_trace`; with ``tol`` the early-exit
driver's worst case ``setup + max_iter step + finish``, as the manifest states it).
A candidate is *excluded*, with the reason recorded, when

* its option checker refuses the options: the accuracy floor of the
  augmented-Lagrangian rows (``prox_ltls``, ``constrained_aba``, ``caba_osim[f]``
  refuse ``mu`` below :data:`gen.algorithms.registry.ALM_MU_FLOOR`: ``J^T J / mu``
  enters the inertia and rounding grows like ``eps / mu``), or an option the row does
  not take;
* with ``tol``, its accuracy floor on this robot and constraint set exceeds ``tol``
  (:func:`floor_above_tol`: the row's conditioned floor, ``eps |M_mu| |M^-1|`` for the
  augmented-Lagrangian rows, the worst over :data:`FLOOR_STATES` seeded configurations):
  a converged run could not honour the tolerance it was asked for;
* its formulation does not cover the constraint set: ``caba_osim[f]`` refuse a loop
  between two moving bodies, ``caba_osimf`` a fixed base (any :class:`RbdgenError` while
  resolving the constraints or tracing).

Among the others the cheapest by the weighted cost :data:`WEIGHTS` wins (ties: registry
order).  The weights are reciprocal-throughput ratios on x86-64 cores of the kind this
project is measured on (Skylake/Zen class: two add/mul/FMA pipes retiring ~2 per cycle;
``divsd`` and ``sqrtsd`` one per 4-6 cycles, not pipelined; ``sin``/``cos`` a libm call of
~20-50 cycles), rounded: add, mul, neg, other 1; div 4; sqrt 4; trig 20.  The op counts
see neither memory traffic nor register spills, which is why the report
(``bench/reports/2026-11-25-auto-choice.md``) checks the choice against measured times.

The result (:class:`Choice`) is recorded in the build manifest (``"choice"``: the
chosen row, the weights and every candidate's counts, cost or exclusion reason).
:func:`run` is ``gen.run`` accepting the pseudo-names (same choice, cached per robot,
constraint spec, options); :func:`opcount` is ``gen.opcount`` likewise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from opcount import CLASSES, count_trace

# the module, not its function: ``import opcount.api`` first loads gen (opcount.api imports
# gen.api), whose gen.build imports this module while opcount.api is still half-loaded
from opcount import api as opcount_api

import numpy as np

from .algorithms import ALGORITHMS
from .api import get_algorithm
from .api import run as _run
from .conditioning import floor_at, kernel_mu
from .errors import RbdgenError
from .model import Model
from .robots import load_robot
from .trace import DriverTrace, trace, trace_driver

#: the cost of one operation of each op class (:data:`opcount.counter.CLASSES`), in
#: add-equivalents; see the module docstring for where they come from
WEIGHTS = {"add": 1, "mul": 1, "div": 4, "sqrt": 4, "trig": 20, "neg": 1, "other": 1}
#: configurations (seeded) at which a candidate's accuracy floor is evaluated against tol
FLOOR_STATES = 3


def _solvers() -> tuple[str, ...]:
    return tuple(n for n, a in ALGORITHMS.items() if a.family == "solver" and a.iterative)


def _damped_delassus() -> tuple[str, ...]:
    return tuple(n for n, a in ALGORITHMS.items() if a.family == "delassus" and any(o.name == "mu" for o in a.options))


#: pseudo-algorithm name -> (what it computes, its candidates in registry order)
AUTO = {"auto": ("constrained forward dynamics (ddq, lam)", _solvers()),
        "auto_osim": ("damped Delassus inverse (J M^-1 J^T + R)^-1", _damped_delassus())}


def is_auto(algorithm) -> bool:
    return isinstance(algorithm, str) and algorithm in AUTO


def cost(classes: dict) -> float:
    """The weighted cost (:data:`WEIGHTS`) of op counts by class."""
    return float(sum(WEIGHTS[c] * classes.get(c, 0) for c in CLASSES))


def _classes(tr) -> dict[str, int]:
    """Op counts by class; a driver: worst case ``setup + max_iter step + finish``."""
    if isinstance(tr, DriverTrace):
        parts = [_classes(tr.setup), _classes(tr.step), _classes(tr.finish)]
        return {c: parts[0][c] + tr.max_iter * parts[1][c] + parts[2][c] for c in CLASSES}
    total = count_trace(tr)["total"]
    return {c: total[c] for c in CLASSES}


def floor_above_tol(model: Model, algo, cset, options: dict) -> None:
    """Raise :class:`RbdgenError` when ``options`` ask for a ``tol`` below the row's
    accuracy floor (:func:`gen.conditioning.floor_at`) on this robot and constraint set,
    the worst over :data:`FLOOR_STATES` seeded random configurations."""
    tol = options.get("tol")
    if tol is None or not algo.floor.kappa or cset is None or not cset.m:
        return
    rng = np.random.default_rng(0)
    mu = kernel_mu(algo, options)
    floor = max(floor_at(algo.name, model, cset, model.random_q(rng), mu) for _ in range(FLOOR_STATES))
    if floor > tol:
        raise RbdgenError(f"accuracy floor {floor:.1e} (eps kappa of {algo.floor.kappa} matrix at mu={mu:g}) "
                          f"above tol={tol:g} on {model.name} with these constraints")


@dataclass
class Choice:
    """The outcome of :func:`choose`: ``chosen`` (a registry name), ``options`` (as its
    option checker returned them) and ``candidates``: one dict per candidate in registry
    order, ``{"algorithm", "status": "chosen" | "ok" | "excluded", "ops", "cost",
    "classes", "reason"}`` (counts and cost None when excluded, reason None otherwise)."""

    auto: str
    chosen: str
    options: dict
    candidates: list[dict] = field(default_factory=list)

    def record(self) -> dict:
        """JSON-ready record for the manifest."""
        return {"auto": self.auto, "chosen": self.chosen, "weights": dict(WEIGHTS),
                "cost_model": "weighted op count of the traced kernel (gen.choose)",
                "candidates": [dict(c) for c in self.candidates]}

    def rows(self) -> list[dict]:
        """One table row per candidate (``rbdgen opcount/build -a auto`` prints them)."""
        return [{"algorithm": c["algorithm"], "status": c["status"], "ops": c["ops"], "cost": c["cost"],
                 "reason": c["reason"] or ""} for c in self.candidates]


def _model(robot) -> Model:
    return robot if isinstance(robot, Model) else load_robot(robot)


def _spec(constraints):
    if constraints is None or isinstance(constraints, str):
        return constraints or None
    return getattr(constraints, "spec", None) or str(constraints)


def choose(robot, auto: str, constraints=None, **options) -> Choice:
    """Trace every candidate of ``auto`` (:data:`AUTO`) on ``robot`` with ``constraints``
    and ``options`` and pick the cheapest applicable one (module docstring).  Raises
    :class:`RbdgenError` when no candidate applies, with every reason."""
    if not is_auto(auto):
        raise RbdgenError(f"'{auto}' is not an automatic choice (choose from {', '.join(AUTO)})")
    model = _model(robot)
    rows, checked = [], {}
    for name in AUTO[auto][1]:
        algo = ALGORITHMS[name]
        row = {"algorithm": name, "status": "ok", "ops": None, "cost": None, "classes": None, "reason": None}
        try:
            cset = algo.constraint_set(model, constraints)
            opts = algo.check_options(options)
            floor_above_tol(model, algo, cset, opts)
            tr = (trace_driver if opts.get("tol") is not None else trace)(model, algo, cset, **opts)
            classes = _classes(tr)
        except RbdgenError as e:
            row.update(status="excluded", reason=str(e))
        else:
            row.update(ops=sum(classes.values()), cost=cost(classes), classes=classes)
            checked[name] = opts
        rows.append(row)
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        why = "; ".join(f"{r['algorithm']}: {r['reason']}" for r in rows)
        raise RbdgenError(f"{auto} on {model.name}: no candidate applies ({why})")
    best = min(ok, key=lambda r: r["cost"])     # min keeps the first of equal costs: registry order
    best["status"] = "chosen"
    return Choice(auto, best["algorithm"], checked[best["algorithm"]], rows)


#: (robot name, nq, nv, nbodies, constraint spec, auto, options) -> Choice, for :func:`run`
_CACHE: dict[tuple, Choice] = {}


def cached_choice(model: Model, auto: str, constraints, options: dict) -> Choice:
    """:func:`choose`, remembered per robot name and sizes, constraint spec and options
    (``gen.run`` with ``auto`` traces the candidates once per such key).  A constraint
    set without a spec string is not cached."""
    spec = _spec(constraints)
    try:
        key = (model.name, model.nq, model.nv, model.nbodies, spec, auto, tuple(sorted(options.items())))
        hash(key)
    except TypeError:
        key = None
    if key is None or spec is None:
        return choose(model, auto, constraints, **options)
    if key not in _CACHE:
        _CACHE[key] = choose(model, auto, constraints, **options)
    return _CACHE[key]


def resolve(robot, algorithm: str, constraints, options: dict) -> tuple[Model | str, str, Choice | None]:
    """``(robot, algorithm, choice)``: a pseudo-name replaced by its choice (the robot
    then loaded, so it is loaded once), any other name checked and passed through."""
    if not is_auto(algorithm):
        return robot, get_algorithm(algorithm).name, None
    model = _model(robot)
    choice = cached_choice(model, algorithm, constraints, options)
    return model, choice.chosen, choice


def run(robot, algorithm: str, *inputs, constraints=None, **options):
    """``gen.run`` (:func:`gen.api.run`) where ``algorithm`` may be ``auto`` or
    ``auto_osim``: the algorithm :func:`choose` picks for these constraints and options."""
    robot, name, _ = resolve(robot, algorithm, constraints, options)
    return _run(robot, name, *inputs, constraints=constraints, **options)


def opcount(robot, algorithm: str, constraints=None, **options) -> dict:
    """``gen.opcount`` (:func:`opcount.api.opcount`) where ``algorithm`` may be ``auto``
    or ``auto_osim``: the chosen algorithm's counts, with ``"choice"`` (:meth:`Choice.record`)."""
    robot, name, choice = resolve(robot, algorithm, constraints, options)
    out = opcount_api.opcount(robot, name, constraints, **options)
    if choice is not None:
        out["choice"] = choice.record()
    return out
