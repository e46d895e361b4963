"""Pass ``products``: which products (``be.product``, :class:`gen.trace.Product`) the C
forms as vectorisable loops after an SX head (:mod:`gen.products`).  The decision by
size is :func:`gen.trace.deferred`'s (the route choice of :func:`gen.trace.trace`
weighs the loops' operations before any code is generated, so its thresholds
``LOOP_ROWS``, ``LOOP_MIN_ROWS``, ``LOOP_MADDS`` stay with the trace); a batched kernel
writes every product as straight-line vector code."""
from __future__ import annotations

from ..trace import deferred
from .plan import KernelPlan


def run(plan: KernelPlan) -> None:
    """Record ``plan.loops``."""
    plan.loops = [] if plan.batch else deferred(plan.trace)
