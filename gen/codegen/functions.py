"""Pass ``functions``: the traced graph as the CasADi functions of the kernel's entry
points: ``<prefix>_kernel``, or an early-exit driver's ``_setup``, ``_step`` and
``_finish`` with the view of its loop the wrapper template renders."""
from __future__ import annotations

import casadi as ca

from ..errors import RbdgenError
from ..trace import DriverTrace
from .plan import KernelPlan

#: a driver's functions and when the loop calls each
DRIVER_PARTS = (("setup", "once per call"), ("step", "per iteration"),
                ("finish", "once, for the returned iterate"))


def kernel_function(name: str, tr) -> ca.Function:
    """``tr`` as one CasADi function, outputs densified (matrices written in full)."""
    return ca.Function(name, [s for _, s in tr.inputs],
                       [ca.densify(ca.SX(e)) for _, e in tr.outputs],
                       [n for n, _ in tr.inputs], [n for n, _ in tr.outputs])


def driver_functions(prefix: str, dt: DriverTrace) -> tuple[list[ca.Function], dict]:
    """The CasADi functions of a driver and the template's view of its loop."""
    funcs = [kernel_function(f"{prefix}_{name}", getattr(dt, name)) for name, _ in DRIVER_PARTS]
    nc, ns = dt.const_size, dt.state_size
    return funcs, {"setup": funcs[0].name(), "step": funcs[1].name(), "finish": funcs[2].name(),
                   "const_size": nc, "state_size": ns, "next_offset": nc + ns, "w_offset": nc + 2 * ns,
                   "tol": repr(float(dt.tol)), "max_iter": int(dt.max_iter)}


def run(plan: KernelPlan) -> None:
    """Record ``plan.funcs`` and ``plan.driver``; a fixed-count trace with a tolerance
    option is refused (it must be traced as a driver)."""
    tr = plan.trace
    if isinstance(tr, DriverTrace):
        plan.funcs, plan.driver = driver_functions(plan.prefix, tr)
        return
    if tr.options.get("tol") is not None:
        raise RbdgenError("a traced kernel runs a fixed number of iterations: trace a tolerance with "
                          "gen.trace.trace_driver (gen.emit.trace_for does for tol=...)")
    plan.funcs, plan.driver = [kernel_function(f"{plan.prefix}_kernel", tr)], None
