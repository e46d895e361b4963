"""Pass ``batch``: whether the kernel evaluates ``config.batch`` states per call (the
batched writer, :mod:`gen.codegen.batched`), and the refusals that need the traced
kernel (:meth:`gen.codegen.config.CodegenConfig.check_kernel`: no early-exit driver, no
run-time parameters in a batched kernel)."""
from __future__ import annotations

from ..trace import DriverTrace
from .plan import KernelPlan


def run(plan: KernelPlan) -> None:
    """Record ``plan.batch``."""
    plan.config.check_kernel(isinstance(plan.trace, DriverTrace), bool(plan.runtime))
    plan.batch = plan.config.batch
