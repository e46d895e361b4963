"""Pass ``products``: which products (``be.product``, :class:`gen.trace.Product`) the C
forms as vectorisable loops after an SX head (:mod:`gen.products`).  The decision by
size is :func:`gen.trace.deferred`'s, by the config's ``loop_rows``, ``loop_min_rows``
and ``loop_madds`` (the route choice of :func:`gen.trace.trace` weighs the loops'
operations before any code is generated, so the trace records the config it was made
for and this pass reads the decision from it); a batched kernel
writes every product as straight-line vector code."""
from __future__ import annotations

from ..trace import deferred
from .plan import KernelPlan


def run(plan: KernelPlan) -> None:
    """Record ``plan.loops``."""
    plan.loops = [] if plan.batch else deferred(plan.trace)
