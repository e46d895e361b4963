"""Outputs formed as dense-times-sparse products, written as C loops.

The derivative algorithms end in products of a dense operator with the sparse partials
of the dynamics: ``dddq/dx = -M^-1 dtau/dx`` (``aba_derivatives``),
``dddq/dx = Q^T dac/dx - P dtau/dx`` and ``dlam/dx = S_K dac/dx - Q dtau/dx``
(``constrained_derivatives``), where ``M^-1``, ``P``, ``Q``, ``S_K`` are dense and the
partials have the tree's sparsity (column j of ``dtau/dq`` is nonzero on the ancestors
and the subtree of joint j only).  Written as straight-line scalar code, one statement
per multiply-add, these products are most of the operations of the talos kernels and
run at the scalar rate (on this machine kind such a kernel's speed is set by its machine
code, ~10 bytes per operation read from L2 on every call: talos aba_derivatives' 776 kB
in ~16 of its 21.7 us); written as loops over the nonzeros of ``X``, ``Y[:, c] += sign * sum_k
A[:, k] X[k, c]`` over contiguous columns of ``A`` and ``Y``, they are vector FMAs
(AVX2 / AVX-512) from a few hundred bytes of code.

An algorithm forms such an output with ``be.product(base, terms)``
(:mod:`gen.backend`); the trace records it (:class:`gen.trace.Product`).  The scalar
kernel is then two steps in one C function:

* the *head* (:func:`gen.trace.head`), the trace's SX function without the products'
  outputs (it writes nothing there) and, as extra outputs, each term's ``A`` (unless it
  is another output, e.g. ``M^-1``, which is then read there, also when an earlier
  product formed it), the nonzeros of its ``X`` and the nonzero entries of the base
  (the free-flyer's closed-form columns), into scratch arrays on the stack (in ``work``
  with ``avoid_stack``);
* the loops, column by column of each ``X`` (:func:`column_loop`, one per column
  length): the column's sums are held in up to :data:`ACCUMULATORS` vector registers
  while its nonzeros stream by, one vector FMA per register of rows (8 with AVX-512,
  4 with AVX, 2 otherwise: :data:`LOOP_WIDTH`, chosen when the C is compiled) and
  nonzero, and ``Y[:, c]`` is read and written once (talos aba_derivatives: 21.7 ->
  18.0 us against loops that updated ``Y`` in memory once per nonzero, row by row of
  ``X``; solo12: 2.40 -> 2.15).
  The first term's loops assign ``Y`` (an empty column zero), the base's entries are
  added to theirs, the later terms' loops add to ``Y``: every entry is stored by a
  loop, so the head fills no output with zeros first, and each loop tests the values it
  stores for inf and NaN on their bits, in registers: the kernel returns whether an
  output a product forms holds one, and the wrapper checks only the other outputs
  (talos aba_derivatives: 15.2 -> 14.1 us against a head that zero-filled the three
  outputs and a wrapper that read their 7500 doubles back from L2).

A symmetric product ``A A^T`` (``M^-1 = V V^T``, :attr:`gen.trace.Product.symmetric`)
runs its loops on each block of 8 columns from the block's first row down only (a loop
on ``rows - 8 b`` rows of the ``rows``-row columns) and copies the entries above the
diagonal blocks from their mirror images: (i, j) and (j, i) sum the same products in
the same order, so the copy is the value the loop would have formed (talos
aba_derivatives: 3969 -> 2190 vector multiply-adds of 8 rows for ``M^-1``).

The values equal the straight-line trace's up to rounding: the trace forms each sum in
the loops' order (k ascending, then added to ``Y``; ``base + sign s`` is ``sign s +
base``, exactly), the compiler contracts the multiply-adds.  The op count is what this
C executes (:func:`gen.trace.operations`, :func:`opcount.count_trace`): the head's
instructions plus a multiply and an add per nonzero of ``X`` and row of ``A`` (a
symmetric product's rows on and below its column's diagonal block), zeros of ``A``
included, which the SX sums skip (``V = W sqrt(d)`` is zero off each column's subtree),
and an add per nonzero entry of a base (talos aba_derivatives executes 267.3k
operations, its outputs' SX graph has 271.5k).  Batched kernels and the generic C keep
straight-line code.
"""
from __future__ import annotations

from bisect import bisect_left

import casadi as ca

from .cwriter import Written, lane_type, o0_temporaries, write_functions
from .trace import SYMMETRIC_BLOCK, Trace, deferred, head

#: numbers per line of the C's index tables
PER_LINE = 24


def head_function(name: str, tr: Trace) -> tuple[ca.Function, list[dict]]:
    """The head of ``tr`` (:func:`gen.trace.head`) as a ``casadi.Function`` whose outputs
    are the trace's (the products' bases in place of their results) then the scratch
    arrays, and the plan of the loops."""
    heads, scratch, plan = head(tr)
    names_in = [n for n, _ in tr.inputs]
    names_out = [n for n, _ in tr.outputs] + [f"scratch{i}" for i in range(len(scratch))]
    f = ca.Function(name, [s for _, s in tr.inputs], heads + scratch, names_in, names_out)
    return f, plan


def _table(name: str, values: list[int]) -> list[str]:
    rows = [", ".join(str(v) for v in values[i:i + PER_LINE]) for i in range(0, len(values), PER_LINE)]
    return [f"        static const int {name}[{len(values)}] = {{", *[f"            {r}," for r in rows], "        };"]


#: accumulators of one pass down a column (each a vector of the machine's width, or
#: narrower for the rows left over): enough independent sums to hide the FMA latency;
#: the machine's 16 (SSE2, AVX2) or 32 (AVX-512) vector registers hold them
ACCUMULATORS = 8
#: the widths of the vector types the loops use (:func:`gen.cwriter.vector_types`): the
#: machine's (:data:`LOOP_WIDTH`) and the narrower ones for the rows left over (a vector
#: of 2 for two rows, one SSE2 register: talos aba_derivatives' 50 rows, 14.15 -> 13.95 us
#: against two scalar rows)
VECTOR_WIDTHS = (2, 4, 8)
#: the loops' widest vector, chosen by the compiler's target (``RBDGEN_LOOP_WIDTH``): one
#: register of the machine, 8 doubles with AVX-512, 4 with AVX, else 2 (SSE2, NEON).  A
#: vector wider than the registers is no help: gcc keeps a vector of 8 doubles in memory
#: without AVX-512 and moves it piece by piece (talos aba_derivatives, gcc 12 -O3: 76 us
#: without -march, 89 us at -march=x86-64-v3, against 16 us at -march=native on AVX-512;
#: clang 14 at x86-64-v3: 15.6 us).  Every width forms each row's sum in the same order.
LOOP_WIDTH = """/* the product loops' widest vector: one register of the target (gen/products.py) */
#if defined(__AVX512F__)
#define RBDGEN_LOOP_WIDTH 8
#elif defined(__AVX__)
#define RBDGEN_LOOP_WIDTH 4
#else
#define RBDGEN_LOOP_WIDTH 2
#endif"""
#: the values RBDGEN_LOOP_WIDTH takes, widest first (the #if chain of :func:`column_loops`)
LOOP_WIDTHS = (8, 4, 2)


def _pieces(rows: int, width: int = 8) -> list[list[tuple[int, int]]]:
    """The rows of a column as passes of at most :data:`ACCUMULATORS` pieces
    ``(first row, width)``, vectors of ``width`` doubles, then at most one each of the
    narrower widths (4, 2, 1)."""
    pieces, r = [], 0
    for w in (8, 4, 2, 1):              # after the widest, fewer than `width` rows are left
        while w <= width and rows - r >= w:
            pieces.append((r, w))
            r += w
    return [pieces[i:i + ACCUMULATORS] for i in range(0, len(pieces), ACCUMULATORS)]


def loop_name(rows: int, ld: int, assign: bool = False) -> str:
    """The C name of :func:`column_loop`'s ``(rows, ld, assign)``."""
    return f"rbdgen_{'assign_' if assign else ''}columns_{rows}" + ("" if ld == rows else f"_of_{ld}")


#: a double's exponent bits, all set in an inf or a NaN (IEEE 754 binary64)
EXPONENT = "0x7ff0000000000000LL"


def nonfinite_tests() -> str:
    """C of the loops' test of the values they store: ``rbdgen_nonfinite<w>(v)``, all
    bits set in each lane of ``v`` that is inf or NaN (every exponent bit set), on the
    bits (as the wrapper's ``all_finite``: it holds under ``-ffast-math`` too).  Macros,
    like the loads and stores (:func:`gen.cwriter.vector_types`): no vector crosses a
    function boundary."""
    lines = []
    for w in VECTOR_WIDTHS:
        bits = f"rbdgen_bits{w}"
        lines += [f"typedef long long {bits} __attribute__((vector_size({8 * w})));",
                  f"#define rbdgen_nonfinite{w}(v) (({bits})((({bits})(v) & (({bits}){{0}} + {EXPONENT})) "
                  f"== (({bits}){{0}} + {EXPONENT})))"]
    lines.append("#define rbdgen_nonfinite1(v) (((((union { double d; long long b; }){(v)}).b) & "
                 f"{EXPONENT}) == {EXPONENT})")
    return "\n".join(lines)


def column_loops(rows: int, ld: int | None = None, assign: bool = False) -> str:
    """:func:`column_loop` for each machine width of :data:`LOOP_WIDTHS`, the one the
    compiler's target has chosen by ``RBDGEN_LOOP_WIDTH`` (:data:`LOOP_WIDTH`)."""
    out = []
    for n, width in enumerate(LOOP_WIDTHS):
        test = f"#if RBDGEN_LOOP_WIDTH == {width}" if n == 0 else \
            f"#elif RBDGEN_LOOP_WIDTH == {width}" if n < len(LOOP_WIDTHS) - 1 else "#else"
        out += [test, column_loop(rows, ld, assign, width)]
    return "\n".join(out + ["#endif"])


def column_loop(rows: int, ld: int | None = None, assign: bool = False, width: int = 8) -> str:
    """C of ``rbdgen_[assign_]columns_<rows>[_of_<ld>]`` (:func:`loop_name`): ``Y[:, c] +=
    sign * sum_j A[:, k[j]] x[j]`` (with ``assign``: ``Y[:, c] =``, an empty column
    zero) over the nonzeros ``j = start[c] .. start[c+1]-1`` of column c of a sparse X
    (k ascending), column by column, for ``rows`` rows of columns ``ld`` apart (default
    ``rows``); each pass down the column holds its sums in registers (one vector FMA per
    ``width`` rows and nonzero, ``Y`` read and written once per column), the order of the
    sums the trace's (:meth:`gen.backend.SXBackend.product`).  It returns 1 if a value it
    stored is inf or NaN (:func:`nonfinite_tests`), else 0."""
    ld = rows if ld is None else ld
    kind = {w: lane_type(w) for w in VECTOR_WIDTHS} | {1: "double"}
    widths = sorted({w for passes in _pieces(rows, width) for _, w in passes}, reverse=True)
    body = []
    for passes in _pieces(rows, width):
        decl = [f"{kind[w]} s{n} = {{0}};" if w > 1 else f"double s{n} = 0.0;" for n, (_, w) in enumerate(passes)]
        acc = [f"s{n} += rbdgen_load{w}(a + {r}) * xj;" if w > 1 else f"s{n} += a[{r}] * xj;"
               for n, (r, w) in enumerate(passes)]
        value = {n: f"sign * s{n}" if assign else
                 (f"rbdgen_load{w}(y + {r}) + sign * s{n}" if w > 1 else f"y[{r}] + sign * s{n}")
                 for n, (r, w) in enumerate(passes)}
        out = [f"{{ const {kind[w]} v = {value[n]}; " +
               (f"rbdgen_store{w}(y + {r}, v); " if w > 1 else f"y[{r}] = v; ") +
               f"bad{w} |= rbdgen_nonfinite{w}(v); }}" for n, (r, w) in enumerate(passes)]
        body += ["        {", *[f"            {d}" for d in decl],
                 "            for (int j = start[c]; j < start[c + 1]; ++j) {",
                 f"                const double *restrict a = A + (long)k[j] * {ld};",
                 "                const double xj = x[j];", *[f"                {a}" for a in acc], "            }",
                 *[f"            {o}" for o in out], "        }"]
    empty = [f"            for (int r = 0; r < {rows}; ++r)   /* the base: zero */", "                y[r] = 0.0;"] \
        if assign else []
    return "\n".join([
        f"/* Y[:, c] {'=' if assign else '+='} sign * sum_j A[:, k[j]] x[j], the nonzeros j = start[c] .. start[c+1]-1 "
        "of column c of a",
        f"   sparse X, for {rows} rows of columns {ld} apart: the sums in registers, Y read and written once;",
        "   1 if a value stored is inf or NaN (gen/products.py) */",
        f"static inline int {loop_name(rows, ld, assign)}(int cols, const int *restrict start, const int *restrict k,",
        "                                        const double *restrict x, double sign, const double *restrict A,",
        "                                        double *restrict Y)",
        "{",
        *[f"    rbdgen_bits{w} bad{w} = {{0}};" for w in widths if w > 1], "    long long bad1 = 0;",
        "    for (int c = 0; c < cols; ++c) {",
        "        double *restrict y = Y + (long)c * " + str(ld) + ";",
        "        if (start[c] == start[c + 1]) {", *empty,
        "            continue;",
        "        }",
        *body,
        "    }",
        *[f"    for (int i = 0; i < {w}; ++i)\n        bad1 |= bad{w}[i];" for w in widths if w > 1],
        "    return bad1 != 0;",
        "}"])


def _product_statements(plan: list, offsets: list) -> list[str]:
    """The kernel's statements forming each product of ``plan`` from the head's scratch
    (``s + offsets[k]``) into its output or scratch: one column-loop call per term (a
    symmetric ``A A^T`` block by block, then mirrored), then the base the trace adds."""
    def pointer(where) -> str:
        kind, at = where
        return f"res[{at}]" if kind == "output" else f"s + {offsets[at]}"

    lines = []
    for n, p in enumerate(plan):
        check = "bad |= " if p["Y"][0] == "output" else ""
        for t, term in enumerate(p["terms"]):
            tag = f"p{n}t{t}"
            start = [bisect_left(term["c"], i) for i in range(term["cols"] + 1)]   # c ascending
            x, sign, rows = f"s + {offsets[term['x']]}", float(term["sign"]), term["rows"]
            assign = t == 0
            lines += ["    {", *_table(f"start_{tag}", start), *_table(f"k_{tag}", term["k"])]
            if not p["symmetric"]:
                lines.append(f"        {check}{loop_name(rows, rows, assign)}({term['cols']}, start_{tag}, k_{tag}, "
                             f"{x}, {sign!r}, {pointer(term['A'])}, {pointer(p['Y'])});")
            else:       # A A^T: the columns of each block of rows from the block down, then the rest mirrored
                lines += [f"        {check}{loop_name(rows - b, rows, assign)}({min(SYMMETRIC_BLOCK, rows - b)}, "
                          f"start_{tag} + {b}, k_{tag}, {x}, {sign!r}, {pointer(term['A'])} + {b}, "
                          f"{pointer(p['Y'])} + {b * rows + b});" for b in _blocks(rows)]
                lines += [f"        double *restrict y = {pointer(p['Y'])};",
                          f"        for (int c = {SYMMETRIC_BLOCK}; c < {rows}; ++c)   /* above the diagonal blocks */",
                          f"            for (int r = 0; r < c / {SYMMETRIC_BLOCK} * {SYMMETRIC_BLOCK}; ++r)",
                          f"                y[r + c * {rows}] = y[c + r * {rows}];"]
            lines.append("    }")
            if t == 0 and p["base"]:       # Y = sign A X + base, as the trace adds them
                at, positions = p["base"]
                lines += ["    {", *_table(f"at_p{n}", positions),
                          f"        const double *restrict b = s + {offsets[at]};",
                          f"        double *restrict y = {pointer(p['Y'])};",
                          f"        for (int i = 0; i < {len(positions)}; ++i) {{",
                          f"            y[at_p{n}[i]] += b[i];"]
                if check:
                    lines.append(f"            bad |= (int)rbdgen_nonfinite1(y[at_p{n}[i]]);")
                lines += ["        }", "    }"]
    return lines


def write_kernel(name: str, tr: Trace, head: tuple, lane=None, *, avoid_stack: bool = False,
                 split_above: int | None = None, order: str = "auto", calls: dict | None = None,
                 preamble: str = "", trig_vector: str | None = None, config=None) -> tuple[str, Written]:
    """C of the scalar kernel ``int name(arg, res[, w])`` of a trace with products: the
    head (``static name_head``; ``head`` is ``(f, layout)`` of :func:`head_function`,
    written by :mod:`gen.cwriter` with ``calls``, ``preamble`` and ``trig_vector``, with
    ``lane``, its lane plan, :mod:`gen.codegen.lanes`) and the loops, returning 1 if an
    output a product forms holds an inf or NaN (the wrapper then checks only the other
    outputs, :func:`checked_outputs`), else 0; its :class:`Written` counts the scratch in
    the stack (or, with ``avoid_stack``, in the work slots).  ``config``: the thresholds
    (:class:`gen.codegen.config.CodegenConfig`)."""
    f, plan = head
    code, (head,) = write_functions([f], avoid_stack=avoid_stack, split_above=split_above, order=order,
                                    calls=calls, preamble=preamble, lanes=[lane], vector_widths=VECTOR_WIDTHS,
                                    static=True, trig_vector=trig_vector, config=config)
    sizes = [int(f.numel_out(i)) for i in range(len(tr.outputs), f.n_out())]   # an intermediate's Y: empty
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    total = sum(sizes)
    n_out = len(tr.outputs)
    loops = sorted({(term["rows"] - first, term["rows"], t == 0)
                    for p in plan for t, term in enumerate(p["terms"])
                    for first in (_blocks(term["rows"]) if p["symmetric"] else [0])}, reverse=True)
    lines = ["", nonfinite_tests() + "\n", LOOP_WIDTH + "\n", *[column_loops(*loop) + "\n" for loop in loops],
             f"/* {name}: the head writes the outputs no product forms and {len(sizes)} scratch arrays, the loops "
             f"form the products; 1 if an output they form holds an inf or NaN */",
             f"int {name}(const double **arg, double **res{', double *w' if avoid_stack else ''})", "{"]
    lines.append(f"    double *s = w + {head.slots};   /* scratch after the head's work slots */" if avoid_stack
                 else f"    double s[{total}];   /* scratch: the terms' A (not an output), the nonzeros of X, "
                      "the bases' */")
    ptrs = [f"res[{o}]" for o in range(n_out)] + [f"s + {off}" for off in offsets]
    lines.append(f"    double *r[{len(ptrs)}] = {{{', '.join(ptrs)}}};")
    lines.append("    int bad = 0;   /* an inf or NaN in an output the loops form */")
    lines.append(f"    {name}_head(arg, r{', w' if avoid_stack else ''});")
    lines += _product_statements(plan, offsets)
    lines += ["    return bad;", "}"]
    text = code + "\n" + "\n".join(lines)
    # the loops' accumulators and the values they store are locals too (also with
    # avoid_stack); at -O0 each loop keeps temporaries for its three vector statements per
    # piece (sum, value, test)
    passes = [p for rows, _, _ in loops for width in LOOP_WIDTHS for p in _pieces(rows, width)]
    accumulators = 2 * max((sum(w for _, w in p) for p in passes), default=0)
    o0 = max((sum(o0_temporaries(w, 3) for _, w in p) for p in passes), default=0)
    stack = (0 if avoid_stack else head.stack_doubles + total) + accumulators
    slots = head.slots + total if avoid_stack else head.slots
    return text, Written(text, head.parts, stack, slots, head.scheduled, head.widths, head.o0_doubles + o0,
                         head.filled)


def checked_outputs(tr: Trace) -> list[int]:
    """The outputs the kernel checks (:func:`write_kernel`): the products', whose every
    entry its loops store (a symmetric product's upper part the copy of one) and test."""
    return [p.output for p in deferred(tr) if p.output is not None]


def _blocks(rows: int) -> range:
    """The first rows of a symmetric product's diagonal blocks (:attr:`gen.trace.Product.symmetric`)."""
    return range(0, rows, SYMMETRIC_BLOCK)


def manifest(tr: Trace, loops: list | None = None) -> list[dict]:
    """The manifest's ``codegen.products``: per product written as loops (``loops``, by
    default :func:`gen.trace.deferred`'s; an output, or ``"intermediate"``), its terms and
    the nonzeros their loops run over."""
    return [{"output": "intermediate" if p.output is None else tr.outputs[p.output][0], "terms": len(p.terms),
             "nonzeros": sum(len(k) for _, _, _, k, _ in p.terms)} for p in (deferred(tr) if loops is None else loops)]
