"""Pass ``zero-fill`` (per written function, run by :func:`gen.cwriter.write_function`):
an output whose ``+0.0`` stores are at least ``config.zero_fill_fraction`` of its
entries is zero-filled by one loop at the top of the entry point and loses those stores
(a ``-0.0`` keeps its store); the derivative outputs are zero off the tree's
ancestor-descendant pairs, the products' bases entirely.  The decision is recorded in
:attr:`gen.cwriter.Written.filled`.

A kernel's entry point (not a driver's functions, not a product kernel's head) gets its
fills and every store of a constant in a function of their own, ``<kernel>_zero(res)``
(:func:`constant_stores`): what does not depend on the inputs, written once by the
public ``<symbol>_zero_outputs`` and before each call of the full ``<symbol>``; the
kernel then writes only the entries that depend on the inputs, which is what
``<symbol>_update`` calls on outputs that already hold the rest (as Pinocchio's Data
keeps its tensors; talos ``rnea_second_order``: 4 MB of outputs, 94 % zeros)."""
from __future__ import annotations

from collections import Counter

import casadi as ca

from .config import CodegenConfig

#: the C literal of +0.0 as :func:`gen.cwriter.c_double` writes it
ZERO = (0.0).hex()


def _zero_store(st) -> int | None:
    """The output index a ``+0.0`` store writes, else None."""
    return int(st.dest[4:st.dest.index("]")]) if st.writes is None and st.expr == ZERO else None


def filled_outputs(steps: list, f: ca.Function, config: CodegenConfig) -> list[int]:
    """The outputs of ``f`` whose ``+0.0`` stores among ``steps`` are at least
    ``config.zero_fill_fraction`` of their entries, ascending."""
    count = Counter(o for o in map(_zero_store, steps) if o is not None)
    return sorted(o for o, n in count.items() if n >= config.zero_fill_fraction * f.nnz_out(o))


def zero_fills(steps: list, f: ca.Function, config: CodegenConfig) -> tuple[list, list[str]]:
    """``(steps, fills)``: the outputs of :func:`filled_outputs` get one fill loop
    (``fills``, C statements for the top of the entry point) and lose their zero stores
    (``+0.0`` only; a ``-0.0`` keeps its store)."""
    filled = filled_outputs(steps, f, config)
    if not filled:
        return steps, []
    kept = [st for st in steps if _zero_store(st) not in filled]
    fills = [f"    for (int k = 0; k < {f.nnz_out(o)}; ++k)   /* {f.name_out(o)}: mostly zero, filled first */\n"
             f"        res[{o}][k] = 0.0;" for o in filled]
    return kept, fills


def constant_stores(steps: list) -> tuple[list, list]:
    """``(steps, stores)``: the stores of a constant into an output (no work slot or
    input read) moved out of ``steps``, in their order; with the fill loops they are the
    kernel's ``_zero`` function (module docstring)."""
    kept, stores = [], []
    for st in steps:
        constant = st.writes is None and not st.reads and "arg[" not in st.expr
        (stores if constant else kept).append(st)
    return kept, stores
