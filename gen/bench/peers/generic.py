"""rbdgen's generic C (:mod:`gen.generic`: the model as data, one library for every
robot) as a benchmark peer: the row's ``generic`` entry called with the robot embedded by
:func:`~gen.generic.serialize.model_to_c` and, for constrained rows, the constraint set by
:func:`~gen.generic.serialize.constraints_to_c`, initialised once; the proximal solvers
with the specialised kernel's options (mu, its iteration count or, with a tolerance, the
same early exit and cap; the impact map's restitution), the damped Delassus inverses with
its mu."""
from __future__ import annotations

from ...algorithms.proximal import DEFAULT_MU
from ...generic import INCLUDE_DIR, SOURCES
from ...generic.serialize import constraints_to_c, model_to_c
from .base import Bench, Plan, c_float


def unavailable(bench: Bench) -> str | None:
    """Why the generic C does not compute this row on this model (None: it does)."""
    model, algo, cset = bench.model, bench.algo, bench.cset
    if algo.generic is None:
        return f"the generic C has no {algo.name} ({algo.generic_note})"
    mimic = [b.name for b in model.bodies if b.mimic is not None]
    if mimic:
        return f"the generic C has no mimic joints (joint '{mimic[0]}')"
    loop = [str(c) for c in cset.constraints if not c.anchored] if cset else []
    if loop and algo.generic.anchored_only:
        return (f"the generic C's {algo.name} takes constraints relative to the world only "
                f"('{loop[0]}' closes a loop between two moving bodies)")
    return None


def plan(bench: Bench) -> Plan | str:
    why = unavailable(bench)
    if why:
        return why
    model, algo, cset, options, man = bench.model, bench.algo, bench.cset, bench.options, bench.manifest
    # rbg_<name>(&model, [&constraints,] [&options,] [scalar,] inputs..., outputs..., work);
    # scalar: a damped Delassus inverse's mu, the impact map's restitution
    ctx = {"model_c": model_to_c(model, "bench_model"), "function": algo.generic.entry,
           "constrained": False, "prox": False, "scalar_arg": None}
    if algo.iterative:
        tol = man.get("tolerance")                 # tol -1 = none
        cap = man.get("max_iter") if tol is not None else man.get("iterations")
        ctx.update({"constrained": True, "prox": True, "constraints_c": constraints_to_c(model, cset, "bench_cons"),
                    "mu": c_float(options.get("mu", DEFAULT_MU)), "max_iter": int(cap),
                    "tol": "-1.0" if tol is None else c_float(tol)})
    elif algo.constrained:
        ctx.update({"constrained": True, "constraints_c": constraints_to_c(model, cset, "bench_cons")})
    default = {"restitution": 0.0, "mu": DEFAULT_MU}
    if algo.scalar_option:
        ctx["scalar_arg"] = c_float(options.get(algo.scalar_option, default[algo.scalar_option]))
    work = algo.generic.work(model.nbodies, model.nv, cset.m if cset else 0)
    return Plan(impl={"name": "generic", "key": "gen", "kind": "generic", "work_size": int(work), "colmajor": False},
                block="generic", context=ctx, sources=list(SOURCES), include_dirs=[INCLUDE_DIR])
