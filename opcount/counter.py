"""Operation counting on CasADi SX instruction tapes (docs/DESIGN.md §3.8, §4 "Op classes").

:func:`count_function` walks the instruction tape of a ``casadi.Function`` built from SX
(``f.n_instructions()``, ``f.instruction_id(k)``) and sorts every instruction into one
op class:

========  ==============================================================================
class     CasADi op codes
========  ==============================================================================
``add``   ``OP_ADD``, ``OP_SUB`` (subtractions count as additions, Featherstone 2005 §4.1)
``mul``   ``OP_MUL``, ``OP_SQ`` (SX rewrites ``x*x`` as ``sq(x)``)
``div``   ``OP_DIV``
``sqrt``  ``OP_SQRT``
``trig``  circular functions: sin, cos, tan, asin, acos, atan, atan2
``neg``   ``OP_NEG``
``other`` everything else that computes: fmin/fmax, comparisons and logic, if_else_zero,
          fabs, exp, log, pow, ``twice`` (SX rewrites ``x+x`` and ``2*x`` as
          ``twice(x)``), ``inv``, hyperbolics, ... and any op code this module does not
          know — an unknown code is never silently dropped.
========  ==============================================================================

``OP_INPUT``, ``OP_OUTPUT``, ``OP_CONST`` and ``OP_PARAMETER`` are free (count zero).

:func:`count_trace` adds phase attribution for a :class:`gen.trace.Trace`; see its
docstring for the exact rule.  Counts are of the graph after common-subexpression
elimination over all outputs jointly (``casadi.cse``), which is what the emitted C
computes: one instruction of the tape is one floating-point operation of the C.
"""
from __future__ import annotations

import casadi as ca

CLASSES = ("add", "mul", "div", "sqrt", "trig", "neg", "other")
"""Op classes in report order; every count dict also has ``total`` (their sum)."""

FREE_OPS = frozenset({ca.OP_INPUT, ca.OP_OUTPUT, ca.OP_CONST, ca.OP_PARAMETER})
OP_CLASS = {
    ca.OP_ADD: "add", ca.OP_SUB: "add",
    ca.OP_MUL: "mul", ca.OP_SQ: "mul",
    ca.OP_DIV: "div",
    ca.OP_SQRT: "sqrt",
    ca.OP_SIN: "trig", ca.OP_COS: "trig", ca.OP_TAN: "trig",
    ca.OP_ASIN: "trig", ca.OP_ACOS: "trig", ca.OP_ATAN: "trig", ca.OP_ATAN2: "trig",
    ca.OP_NEG: "neg",
}
OUTPUT_PHASE = "output"
"""Name of the last phase: the operations after the algorithm's last ``be.mark``."""


def op_class(op: int) -> str | None:
    """The class of CasADi op code ``op``; ``None`` for free ops (inputs, outputs,
    constants, parameters); ``"other"`` for every other code, known or not."""
    if op in FREE_OPS:
        return None
    return OP_CLASS.get(op, "other")


def zero_counts() -> dict[str, int]:
    return {c: 0 for c in CLASSES} | {"total": 0}


def _finish(counts: dict[str, int]) -> dict[str, int]:
    counts["total"] = sum(counts[c] for c in CLASSES)
    return counts


def count_function(f: ca.Function) -> dict[str, int]:
    """Op counts of every instruction on the tape of SX function ``f``.

    The tape holds exactly the operations CasADi's C generator emits for ``f``; what
    is not needed by an output has already been dropped when ``f`` was built.  Apply
    ``casadi.cse`` to the outputs first to merge structurally repeated
    sub-expressions (:func:`function_of` does)."""
    counts = zero_counts()
    for k in range(f.n_instructions()):
        cls = op_class(f.instruction_id(k))
        if cls is not None:
            counts[cls] += 1
    return _finish(counts)


def _as_sx(x) -> ca.SX:
    return x if isinstance(x, ca.SX) else ca.SX(x)


def function_of(inputs, outputs, name: str = "f") -> ca.Function:
    """``casadi.Function(inputs -> outputs)`` after joint common-subexpression
    elimination of the outputs (``inputs``: SX symbols; ``outputs``: SX or numbers)."""
    outs = ca.cse([_as_sx(o) for o in outputs])
    return ca.Function(name, [_as_sx(s) for s in inputs], outs)


def count_expr(inputs, outputs) -> dict[str, int]:
    """Op counts of the expressions ``outputs`` (SX) as functions of ``inputs``."""
    return count_function(function_of(inputs, outputs))


def _phase_of_instructions(f: ca.Function, sink_phase: list[int]) -> list[int]:
    """For each instruction k of ``f``: the smallest ``sink_phase[o]`` over the outputs
    ``o`` of ``f`` that depend on k (-1 if none).  One backward sweep of the tape: the
    tape is topologically ordered, and dependencies are recovered by tracking the last
    instruction that wrote each work register (CasADi reuses registers)."""
    n = f.n_instructions()
    deps: list[tuple[int, ...]] = [()] * n
    out_instr: list[tuple[int, int]] = []          # (instruction, function output)
    writer: dict[int, int] = {}
    for k in range(n):
        op = f.instruction_id(k)
        if op == ca.OP_OUTPUT:
            out_instr.append((k, f.instruction_output(k)[0]))
            deps[k] = tuple(writer[r] for r in f.instruction_input(k))
            continue
        if op not in (ca.OP_INPUT, ca.OP_CONST, ca.OP_PARAMETER):
            deps[k] = tuple(writer[r] for r in f.instruction_input(k))
        for r in f.instruction_output(k):
            writer[r] = k
    best = [-1] * n
    for k, o in out_instr:
        best[k] = sink_phase[o]
    for k in reversed(range(n)):                   # consumers come after producers
        b = best[k]
        if b < 0:
            continue
        for d in deps[k]:
            if best[d] < 0 or b < best[d]:
                best[d] = b
    return best


def count_trace(tr) -> dict:
    """Op counts of a :class:`gen.trace.Trace`, in total and by phase.

    Returns ``{"total": {class: n, ..., "total": n}, "phases": [{"name": str,
    **counts}, ...], "n_instructions": int}``; the phases are those recorded by
    ``be.mark(name, *values)`` in the order the algorithm closed them, followed by
    ``"output"`` (what comes after the last mark; omitted when that is nothing).  Marks sharing a name (e.g. one
    per unrolled iteration) are merged into one phase at the first one's position.

    **Attribution rule (exact).**  Build one SX function ``F`` whose outputs are the
    algorithm's outputs followed by every marked value, after joint ``casadi.cse`` so
    that a sub-expression shared by a mark and an output is one instruction.  The cost
    counted is the *dependency cone of the algorithm's outputs* in ``F`` — the
    operations the emitted C performs; marked values that no output needs are not
    counted.  Each instruction of that cone belongs to the first phase ``k`` whose
    marked values depend on it (one backward sweep of the tape propagating the
    minimum phase index), and to ``"output"`` if no marked value depends on it.  This
    is exactly "ops needed for the values marked in phases 0..k minus ops needed up
    to k-1", restricted to the output cone, so the phases partition the total: their
    sum equals ``total`` class by class, by construction.  ``total`` equals
    :func:`count_function` of ``inputs -> cse(outputs)`` (tested).
    """
    inputs = [s for _, s in tr.inputs]
    # with products written as loops (gen.products): the head's straight-line code, then the loops
    exprs, loops, loop_marks = tr.straight_line() if hasattr(tr, "straight_line") \
        else ([e for _, e in tr.outputs], [], [])
    outs = [ca.vec(_as_sx(e)) for e in exprs]
    # the arrays the loops read are marked last with their loops' phases: they claim only
    # what no mark of the algorithm does (e.g. V = W sqrt(d), whose sqrt the SX of
    # M^-1 = V V^T simplifies away on a leaf's column, sqrt(d)^2 = d, but the C computes)
    marks = [(name, [ca.vec(_as_sx(v)) for v in vals]) for name, vals in [*tr.phases, *loop_marks]]
    mark_sx = [ca.vertcat(*vals) if vals else ca.SX(0, 1) for _, vals in marks]
    n_marks = len(marks)
    f = function_of(inputs, [ca.vertcat(*outs)] + mark_sx, "count_trace")
    FINAL = n_marks                                # phase code of the ops after the last mark
    # output-cone membership: a sweep from the algorithm outputs alone
    in_cone = _phase_of_instructions(f, [0] + [-1] * n_marks)
    first = _phase_of_instructions(f, [FINAL] + list(range(n_marks)))

    names: list[str] = []
    for name, _ in marks:
        if name not in names:
            names.append(name)
    if OUTPUT_PHASE not in names:
        names.append(OUTPUT_PHASE)
    slot = [names.index(name) for name, _ in marks] + [names.index(OUTPUT_PHASE)]
    per = [zero_counts() for _ in names]
    total = zero_counts()
    for k in range(f.n_instructions()):
        cls = op_class(f.instruction_id(k))
        if cls is None or in_cone[k] < 0:
            continue
        total[cls] += 1
        per[slot[first[k]]][cls] += 1
    for name, madds, adds in loops:                # a multiply and an add per multiply-add, base adds
        for counts in (total, per[names.index(name or OUTPUT_PHASE)]):
            counts["mul"] += madds
            counts["add"] += madds + adds
    phases = [{"name": n} | _finish(c) for n, c in zip(names, per)]
    if phases[-1]["name"] == OUTPUT_PHASE and phases[-1]["total"] == 0 and len(phases) > 1:
        phases.pop()                               # the algorithm marked its last stage itself
    return {"total": _finish(total),
            "phases": phases,
            "n_instructions": f.n_instructions()}
