"""Pass ``lanes``: the functions the scalar writers write and, per function, the lane
plan of the robot's isomorphic limbs (:mod:`gen.lanes`) or None (on doubles).

Lanes are planned when the config allows them (``lanes``, the ``auto`` order, locals, not
batched: :attr:`KernelPlan.uses_lanes`) and kept where they remove at least
``config.lanes_min_gain`` of a function's statements.  One kernel, or a product kernel's
head, is planned on its lane trace (:func:`gen.lanes.trace_plan`: the joint placements'
lane constants as symbols); a driver's three functions on themselves."""
from __future__ import annotations

from ..lanes import plan as lane_plan, trace_plan
from ..products import head_function
from .functions import kernel_function
from .plan import KernelPlan


def run(plan: KernelPlan) -> None:
    """Record ``plan.written_funcs``, ``plan.head_layout`` and ``plan.lane_plans``."""
    if plan.batch:
        plan.written_funcs, plan.lane_plans = plan.funcs[:1], []
        return
    tr, gain = plan.trace, plan.config.lanes_min_gain
    if plan.loops:                  # a product kernel: its SX head (and the loops' layout)
        name = f"{plan.funcs[0].name()}_head"
        if plan.uses_lanes:
            f, layout, lane = trace_plan(tr, lambda t: head_function(name, t), gain)
        else:
            (f, layout), lane = head_function(name, tr), None
        plan.written_funcs, plan.head_layout, plan.lane_plans = [f], layout, [lane]
        return
    plan.written_funcs = plan.funcs
    if not plan.uses_lanes:
        plan.lane_plans = [None] * len(plan.funcs)
    elif plan.driver is None:       # one kernel: planned on its lane trace where the model has one
        name = plan.funcs[0].name()
        plan.lane_plans = [trace_plan(tr, lambda t: (kernel_function(name, t), None), gain)[2]]
    else:
        plan.lane_plans = [lane_plan(f, tr.model, min_gain=gain) for f in plan.funcs]
