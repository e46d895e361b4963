"""The C writers behind one interface, and pass ``write`` that picks one.

A writer is ``write(plan) -> (kernel file text, written)``: it reads the
:class:`~gen.codegen.plan.KernelPlan` the earlier passes filled and returns the kernel
file and, per written function, its :class:`gen.cwriter.Written` (None for the batched
writer: one frame of vector locals).  :data:`WRITERS` names them; :func:`choose` is the
rule: a batched kernel -> ``batched``; products as loops -> ``products``; a lane plan
on any function -> ``lanes``; else ``scalar``.
"""
from __future__ import annotations

from typing import Callable

from ..cwriter import write_functions
from ..products import write_kernel as write_products
from . import batched as batched_writer
from .plan import KernelPlan


def scalar(plan: KernelPlan) -> tuple[str, list]:
    """:func:`gen.cwriter.write_functions`: one C function per written function, with
    the zero-fill, schedule and split passes and the trig pass's routine; a kernel's one
    function (not a driver's) writes its fills and constants apart, in ``<kernel>_zero``
    (:mod:`gen.codegen.zero_fill`: the ``_zero_outputs`` and ``_update`` entry points)."""
    c = plan.config
    return write_functions(plan.written_funcs, avoid_stack=c.avoid_stack, split_above=c.split_above,
                           order=c.order, lanes=plan.lane_plans, config=c, zero_apart=plan.driver is None,
                           **plan.trig_code)


def lanes(plan: KernelPlan) -> tuple[str, list]:
    """The scalar writer with the lanes pass's plans: a group of lanes is one statement on
    a ``rbdgen_v<L>`` vector (:func:`gen.cwriter._lane_steps`)."""
    return scalar(plan)


def products(plan: KernelPlan) -> tuple[str, list]:
    """:func:`gen.products.write_kernel`: the SX head (by the scalar writer, with its lane
    plan) and the products' column loops."""
    c = plan.config
    code, one = write_products(plan.funcs[0].name(), plan.trace, (plan.written_funcs[0], plan.head_layout),
                               plan.lane_plans[0], avoid_stack=c.avoid_stack, split_above=c.split_above,
                               order=c.order, config=c, **plan.trig_code)
    return code, [one]


def batched(plan: KernelPlan) -> tuple[str, None]:
    """:func:`gen.codegen.batched.write`: every instruction a vector statement over
    ``plan.batch`` states."""
    f = plan.funcs[0]
    return batched_writer.write(f, f"{plan.prefix}_cg", plan.batch, f.name(), plan.config.batch_trig), None


#: the writers by name
WRITERS: dict[str, Callable[[KernelPlan], tuple]] = {"scalar": scalar, "lanes": lanes, "products": products,
                                                     "batched": batched}


def choose(plan: KernelPlan) -> str:
    """The writer of ``plan`` (module docstring)."""
    if plan.batch:
        return "batched"
    if plan.loops:
        return "products"
    return "lanes" if any(plan.lane_plans) else "scalar"


def run(plan: KernelPlan) -> None:
    """Record ``plan.writer``, ``plan.code`` and ``plan.written``."""
    plan.writer = choose(plan)
    plan.code, plan.written = WRITERS[plan.writer](plan)
