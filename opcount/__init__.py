"""The rbdgen op counter: walks CasADi SX instruction tapes and counts operations by
class (add, mul, div, sqrt, trig, neg, other) and by algorithm phase (docs/DESIGN.md §3.8).

``count_function(f)`` for any SX ``casadi.Function``; ``count_trace(tr)`` for a
:class:`gen.trace.Trace` (phases from the algorithm's ``be.mark`` calls);
``opcount.api.opcount(robot, algorithm, ...)`` is ``gen.opcount`` (not imported here: it
imports gen, whose facade exposes it).  Reports: ``python -m
opcount.report`` regenerates ``opcount/reports/``.
"""
from .counter import (
    CLASSES,
    count_expr,
    count_function,
    count_trace,
    function_of,
    op_class,
)

__all__ = ["CLASSES", "count_expr", "count_function", "count_trace", "function_of", "op_class"]
