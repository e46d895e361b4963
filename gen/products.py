"""Outputs formed as dense-times-sparse products, written as C loops.

The derivative algorithms end in products of a dense operator with the sparse partials
of the dynamics: ``dddq/dx = -M^-1 dtau/dx`` (``aba_derivatives``),
``dddq/dx = Q^T dac/dx - P dtau/dx`` and ``dlam/dx = S_K dac/dx - Q dtau/dx``
(``constrained_derivatives``), where ``M^-1``, ``P``, ``Q``, ``S_K`` are dense and the
partials have the tree's sparsity (column j of ``dtau/dq`` is nonzero on the ancestors
and the subtree of joint j only).  Written as straight-line scalar code, one statement
per multiply-add, these products are most of the operations of the talos kernels and
run at the scalar rate; written as loops over the nonzeros of ``X``, each an update of a
whole column ``Y[:, c] += sign * A[:, k] X[k, c]`` over contiguous columns of ``A`` and
``Y``, gcc vectorises them (AVX2 / AVX-512 FMAs across the rows).

An algorithm forms such an output with ``be.product(base, terms)``
(:mod:`gen.backend`); the trace records it (:class:`gen.trace.Product`) and the op count
is the trace's, one multiply and one add per nonzero of ``X`` and row of ``A``, which is
what the loops execute.  The scalar kernel is then two steps in one C function:

* the *head*, the trace's SX function with each product output replaced by its
  ``base`` (written into the output) and, as extra outputs, each term's ``A`` (unless it
  is another output, e.g. ``M^-1``, which is then read there) and the nonzeros of its
  ``X``, into scratch arrays on the stack (in ``work`` with ``avoid_stack``);
* the loops, over the nonzeros of each ``X`` row by row: for row k, column ``A[:, k]``
  is loaded once and consecutive updates write different columns of ``Y``, so they do
  not wait on each other's stores (a 50-row product on this machine kind: 2.7 ns per
  nonzero, against 5.2 column by column; the order of the sums changes, not their
  terms).

The values equal the straight-line trace's up to rounding (the sums are the same terms
in another association).  Batched kernels and the generic C keep straight-line code.
"""
from __future__ import annotations

from bisect import bisect_left

import casadi as ca

from .cwriter import Written, write_functions
from .trace import Trace, same_nodes

#: a product becomes loops when its output has at least this many rows; shorter columns
#: fill less than two AVX-512 vectors and the loop's overhead costs more than the
#: straight-line code (panda aba_derivatives, 7 rows: 0.88 us straight-line, 1.01 us as
#: loops; solo12, 18 rows: 2.70 -> 2.35 us; talos, 50 rows: 37.3 -> 21.6 us)
LOOP_ROWS = 16
#: numbers per line of the C's index tables
PER_LINE = 24


def deferred(tr: Trace) -> list:
    """The products of ``tr`` written as loops (at least :data:`LOOP_ROWS` rows); the
    others stay in the head's straight-line code."""
    return [p for p in getattr(tr, "products", []) if p.base.shape[0] >= LOOP_ROWS]


def head_function(name: str, tr: Trace) -> tuple[ca.Function, list[dict]]:
    """The head of ``tr`` (module docstring) and, per product, per term: where its
    ``A`` is (``("output", j)`` or ``("scratch", i)``) and the scratch index of its
    nonzeros."""
    outs = [ca.densify(ca.SX(e)) for _, e in tr.outputs]
    product_of = {p.output: p for p in deferred(tr)}
    heads = [ca.densify(product_of[o].base) if o in product_of else e for o, e in enumerate(outs)]
    scratch: list[ca.SX] = []
    plan = []
    for p in deferred(tr):
        terms = []
        for sign, A, x, k, c in p.terms:
            A = ca.densify(A)
            shared = next((o for o, e in enumerate(outs) if o not in product_of and same_nodes(e, A)), None)
            if shared is None:
                scratch.append(A)
                where = ("scratch", len(scratch) - 1)
            else:
                where = ("output", shared)
            scratch.append(x)
            terms.append({"sign": sign, "A": where, "x": len(scratch) - 1, "k": k, "c": c,
                          "rows": int(A.shape[0]), "inner": int(A.shape[1])})
        plan.append({"output": p.output, "terms": terms})
    names_in = [n for n, _ in tr.inputs]
    names_out = [n for n, _ in tr.outputs] + [f"scratch{i}" for i in range(len(scratch))]
    f = ca.Function(name, [s for _, s in tr.inputs], heads + scratch, names_in, names_out)
    return f, plan


def _table(name: str, values: list[int]) -> list[str]:
    rows = [", ".join(str(v) for v in values[i:i + PER_LINE]) for i in range(0, len(values), PER_LINE)]
    return [f"        static const int {name}[{len(values)}] = {{", *[f"            {r}," for r in rows], "        };"]


#: the loop every product term runs (one copy per kernel file)
AXPY = """/* Y[:, c[j]] += sign * A[:, k] x[j] for the nonzeros j = start[k] .. start[k+1]-1 of row k of a
   sparse X, row by row (gen/products.py) */
static inline void rbdgen_columns(int rows, int inner, const int *restrict start, const int *restrict c,
                                  const double *restrict x, double sign, const double *restrict A,
                                  double *restrict Y)
{
    for (int k = 0; k < inner; ++k) {
        const double *restrict a = A + (long)k * rows;
        for (int j = start[k]; j < start[k + 1]; ++j) {
            const double s = sign * x[j];
            double *restrict y = Y + (long)c[j] * rows;
            for (int r = 0; r < rows; ++r)
                y[r] += a[r] * s;
        }
    }
}"""


def write_kernel(name: str, tr: Trace, *, avoid_stack: bool = False, split_above: int | None = None,
                 order: str = "auto", calls: dict | None = None, preamble: str = "") -> tuple[str, Written]:
    """C of the scalar kernel ``name(arg, res[, w])`` of a trace with products: the head
    (``name_head``, written by :mod:`gen.cwriter`, with ``calls`` and ``preamble``) and
    the loops; its :class:`Written` counts the scratch in the stack (or, with
    ``avoid_stack``, in the work slots)."""
    f, plan = head_function(f"{name}_head", tr)
    code, (head,) = write_functions([f], avoid_stack=avoid_stack, split_above=split_above, order=order,
                                    calls=calls, preamble=preamble)
    sizes = [int(f.nnz_out(i)) for i in range(len(tr.outputs), f.n_out())]
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    total = sum(sizes)
    n_out = len(tr.outputs)
    lines = ["", AXPY, "",
             f"/* {name}: the head writes the outputs (the products' bases) and {len(sizes)} scratch arrays, "
             f"then the products */",
             f"void {name}(const double **arg, double **res{', double *w' if avoid_stack else ''})", "{"]
    lines.append(f"    double *s = w + {head.slots};   /* scratch after the head's work slots */" if avoid_stack
                 else f"    double s[{total}];   /* scratch: the terms' A (not an output) and the nonzeros of X */")
    ptrs = [f"res[{o}]" for o in range(n_out)] + [f"s + {off}" for off in offsets]
    lines.append(f"    double *r[{len(ptrs)}] = {{{', '.join(ptrs)}}};")
    lines.append(f"    {name}_head(arg, r{', w' if avoid_stack else ''});")
    for p in plan:
        for t, term in enumerate(p["terms"]):
            kind, at = term["A"]
            A = f"res[{at}]" if kind == "output" else f"s + {offsets[at]}"
            tag = f"o{p['output']}t{t}"
            start = [bisect_left(term["k"], i) for i in range(term["inner"] + 1)]   # k ascending
            lines += ["    {", *_table(f"start_{tag}", start), *_table(f"c_{tag}", term["c"]),
                      f"        rbdgen_columns({term['rows']}, {term['inner']}, start_{tag}, c_{tag}, "
                      f"s + {offsets[term['x']]}, {float(term['sign'])!r}, {A}, res[{p['output']}]);", "    }"]
    lines.append("}")
    text = code + "\n" + "\n".join(lines)
    stack = 0 if avoid_stack else head.stack_doubles + total
    slots = head.slots + total if avoid_stack else head.slots
    return text, Written(text, head.parts, stack, slots, head.scheduled)


def manifest(tr: Trace) -> list[dict]:
    """The manifest's ``codegen.products``: per output written as loops, its terms and
    the nonzeros their loops run over."""
    return [{"output": tr.outputs[p.output][0], "terms": len(p.terms),
             "nonzeros": sum(len(k) for _, _, _, k, _ in p.terms)} for p in deferred(tr)]
