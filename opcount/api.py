"""``gen.opcount(robot, algorithm, constraints=None, **options)`` (docs/DESIGN.md §4)."""
from __future__ import annotations

from gen.api import get_algorithm
from gen.model import Model
from gen.robots import load_robot
from gen.trace import trace

from .counter import CLASSES, count_trace


def _model(robot):
    return robot if isinstance(robot, Model) else load_robot(robot)


def _spec(constraints):
    if constraints is None or isinstance(constraints, str):
        return constraints or None
    return getattr(constraints, "spec", None) or str(constraints)


def opcount(robot, algorithm: str, constraints=None, **options) -> dict:
    """Operation counts of ``algorithm`` traced on ``robot`` (a name, synthetic spec,
    URDF path or :class:`~gen.model.Model`), by op class and by phase.

    Returns ``{"robot", "algorithm", "constraints", "options", "nq", "nv", "total",
    "classes": {add, mul, div, sqrt, trig, neg, other}, "phases": [{"name", "total",
    add, ...}, ...]}`` (plus ``"m"``, the constraint dimension, for constrained
    algorithms; ``"route"``, for a derivative row, the route traced and both routes'
    ``ops`` and ``cost``, :func:`gen.trace.estimated_cost`).  ``total`` is the number of floating-point operations of the emitted
    C after common-subexpression elimination; inputs, outputs and constants are free.
    The phases partition ``total`` (see :func:`opcount.counter.count_trace`).
    """

    model = _model(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    tr = trace(model, algo, cset, **algo.check_options(options))
    counts = count_trace(tr)
    out = {"robot": model.name, "algorithm": algo.name, "constraints": _spec(constraints),
           "options": {k: options[k] for k in sorted(options)}, "nq": model.nq, "nv": model.nv,
           "total": counts["total"]["total"],
           "classes": {c: counts["total"][c] for c in CLASSES},
           "phases": counts["phases"]}
    if tr.route is not None:            # a derivative row: both routes' counts and estimated costs
        out["route"] = {k: tr.route[k] for k in ("used", "ops", "cost")}
    m = getattr(cset, "m", None) if cset is not None else None
    if isinstance(m, int):
        out["m"] = m
    return out
