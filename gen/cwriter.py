"""rbdgen's scalar C writer: a CasADi SX function's instruction tape as C (issue 12 §6,
issue 15 §3).

CasADi's ``CodeGenerator`` wraps every function in ~17 global helpers (``_checkout``,
``_release``, ``_n_in``, ``_sparsity_in``, ``_work``, ...) that an embedded controller
neither needs nor wants exported, and writes each kernel as one C function, whose
compile time grows faster than linearly with its length (gcc at -O3: talos aba, 16k
instructions, 6 s; a 300-link chain's aba, 11.5 min and 1.5 GB).  This module walks the
tape CasADi's generator walks (``instruction_id/input/output/constant``) and writes, per
function, exactly one global C function::

    void <name>(const double **arg, double **res)               intermediates in locals
    void <name>(const double **arg, double **res, double *w)    avoid_stack: in w[]

``arg[i]`` and ``res[j]`` point to the i-th input and j-th output, dense, column-major;
all must be non-NULL (the wrappers always pass every array).  Work slots are CasADi's own
register allocation (``w<k>`` locals, or ``w[k]`` with ``avoid_stack``), so ``sz_w``
bounds both.  Constants are inlined as hexadecimal literals (:func:`c_double`): exact
and the same bytes on every machine (tests/test_portable.py).

Scheduling
----------
CasADi's tape is a depth-first walk from the outputs, so a value computed for one output
stays live until the last output that needs it: talos crba holds 492 values live on
average (rnea 486, aba 450), far more than the 16-32 registers, and gcc -O3 (which
does not reorder a block this size for register pressure on x86) spills them.  Before
writing, :func:`schedule` reorders the instructions by a greedy list scheduler
(Sethi & Ullman's aim, by the usual heuristic): of the instructions whose operands are
computed, take the one that ends the most live ranges minus the one it starts, ties to
the one that became ready last (which keeps a chain of uses together), then assigns work
slots by a linear scan.  The result is kept for big kernels (the tape keeps at least
``schedule_above`` values live on average) when it brings that below
``schedule_below`` of the tape's (:mod:`gen.codegen.schedule`, thresholds of
:class:`gen.codegen.config.CodegenConfig`).  Measured (talos, gcc -O3 -march=native): mean live values crba
492 -> 162, rnea 486 -> 121, aba 450 -> 396; run time in
``bench/reports/2026-11-26-emission-order.md`` (:mod:`gen.bench.emission_order`).
Small kernels (the tape under ``critical_below``, 100, values live on average), where
the greedy order's longer dependency chains cost what its fewer spills save, are written
in :func:`critical_order` instead: the ready instruction with the longest chain of instructions depending on it,
the greedy scheduler's choice while ``critical_budget`` (28) values or more are live
(interleaved A/B, ns per call of the kernel, tape -> critical: ur5 nle 60.5 -> 56.8, rnea
65.9 -> 60.1, crba 37.8 -> 37.2, aba 132.1 -> 125.2; panda nle 86.6 -> 87.3, rnea 89.4 ->
90.6, crba 66.5 -> 60.6, aba 184.0 -> 178.9; ur5 nle's hot path 780 -> 737
instructions, 87 -> 58 spill stores and reloads).  The
arithmetic is unchanged; only where gcc contracts a*b+c into an FMA can results move in
the last bits.

Splitting
---------
A tape longer than ``split_above`` instructions (:class:`gen.codegen.config.CodegenConfig`) is cut into ``static`` part
functions of at most ``part_size`` instructions (:mod:`gen.codegen.split`), called in order by the entry point,
so that gcc optimises several functions of bounded size instead of one huge one (its
time and memory then grow linearly with the kernel).  A value computed in one part and
read in a later one crosses the boundary through an array ``x`` on the entry point's
stack: a backward pass over the parts gives, per boundary, the work slots whose value is
read later (``live_after[i] = live_in[i+1] | (live_after[i+1] - defs[i+1])``; CasADi
reuses slots, so liveness is per slot and per boundary, not per expression); a part
loads its upward-exposed slots from ``x`` on entry and stores those it defines that are
live after it on exit.  With ``avoid_stack`` the slots already live in ``w[]``, which the
parts share, so nothing crosses.  Parts are ``noinline`` (GCC, Clang): gcc would
otherwise inline every static function called once back into the entry point.  The
thresholds are measured (``bench/reports/2026-11-26-compile-time.md``,
:mod:`gen.bench.compile_time`).
"""
from __future__ import annotations

import functools
import heapq
import math
import re
from dataclasses import dataclass, field

import casadi as ca

from .codegen import schedule as schedule_pass, split as split_pass
from .codegen.config import CodegenConfig
from .codegen.zero_fill import constant_stores, zero_fills
from .errors import RbdgenError

#: work slots declared per line of a declaration (readability of the emitted C)
DECL_PER_LINE = 12

#: C of the element-wise operations ({0}, {1}: the operands), valid for doubles and for
#: GCC vector values (the batched kernels of gen.emit use them on vectors)
VECTOR_OPS = {ca.OP_ASSIGN: "{0}", ca.OP_ADD: "{0} + {1}", ca.OP_SUB: "{0} - {1}", ca.OP_MUL: "{0} * {1}",
              ca.OP_DIV: "{0} / {1}", ca.OP_NEG: "-{0}", ca.OP_TWICE: "2. * {0}", ca.OP_SQ: "{0} * {0}",
              ca.OP_INV: "1. / {0}"}
#: libm functions and comparisons on doubles (CasADi's own printing of each operation)
LIBM_OPS = {ca.OP_SQRT: "sqrt({0})", ca.OP_FABS: "fabs({0})", ca.OP_EXP: "exp({0})", ca.OP_LOG: "log({0})",
            ca.OP_TAN: "tan({0})", ca.OP_ASIN: "asin({0})", ca.OP_ACOS: "acos({0})", ca.OP_ATAN: "atan({0})",
            ca.OP_SINH: "sinh({0})", ca.OP_COSH: "cosh({0})", ca.OP_TANH: "tanh({0})",
            ca.OP_ASINH: "asinh({0})", ca.OP_ACOSH: "acosh({0})", ca.OP_ATANH: "atanh({0})",
            ca.OP_FLOOR: "floor({0})", ca.OP_CEIL: "ceil({0})", ca.OP_ERF: "erf({0})",
            ca.OP_EXPM1: "expm1({0})", ca.OP_LOG1P: "log1p({0})",
            ca.OP_FMAX: "fmax({0}, {1})", ca.OP_FMIN: "fmin({0}, {1})", ca.OP_POW: "pow({0}, {1})",
            ca.OP_CONSTPOW: "pow({0}, {1})", ca.OP_ATAN2: "atan2({0}, {1})", ca.OP_FMOD: "fmod({0}, {1})",
            ca.OP_COPYSIGN: "copysign({0}, {1})", ca.OP_HYPOT: "hypot({0}, {1})",
            ca.OP_LT: "({0} < {1})", ca.OP_LE: "({0} <= {1})", ca.OP_EQ: "({0} == {1})",
            ca.OP_NE: "({0} != {1})", ca.OP_NOT: "(!{0})", ca.OP_AND: "({0} && {1})",
            ca.OP_OR: "({0} || {1})", ca.OP_IF_ELSE_ZERO: "({0} ? {1} : 0)"}
TRIG_OPS = {ca.OP_SIN: "sin({0})", ca.OP_COS: "cos({0})"}
SCALAR_OPS = {**VECTOR_OPS, **LIBM_OPS, **TRIG_OPS}


def c_double(x: float) -> str:
    """A C double literal that reads back as exactly ``x`` (hexadecimal, C99)."""
    x = float(x)
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    return f"({x.hex()})" if x < 0 or (x == 0 and math.copysign(1.0, x) < 0) else x.hex()


def op_name(op: int) -> str:
    """CasADi's name of an operation code (``OP_CALL``), for error messages."""
    names = {getattr(ca, n): n for n in dir(ca) if n.startswith("OP_")}
    return names.get(op, str(op))


@dataclass
class _Step:
    """One instruction as C: ``dest = expr;`` where ``expr`` has ``{k}`` standing for work
    slot k; ``writes`` is the slot assigned (None for an output, whose ``dest`` is
    ``res[i][j]``); ``reads`` the slots read."""

    expr: str
    reads: tuple[int, ...]
    writes: int | None
    dest: str = ""
    #: the CasADi operation of a one-operand libm step (sin and cos for :func:`hoist_trig`)
    op: int | None = None


def _steps(f: ca.Function, calls: dict | None = None) -> list[_Step]:
    """The tape of ``f`` as steps, constants folded into their uses as literals;
    ``calls``: C formats replacing :data:`SCALAR_OPS`' for some operations (e.g. sin and
    cos by a routine of the kernel file)."""
    ops = {**SCALAR_OPS, **(calls or {})}
    if not f.is_a("SXFunction"):
        raise RbdgenError(f"{f.name()}: the C writer takes an SX function")
    const: dict[int, str] = {}                 # work slot -> the literal it holds now
    steps: list[_Step] = []

    def operand(slot):
        return const.get(slot, f"{{{slot}}}")

    for k in range(f.n_instructions()):
        op, ins, out = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_CONST:
            const[out[0]] = c_double(f.instruction_constant(k))
            continue
        reads = tuple(a for a in dict.fromkeys(ins) if a not in const)
        if op == ca.OP_OUTPUT:
            steps.append(_Step(operand(ins[0]), reads, None, f"res[{out[0]}][{out[1]}]"))
            continue
        r = out[0]
        if op == ca.OP_INPUT:
            steps.append(_Step(f"arg[{ins[0]}][{ins[1]}]", (), r))
        else:
            steps.append(_Step(_format(f, ops, op).format(*(operand(a) for a in ins)), reads, r,
                               op=op if op in TRIG_OPS else None))
        const.pop(r, None)
    return steps


def lane_type(width: int) -> str:
    """The C type of ``width`` doubles as one GCC / Clang vector (a work slot holding
    ``width`` lanes, :mod:`gen.lanes`; a piece of a product loop's column,
    :mod:`gen.products`), loaded and stored with ``rbdgen_load<width>`` /
    ``rbdgen_store<width>`` (:func:`vector_types`)."""
    return f"rbdgen_v{width}"


def vector_types(widths) -> str:
    """The vector types of ``widths`` (:func:`lane_type`) and their loads and stores at
    any double-aligned address, behind a one-line error for compilers without GCC's
    vector extensions.

    Loads and stores are macros on a twin type that may sit at any double-aligned address
    and alias anything (GCC's ``aligned`` on a typedef lowers the alignment, ``may_alias``
    exempts it from type-based aliasing; "Common Type Attributes" of the GCC manual,
    honoured by Clang): no function of the kernel files takes or returns a vector, so
    no calling convention for vectors is involved.  Functions returning a vector of 4
    doubles made gcc and clang warn ``AVX vector return without AVX enabled changes the
    ABI`` (``-Wpsabi``, on by default) at the folder's own flags (no ``-march``), and
    clang ``unused function`` for the widths a kernel did not use."""
    lines = ["#if !defined(__GNUC__)", "#error \"rbdgen: this kernel uses GCC vector extensions (vector_size): "
             "build it with GCC or Clang\"", "#endif"]
    for w in sorted(set(widths)):
        t = lane_type(w)
        lines += [f"typedef double {t} __attribute__((vector_size({8 * w})));",
                  f"typedef double {t}u __attribute__((vector_size({8 * w}), aligned(8), may_alias));",
                  f"#define rbdgen_load{w}(p) (*(const {t}u *)(p))",
                  f"#define rbdgen_store{w}(p, v) (*({t}u *)(p) = (v))"]
    return "\n".join(lines)


def _format(f: ca.Function, ops: dict, op: int) -> str:
    """The C format of ``op`` (``ops``: :data:`SCALAR_OPS` and the kernel's ``calls``)."""
    if op not in ops:
        raise RbdgenError(f"{f.name()}: the C writer cannot emit CasADi operation {op_name(op)}")
    return ops[op]


def _lane_steps(f: ca.Function, plan, calls: dict | None = None, config: CodegenConfig = CodegenConfig()) \
        -> tuple[list[_Step], dict[int, int], bool]:
    """``(steps, widths, scheduled)``: the statements of a lane plan (:func:`gen.lanes.plan`),
    the widths of the vector work slots, and whether the greedy scheduler reordered them.
    A group's operand is its operands' group when they are that group's lanes in order,
    else a vector of the lanes' operands (constants, scalar slots, lanes ``{s.l}`` of
    vector slots); a group of libm calls is a vector of one call per lane.  The statements
    are reordered by the scheduler whenever it brings the live values below
    ``config.schedule_below`` of the plan's order (whatever their number: measured, talos rnea
    with lanes 1.22 -> 1.05 us, crba 1.66 -> 1.44, solo12 aba_derivatives 1.69 -> 1.60;
    talos rnea_derivatives 7.6 -> 7.4), then put on reused work slots per width (:func:`_allocate`)."""
    ops = {**SCALAR_OPS, **(calls or {})}
    tape, groups = plan.tape, plan.groups
    slot = {u: k for k, u in enumerate(plan.order)}
    where: dict[int, tuple[int, int | None]] = {}          # node -> (slot, lane or None)
    for u, k in slot.items():
        if u[0] == "s":
            where[u[1]] = (k, None)
        else:
            for lane, m in enumerate(groups[u[1]]):
                where[m] = (k, lane)
    widths = {slot[("g", g)]: len(ms) for g, ms in groups.items()}

    def scalar(a):                                          # (C text, slots read)
        if a in tape.const:
            return c_double(tape.const[a]), ()
        k, lane = where[a]
        return (f"{{{k}}}" if lane is None else f"{{{k}.{lane}}}"), (k,)

    steps = []
    for u in plan.order:
        if u[0] == "s":
            i = u[1]
            if i in tape.inputs:
                steps.append(_Step(f"arg[{tape.inputs[i][0]}][{tape.inputs[i][1]}]", (), slot[u]))
                continue
            texts = [scalar(a) for a in tape.args[i]]
            steps.append(_Step(_format(f, ops, tape.op[i]).format(*(t for t, _ in texts)),
                               tuple(dict.fromkeys(r for _, rs in texts for r in rs)), slot[u],
                               op=tape.op[i] if tape.op[i] in TRIG_OPS else None))
            continue
        members = groups[u[1]]
        op = tape.op[members[0]]
        if op not in VECTOR_OPS:                            # a libm call per lane, gathered
            per_lane = [[scalar(a) for a in tape.args[m]] for m in members]
            text = ", ".join(_format(f, ops, op).format(*(t for t, _ in lane)) for lane in per_lane)
            reads = [r for lane in per_lane for _, rs in lane for r in rs]
            steps.append(_Step(f"(({lane_type(len(members))}){{{text}}})", tuple(dict.fromkeys(reads)), slot[u],
                               op=op if op in TRIG_OPS else None))
            continue
        texts, reads = [], []
        for p in range(len(tape.args[members[0]])):
            operands = [tape.args[m][p] for m in members]
            at = [where.get(o) for o in operands]
            if at[0] is not None and all(x == (at[0][0], lane) for lane, x in enumerate(at)):
                texts.append(f"{{{at[0][0]}}}")
                reads.append(at[0][0])
                continue
            parts = [scalar(o) for o in operands]
            texts.append(f"(({lane_type(len(members))}){{{', '.join(t for t, _ in parts)}}})")
            reads += [r for _, rs in parts for r in rs]
        steps.append(_Step(VECTOR_OPS[tape.op[members[0]]].format(*texts), tuple(dict.fromkeys(reads)), slot[u]))
    for node, o, j in tape.outputs:
        text, reads = scalar(node)
        steps.append(_Step(text, reads, None, f"res[{o}][{j}]"))
    # slot k is written by step k (one per unit, in plan.order), so the dataflow's values are the slots
    reads, users = _dataflow(steps)
    order, before, after = schedule_order(reads, users)
    scheduled = schedule_pass.keep_lanes(config, before, after)
    steps, widths = _allocate(steps, reads, users, order if scheduled else range(len(steps)), widths)
    return steps, widths, scheduled


def _dataflow(steps: list[_Step]) -> tuple[list, list]:
    """``(reads, users)``: per step the steps whose values it reads (through CasADi's
    reused work slots) and the steps that read its value."""
    cur: dict[int, int] = {}                   # work slot -> the step whose value it holds
    reads = []
    for k, st in enumerate(steps):
        reads.append(tuple(cur[s] for s in st.reads))
        if st.writes is not None:
            cur[st.writes] = k
    users = [[] for _ in steps]
    for k, rs in enumerate(reads):
        for r in rs:
            users[r].append(k)
    return reads, users


def tape_live(steps: list[_Step]) -> float:
    """The mean number of values live in CasADi's tape order."""
    reads, users = _dataflow(steps)
    return _mean_live(reads, users, range(len(steps)))


def schedule(steps: list[_Step]) -> tuple[list[_Step], float, float]:
    """The steps reordered by the greedy list scheduler of the module docstring, on
    fresh work slots; returns (steps, mean live values of the tape order, of the new
    order)."""
    reads, users = _dataflow(steps)
    order, before, after = schedule_order(reads, users)
    return _allocate(steps, reads, users, order)[0], before, after


def schedule_order(reads, users) -> tuple[list[int], float, float]:
    """The order of the greedy list scheduler (:func:`schedule`) over the dataflow of
    :func:`_dataflow`, and the mean live values of the steps' order and of it."""
    n = len(reads)
    left = [len(u) for u in users]             # uses of each value not yet scheduled
    missing = [len(rs) for rs in reads]        # operands of each step not yet computed
    done = [False] * n

    def score(k):                              # live ranges ended - live range started
        return sum(left[r] == 1 for r in reads[k]) - (1 if users[k] else 0)

    # heap entries (-score, stamp, step): the highest score first, then the step that became
    # ready last (stamp -clock); the steps ready from the start (inputs) after, in tape order
    stamp = list(range(n))
    heap = [(-score(k), k, k) for k in range(n) if not missing[k]]
    heapq.heapify(heap)
    order, clock = [], 0
    while heap:
        _, _, k = heapq.heappop(heap)
        if done[k]:
            continue                           # a stale entry: the step was re-queued higher
        done[k] = True
        order.append(k)
        clock += 1
        for r in reads[k]:
            left[r] -= 1
            if left[r] == 1:                   # its last user, if ready, now ends a range
                u = next(u for u in users[r] if not done[u])
                if not missing[u]:
                    heapq.heappush(heap, (-score(u), stamp[u], u))
        for u in users[k]:
            missing[u] -= 1
            if not missing[u]:
                stamp[u] = -clock
                heapq.heappush(heap, (-score(u), stamp[u], u))
    return order, _mean_live(reads, users, range(n)), _mean_live(reads, users, order)


def critical_order(reads, users, budget: int) -> list[int]:
    """List scheduling by critical path under a register budget, over the dataflow of
    :func:`_dataflow`: of the steps whose operands are computed, the one with the longest
    chain of steps depending on it (its height), ties to the one that ends the most live
    ranges minus the one it starts (:func:`schedule_order`'s score), then tape order;
    while ``budget`` or more values are live, the score first and the height second.  The
    order a small kernel is written in (:mod:`gen.codegen.schedule`): the tape's keeps
    values live longer than the registers hold, :func:`schedule_order`'s lengthens the
    dependency chains the core waits on."""
    n = len(reads)
    height = [1] * n
    for k in range(n - 1, -1, -1):
        height[k] += max((height[u] for u in users[k]), default=0)
    left = [len(u) for u in users]
    missing = [len(rs) for rs in reads]
    done = [False] * n

    def score(k):
        return sum(left[r] == 1 for r in reads[k]) - (1 if users[k] else 0)

    def push(k):                               # one entry per heap; a stale one is skipped
        sc = score(k)
        heapq.heappush(by_height, (-height[k], -sc, k))
        heapq.heappush(by_score, (-sc, -height[k], k))

    by_height: list = []
    by_score: list = []
    for k in range(n):
        if not missing[k]:
            push(k)
    order, live = [], 0
    while len(order) < n:
        heap = by_height if live < budget else by_score
        entry = heapq.heappop(heap)
        k = entry[2]
        if done[k] or -(entry[1] if heap is by_height else entry[0]) != score(k):
            continue                           # scheduled already, or re-queued with its new score
        done[k] = True
        order.append(k)
        for r in reads[k]:
            left[r] -= 1
            live -= left[r] == 0
            if left[r] == 1:                   # its last user, if ready, now ends a range
                u = next(u for u in users[r] if not done[u])
                if not missing[u]:
                    push(u)
        live += bool(users[k])
        for u in users[k]:
            missing[u] -= 1
            if not missing[u]:
                push(u)
    return order


def _mean_live(reads, users, order) -> float:
    """Values live after each step, averaged over the steps, in ``order``."""
    left = [len(u) for u in users]
    live = total = 0
    for k in order:
        for r in reads[k]:
            left[r] -= 1
            live -= left[r] == 0
        live += bool(users[k])
        total += live
    return total / max(len(reads), 1)


def _allocate(steps, reads, users, order, widths: dict | None = None) -> tuple[list[_Step], dict[int, int]]:
    """The steps in ``order`` on work slots assigned by a linear scan (a slot is free
    again after the last read of its value; the lowest free slot of the value's width
    first), and the new slots' widths.  ``widths``: per step whose value is a vector,
    its lanes (:func:`_lane_steps`; none: all doubles)."""
    widths = widths or {}
    left = [len(u) for u in users]
    slot_of: dict[int, int] = {}
    free: dict[int, list[int]] = {}            # width -> free slots
    new_widths: dict[int, int] = {}
    top = 0
    out = []
    for k in order:
        st = steps[k]
        old = dict(zip(st.reads, reads[k]))        # old slot -> value
        new_reads = tuple(slot_of[r] for r in reads[k])
        for r in reads[k]:
            left[r] -= 1
            if left[r] == 0:
                heapq.heappush(free.setdefault(widths.get(r, 1), []), slot_of[r])
        writes = None
        if st.writes is not None:
            width = widths.get(k, 1)
            pool = free.get(width)
            writes = heapq.heappop(pool) if pool else top
            top += writes == top
            if width > 1:
                new_widths[writes] = width
            slot_of[k] = writes
            if not users[k]:
                heapq.heappush(free.setdefault(width, []), writes)
        expr = re.sub(r"\{(\d+)((?:\.\d+)?)\}", lambda m: f"{{{slot_of[old[int(m.group(1))]]}{m.group(2)}}}",
                      st.expr)
        out.append(_Step(expr, new_reads, writes, st.dest, st.op))
    return out, new_widths


#: lanes of the vector sin / cos routine a scalar kernel's hoisted trigonometry calls
#: (:func:`hoist_trig`): one AVX register; without AVX gcc splits it into two SSE halves
TRIG_LANES = 4
_PLACEHOLDER = re.compile(r"\{(\d+)((?:\.\d+)?)\}")


def hoist_trig(steps: list[_Step], widths: dict[int, int], routine: str,
               lanes: int = TRIG_LANES) -> tuple[list[_Step], dict[int, int]]:
    """``(steps, widths)`` with the sin and cos whose arguments need no other sin or cos
    (a joint's angle, or a mimic joint's affine map of it) computed together: their
    distinct arguments, ``lanes`` at a time, go through :func:`trig_wrappers` (the vector
    routine ``<routine>_trig`` inlined, once for the sines and once for the cosines, which
    share their reduction), right after the statements those arguments need; each sin or
    cos statement (or a lane group's vector of them, :func:`_lane_steps`) becomes a read
    of its lanes.  A joint's sin and cos through libm cost ~100 instructions (one
    ``sincos`` call).
    ``widths``: the lane widths of vector slots; slots are assigned anew
    (:func:`_allocate`).  Fewer than two distinct arguments: unchanged."""
    reads, users = _dataflow(steps)
    n = len(steps)
    is_trig = [st.op in TRIG_OPS and bool(reads[k]) for k, st in enumerate(steps)]
    after_trig = [False] * n                     # a sin or cos is among the step's ancestors
    for k in range(n):
        after_trig[k] = any(after_trig[r] or is_trig[r] for r in reads[k])
    hoisted = [k for k in range(n) if is_trig[k] and not after_trig[k]]

    def operands(k):                             # the step's arguments as (value, ".lane" or "")
        value = dict(zip(steps[k].reads, reads[k]))
        return [(value[int(m.group(1))], m.group(2)) for m in _PLACEHOLDER.finditer(steps[k].expr)]

    args: dict[tuple[int, str], int] = {}        # argument -> its position among all arguments
    for k in hoisted:
        for a in operands(k):
            args.setdefault(a, len(args))
    if len(args) < 2:
        return steps, widths
    cone, stack = set(), [v for v, _ in args]
    while stack:                                 # the steps the arguments need
        k = stack.pop()
        if k not in cone:
            cone.add(k)
            stack.extend(reads[k])
    value_width = {k: widths[st.writes] for k, st in enumerate(steps) if st.writes in widths}
    ext, ext_reads = list(steps), list(reads)
    fresh = 1 + max((s for st in steps for s in _slots(st)), default=-1)

    def step(expr_of, values):                   # a step reading ``values`` through fresh placeholders
        nonlocal fresh
        holder = {v: fresh + i for i, v in enumerate(dict.fromkeys(values))}
        fresh += len(holder)
        return expr_of(holder), tuple(holder.values()), tuple(holder)

    keys = list(args)
    kinds = {(args[a] // lanes, steps[k].op == ca.OP_COS) for k in hoisted for a in operands(k)}
    vectors: dict[tuple[int, bool], int] = {}    # (chunk, cosine) -> its step
    for c in range(0, len(keys), lanes):
        chunk = keys[c:c + lanes]
        for cosine in (False, True):
            if (c // lanes, cosine) not in kinds:
                continue
            expr, placeholders, values = step(lambda h: ", ".join(
                [f"{{{h[v]}{lane}}}" for v, lane in chunk] + ["0.0"] * (lanes - len(chunk))), [v for v, _ in chunk])
            vectors[c // lanes, cosine] = len(ext)
            value_width[len(ext)] = lanes
            ext.append(_Step(f"__extension__ ({{ {routine}_v t_ = {{{expr}}}; "
                             f"{routine}_{'cos' if cosine else 'sin'}(&t_); t_; }})", placeholders, fresh))
            ext_reads.append(values)
            fresh += 1
    for k in hoisted:                            # sin / cos -> lanes of the vectors
        cosine = steps[k].op == ca.OP_COS
        where = [(vectors[args[a] // lanes, cosine], args[a] % lanes) for a in operands(k)]
        expr, placeholders, values = step(lambda h: ", ".join(f"{{{h[v]}.{lane}}}" for v, lane in where),
                                          [v for v, _ in where])
        if len(where) > 1:
            expr = f"(({lane_type(len(where))}){{{expr}}})"
        ext[k] = _Step(expr, placeholders, steps[k].writes)
        ext_reads[k] = values
    ext_users = [[] for _ in ext]
    for k, rs in enumerate(ext_reads):
        for r in rs:
            ext_users[r].append(k)
    order = sorted(cone) + list(range(n, len(ext))) + [k for k in range(n) if k not in cone]
    return _allocate(ext, ext_reads, ext_users, order, value_width)


#: the attribute of a function with hoisted sin and cos (:func:`hoist_trig`): every call
#: in it inlined (GCC and Clang, "Common Function Attributes"; the kernel files need GCC's
#: vector extensions already), so the vector routine's sine and cosine of one vector share
#: their reduction and polynomials (common-subexpression elimination) and no vector
#: crosses a call; libm's functions are not inlined
FLATTEN = "__attribute__((flatten)) "


def trig_wrappers(routine: str) -> str:
    """C of ``<routine>_sin`` and ``<routine>_cos`` (``void (<routine>_v *x)``: ``*x`` =
    its sines or cosines) by the vector routine ``<routine>_trig`` (``void (const
    <routine>_v *x, <routine>_v *y, int cosine)``, ``gen.codegen.trig.routine``), for a
    function with :data:`FLATTEN`.  A single wrapper returning both as one vector of 8
    doubles was 1.3-1.5x slower than libm on AVX-512 (gcc 12, -march=native: the 512-bit
    value's lane inserts and extracts), as fast or faster with AVX2."""
    return "\n".join(f"static inline void {routine}_{name}({routine}_v *x)\n{{\n    {routine}_trig(x, x, {cosine});\n}}"
                      for name, cosine in (("sin", 0), ("cos", 1)))


def _slots(step: _Step) -> tuple[int, ...]:
    return step.reads if step.writes is None else (*step.reads, step.writes)


def _render(step: _Step, read, write) -> str:
    """The C statement of ``step``, slot k read as ``read(k)`` (lane l of a vector slot,
    ``{k.l}``, as ``read(k, l)``) and written as ``write(k)``."""
    expr = re.sub(r"\{(\d+)(?:\.(\d+))?\}",
                  lambda m: read(int(m.group(1))) if m.group(2) is None else read(int(m.group(1)), int(m.group(2))),
                  step.expr)
    return f"{step.dest if step.writes is None else write(step.writes)} = {expr};"


def _declare(slots, widths: dict | None = None, indent: str = "    ") -> list[str]:
    """``double w3, w7, ...;`` over several lines (vector slots, ``widths``, as their
    lane type)."""
    widths = widths or {}
    lines = []
    for width in sorted({widths.get(s, 1) for s in slots}):
        names = [f"w{s}" for s in sorted(slots) if widths.get(s, 1) == width]
        kind = "double" if width == 1 else lane_type(width)
        lines += [f"{indent}{kind} {', '.join(names[i:i + DECL_PER_LINE])};" for i in range(0, len(names), DECL_PER_LINE)]
    return lines


def _local(s: int, lane: int | None = None) -> str:
    return f"w{s}" if lane is None else f"w{s}[{lane}]"


@dataclass
class Written:
    """One function as C: ``code``, ``parts`` (1: not split) and ``stack_doubles``
    (the doubles of locals and boundary array of its deepest frame; 0 with
    ``avoid_stack``)."""

    code: str
    parts: int
    stack_doubles: int
    slots: int = 0
    scheduled: bool = False
    #: the lane widths of its vector work slots (:mod:`gen.lanes`); empty: all doubles
    widths: dict = field(default_factory=dict)
    #: the doubles of the temporaries an unoptimised build keeps for its vector
    #: statements (:func:`o0_temporaries`, :func:`stack_bytes`)
    o0_doubles: int = 0
    #: the outputs zero-filled first (:mod:`gen.codegen.zero_fill`)
    filled: tuple = ()
    #: whether its joint angles' sin and cos go through the vector routine (:func:`hoist_trig`)
    hoisted_trig: bool = False
    #: whether its statements are in :func:`critical_order` (:mod:`gen.codegen.schedule`)
    critical: bool = False
    #: the function writing its fills and constant stores apart (``<name>_zero``), or None
    #: (:func:`gen.codegen.zero_fill.constant_stores`)
    zero: str | None = None


#: the stack one call takes beyond STACK_FACTOR x its locals' bytes (the wrapper's and the
#: helpers' frames, the pointer arrays, the frames' alignment)
STACK_SLACK = 4096
#: an optimised build (-O1 and above, gcc or clang) takes at most this many times the bytes
#: of the locals the writer declares: the compilers allocate registers and stack slots
#: anew, and spill.  Measured with -fstack-usage (wrapper and kernel frames; gcc 12 and
#: clang 14 at -O1, -O2, -O3, -O3 -march=native, -O2 -ffast-math; 19 kernels of every code
#: shape): at most 1.53x (solo12 constrained_aba with run-time parameters, gcc -O1), 1.25x
#: on talos aba; tests/test_stack.py checks the bound
STACK_FACTOR = 2
#: at -O0 the compilers keep what each vector statement computes and its operands in stack
#: slots of their own, and gcc the pieces it splits a vector wider than the machine's
#: registers into (4 doubles without AVX): per double a vector statement assigns, up to
#: this many doubles of temporaries, by width (a vector of 2 is one SSE2 or NEON register).
#: Measured at -O0 (gcc 12, clang 14): up to 2.0 for widths 4 and 8 (solo12
#: constrained_aba with run-time parameters, gcc), 0.34 for width 2 (talos aba, clang)
O0_TEMPORARIES = {1: 0, 2: 1}
O0_TEMPORARIES_WIDE = 4


def o0_temporaries(width: int, count: int = 1) -> int:
    """The doubles of temporaries an unoptimised build may keep for ``count`` vector
    statements of ``width`` lanes (:data:`O0_TEMPORARIES`)."""
    return count * width * O0_TEMPORARIES.get(width, O0_TEMPORARIES_WIDE)


def stack_bytes(stack_doubles: int, o0_doubles: int = 0) -> tuple[int, int]:
    """``(optimised, unoptimised)``: bounds of the stack one call of a kernel takes, in
    bytes, from the doubles of its locals (``stack_doubles``, the header's
    ``STACK_DOUBLES``) and of its vector statements' temporaries at -O0
    (:attr:`Written.o0_doubles`): ``STACK_FACTOR * 8 * stack_doubles + STACK_SLACK`` for
    builds with optimisation, ``8 * (stack_doubles + o0_doubles) + STACK_SLACK`` at -O0.
    The C library's functions the kernel calls (sin, cos, atan2, sqrt) come on top."""
    return STACK_FACTOR * 8 * stack_doubles + STACK_SLACK, 8 * (stack_doubles + o0_doubles) + STACK_SLACK


def write_function(f: ca.Function, *, avoid_stack: bool = False, split_above: int | None = None,
                   part_size: int | None = None, order: str = "auto", calls: dict | None = None,
                   lanes=None, static: bool = False, trig_vector: str | None = None,
                   config: CodegenConfig | None = None, zero_apart: bool = False) -> Written:
    """C of ``f`` (see the module docstring); ``split_above`` and ``part_size`` default
    to ``config``'s, and parts are never
    longer than ``split_above``; ``order``: ``"auto"`` (:func:`schedule` where it lowers
    the live values of a big kernel, :func:`critical_order` for a small one),
    ``"schedule"``, ``"critical"`` or ``"tape"`` (CasADi's order and work slots);
    ``calls``: see :func:`_steps`; ``lanes``: a lane plan of ``f`` (:func:`gen.lanes.plan`;
    not with ``avoid_stack``), written by :func:`_lane_steps` instead; ``static``: the
    function is ``static`` (called from code after it in the same file, as a product
    kernel's head: only the documented entry points are global); ``trig_vector``: the
    prefix of a vector sin / cos routine of :data:`TRIG_LANES` lanes the file defines,
    through which the kernel's sines and cosines of the joint angles go together
    (:func:`hoist_trig`); ``config``: the thresholds of the passes run here, in order:
    zero fill (:mod:`gen.codegen.zero_fill`), schedule (:mod:`gen.codegen.schedule`),
    split (:mod:`gen.codegen.split`); ``zero_apart``: a function with fills writes them
    and its constant stores in ``<name>_zero(res)`` instead (:func:`_zero_function`)."""
    config = config or CodegenConfig()
    split_above = config.split_above if split_above is None else split_above
    widths: dict[int, int] = {}
    if lanes is not None:
        if avoid_stack:
            raise RbdgenError("lanes keep vectors in locals: avoid_stack does not apply")
        steps, widths, scheduled = _lane_steps(f, lanes, calls, config)
        steps, fills = zero_fills(steps, f, config)
        slots = _top(steps)
    else:
        steps, fills = zero_fills(_steps(f, calls), f, config)
        slots, scheduled = int(f.sz_w()), False
    filled, zero = _filled(fills), None
    if zero_apart and fills:
        steps, stores = constant_stores(steps)
        zero, fills = _zero_function(f.name(), fills, stores), []
    tape_mean = functools.cache(lambda: tape_live(steps))   # the tape order's live values, asked twice
    if lanes is None and schedule_pass.worth_trying(config, order, tape_mean):
        new, before, after = schedule(steps)      # scheduling only the kernels it may serve
        if schedule_pass.keep(config, order, before, after):
            steps, scheduled = new, True
            slots = _top(steps)
    critical = lanes is None and not scheduled and schedule_pass.critical(config, order, len(steps), split_above,
                                                                          avoid_stack, tape_mean)
    if critical:
        reads, users = _dataflow(steps)
        steps = _allocate(steps, reads, users, critical_order(reads, users, config.critical_budget))[0]
        slots = _top(steps)
    flatten = ""
    if trig_vector is not None:
        if avoid_stack:
            raise RbdgenError("trig_vector keeps vectors in locals: avoid_stack does not apply")
        hoisted, widths = hoist_trig(steps, widths, trig_vector)
        if hoisted is not steps:
            steps, flatten = hoisted, FLATTEN
            slots = _top(steps)
    size = split_pass.part_size(config, len(steps), split_above, part_size)
    written = _written(f, steps, fills, widths, slots, scheduled, avoid_stack, static, flatten, size)
    written.critical, written.filled = critical, filled
    if zero is not None:
        written.code, written.zero = f"{zero}\n\n{written.code}", f"{f.name()}_zero"
    return written


def _zero_function(name: str, fills: list[str], stores: list) -> str:
    """C of ``void <name>_zero(double **res)``: the fill loops, then the constant stores
    (a ``-0.0`` or other constant into a filled output after its fill)."""
    body = [f"    {_render(st, _local, _local)}" for st in stores]
    return "\n".join([f"/* {name}_zero: the output entries that do not depend on the inputs (structural zeros, "
                      f"constants); {name} writes the others */", f"void {name}_zero(double **res)", "{",
                      *fills, *body, "}"])


def _top(steps) -> int:
    """The work slots the steps use: one more than the highest they write."""
    return 1 + max((st.writes for st in steps if st.writes is not None), default=-1)


def _written(f, steps, fills, widths, slots, scheduled, avoid_stack, static, flatten, size) -> Written:
    """The C of ``f``'s ``steps`` (after the passes): one function, or parts of ``size``."""
    name = f.name()
    params = "const double **arg, double **res" + (", double *w" if avoid_stack else "")
    head = (f"/* {name}: ({', '.join(f'{f.name_in(i)}[{f.nnz_in(i)}]' for i in range(f.n_in()))}) -> "
            f"({', '.join(f'{f.name_out(i)}[{f.nnz_out(i)}]' for i in range(f.n_out()))}), "
            f"{f.n_instructions()} instructions */")
    slot = (lambda s: f"w[{s}]") if avoid_stack else _local
    doubles = sum(widths.get(k, 1) for k in range(slots))
    o0 = sum(o0_temporaries(widths[st.writes]) for st in steps if st.writes in widths)
    if size is None:
        used = {s for st in steps for s in _slots(st)}
        body = [f"    {_render(st, slot, slot)}" for st in steps]
        unused = [f"    (void){p};" for p in ("arg", "res") if not any(f"{p}[" in b for b in fills + body)]
        lines = [head, f"{flatten}{'static ' if static else ''}void {name}({params})", "{",
                 *([] if avoid_stack else _declare(used, widths)), *unused, *fills, *body, "}"]
        return Written("\n".join(lines), 1, 0 if avoid_stack else doubles, slots, scheduled, widths, o0,
                       _filled(fills), bool(flatten))
    written = _split(steps, name, params, head, slot, avoid_stack, size, fills, widths, static, flatten)
    return Written(written.code, written.parts, written.stack_doubles, slots, scheduled, widths, o0, _filled(fills),
                   bool(flatten))


def _filled(fills: list[str]) -> tuple[int, ...]:
    """The outputs the fill loops ``fills`` (:func:`gen.codegen.zero_fill.zero_fills`) write."""
    return tuple(int(line.split("res[")[1].split("]")[0]) for line in fills)


def _split(steps, name, params, head, slot, avoid_stack, part_size, fills, widths=None,
           static: bool = False, flatten: str = "") -> Written:
    """``name`` as parts of ``part_size`` steps and the entry point calling them (the
    module docstring, "Splitting"), which first runs ``fills``; ``flatten``: the
    attribute the first part gets (:data:`FLATTEN`, where the hoisted sin and cos are)."""
    chunks = [steps[i:i + part_size] for i in range(0, len(steps), part_size)]
    live_in, defs = [], []
    for chunk in chunks:
        seen: set[int] = set()
        exposed: set[int] = set()
        for st in chunk:
            exposed.update(s for s in st.reads if s not in seen)
            if st.writes is not None:
                seen.add(st.writes)
        live_in.append(exposed)
        defs.append(seen)
    live_after = [set() for _ in chunks]
    for i in range(len(chunks) - 2, -1, -1):
        live_after[i] = live_in[i + 1] | (live_after[i + 1] - defs[i + 1])
    widths = widths or {}
    crossing = sorted(set().union(*live_in)) if not avoid_stack else []
    index, size = {}, 0                  # slot -> its first double in x (a vector slot takes its lanes)
    for s in crossing:
        index[s], size = size, size + widths.get(s, 1)
    parts, calls, frame = [], [], 0
    for i, chunk in enumerate(chunks):
        pname = f"{name}_p{i}"
        if avoid_stack:
            body, local = [f"    {_render(st, slot, slot)}" for st in chunk], set()
        else:
            body, local = _part_body(chunk, live_after[i], index, widths)
        frame = max(frame, sum(widths.get(s, 1) for s in local))
        text = "\n".join(body)
        used = [p for p in ("arg", "res", "w", "x") if f"{p}[" in text or f"({p} + " in text]
        decl = {"arg": "const double **arg", "res": "double **res", "w": "double *w",
                "x": "double *restrict x"}
        sig = ", ".join(decl[p] for p in used) or "void"
        parts += [f"{flatten if i == 0 else ''}static RBDGEN_PART void {pname}({sig})", "{",
                  *_declare(local, widths), *body, "}", ""]
        calls.append(f"    {pname}({', '.join(used)});")
    top = [head, f"{'static ' if static else ''}void {name}({params})", "{"]
    if crossing:
        top.append(f"    double x[{size}];   /* values crossing a part boundary */")
    lines = [f"/* {name} in {len(chunks)} parts of at most {part_size} instructions */", *parts,
             *top, *fills, *calls, "}"]
    return Written("\n".join(lines), len(chunks), size + frame)


def _part_body(chunk, live_out: set[int], index: dict[int, int], widths: dict | None = None) \
        -> tuple[list[str], set[int]]:
    """The statements of one part with locals, and the slots it declares.  A slot read
    before the part defines it is read from ``x`` where it is used, and a slot live after
    the part is stored to ``x`` right after its last definition: loading every incoming
    value on entry and storing every outgoing one on exit would keep them all live
    through the part, and gcc then spills them (talos rnea_derivatives, parts of 4000:
    1.5x the unsplit run time)."""
    widths = widths or {}
    last = {st.writes: k for k, st in enumerate(chunk) if st.writes is not None}
    defined: set[int] = set()
    body = []

    def read(s, lane=None):                  # a vector slot from x: its lanes, or one lane
        if s in defined:
            return _local(s, lane)
        if lane is not None:
            return f"x[{index[s] + lane}]"
        return f"x[{index[s]}]" if widths.get(s, 1) == 1 else f"rbdgen_load{widths[s]}(x + {index[s]})"

    for k, st in enumerate(chunk):
        body.append("    " + _render(st, read, _local))
        if st.writes is not None:
            defined.add(st.writes)
            if last[st.writes] == k and st.writes in live_out:
                w = widths.get(st.writes, 1)
                body.append(f"    x[{index[st.writes]}] = w{st.writes};" if w == 1 else
                            f"    rbdgen_store{w}(x + {index[st.writes]}, w{st.writes});")
    return body, defined


#: the prologue of a file with split functions: parts are never inlined back (GCC, Clang)
PART_MACROS = """#if defined(__GNUC__)
#define RBDGEN_PART __attribute__((noinline))
#else
#define RBDGEN_PART
#endif"""


def write_functions(funcs, *, avoid_stack: bool = False, split_above: int | None = None,
                    part_size: int | None = None, order: str = "auto", calls: dict | None = None,
                    preamble: str = "", lanes: list | None = None, vector_widths=(),
                    static: bool = False, trig_vector: str | None = None,
                    config: CodegenConfig | None = None, zero_apart: bool = False) -> tuple[str, list[Written]]:
    """C of several functions in one file (with ``#include <math.h>``, then ``preamble``
    (the routines ``calls`` names), the vector types (:func:`vector_types`) of the
    functions' lanes and of ``vector_widths`` (those the caller's code after them uses),
    and, when any is split, :data:`PART_MACROS`), and each one's :class:`Written`;
    ``lanes``: per function a lane plan or None; ``static``: the functions are
    internal to the file (see :func:`write_function`); ``trig_vector``: see
    :func:`write_function` (its routine in ``preamble``); ``config``: the thresholds
    (:class:`gen.codegen.config.CodegenConfig`); ``zero_apart``: see :func:`write_function`."""
    lanes = lanes or [None] * len(funcs)
    written = [write_function(f, avoid_stack=avoid_stack, split_above=split_above, part_size=part_size,
                              order=order, calls=calls, lanes=plan, static=static, trig_vector=trig_vector,
                              config=config, zero_apart=zero_apart)
               for f, plan in zip(funcs, lanes)]
    widths = [*vector_widths, *(w for one in written for w in one.widths.values())]
    # the routines only where a function calls one (an unused static function is a warning)
    hoisted = any(w.hoisted_trig for w in written)
    called = hoisted or any(fmt.split("(")[0] in w.code for fmt in (calls or {}).values() for w in written)
    head = ["#include <math.h>", ""] + ([preamble.rstrip(), ""] if preamble and called else []) + \
        ([vector_types(widths), ""] if widths else []) + \
        ([trig_wrappers(trig_vector), ""] if hoisted else []) + \
        ([PART_MACROS, ""] if any(w.parts > 1 for w in written) else [])
    return "\n".join(head + ["\n\n".join(w.code for w in written)]), written
