"""The passes in order, run over one :class:`~gen.codegen.plan.KernelPlan`.

::

    Trace ─► batch ─► functions ─► products ─► lanes ─► trig ─► output_check ─► write ─► pressure ─► KernelPlan
                                                                 │         (.manifest())
                              per written function:  zero-fill ─► schedule ─► split

Each pass is ``run(plan)``: it reads ``plan.config`` and what earlier passes recorded and
records its own decision.  The per-function passes run inside the scalar writer
(:func:`gen.cwriter.write_function`), whose :class:`gen.cwriter.Written` records them.
"""
from __future__ import annotations

from . import batch, functions, lanes, output_check, pressure, products, trig, writers
from .config import CodegenConfig
from .plan import KernelPlan

#: the kernel-level passes, in the order they run
PASSES = (("batch", batch.run), ("functions", functions.run), ("products", products.run),
          ("lanes", lanes.run), ("trig", trig.run),
          ("output_check", output_check.run), ("write", writers.run), ("pressure", pressure.run))


def plan_kernel(tr, config: CodegenConfig, prefix: str, runtime: dict | None = None,
                until: str | None = None) -> KernelPlan:
    """The plan of ``tr`` after every pass (``until``: up to and including that pass;
    for the tests of one pass); ``runtime``: :func:`gen.emit.runtime_parameters`."""
    plan = KernelPlan(tr, config, prefix=prefix, runtime=runtime)
    for name, run in PASSES:
        run(plan)
        if name == until:
            break
    return plan
