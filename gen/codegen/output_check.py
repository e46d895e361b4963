"""Pass ``output_check``: which entries of each output the wrapper checks for inf and NaN.

The wrapper refuses a call whose outputs hold an inf or NaN
(``RBDGEN_ERR_NONFINITE_OUTPUT``).  Only an entry the kernel stores from a non-constant
expression can hold one: a zero-filled or constant entry is the finite literal the
writer wrote (a constant inf or NaN in the tape is kept in the list), and an entry
storing the same tape node as an earlier entry holds the same bits (M is symmetric: the
kernel stores one node at (i, j) and (j, i)).  So per output of the kernel function the
list is the first position of each distinct non-constant node, read from the tape the
writers write (:func:`gen.cwriter._steps` walks the same one), as ``(start, length)``
runs; runs at most ``config.check_gap`` entries apart are merged (checking the finite
entries between costs less than one more run).  The wrapper checks each run by its own
call, which gcc unrolls for its constant length, up to ``config.check_max_runs`` runs
(the wrapper's code grows with them); an output of more runs is checked by one loop over
a static table of its runs (:func:`tabled`).  An output whose runs skip fewer than
``config.check_run_entries`` entries per run (a run costs about what checking that many
more entries in one loop does) is checked whole (``None``); the list of an output with
no non-constant entry is empty.

Only a kernel whose one function writes the public outputs gets lists: an early-exit
driver (three functions, and the iteration count) and a product kernel (its loops check
what they form) keep the whole-output check.  A batched kernel's wrapper checks the
runs' entries of every lane (lanes innermost) before it looks lane by lane.  Recorded in :attr:`gen.codegen.plan.KernelPlan.output_checks`.
"""
from __future__ import annotations

import math

import casadi as ca

from .plan import KernelPlan


def checked_entries(f: ca.Function) -> list[list[int]]:
    """Per output of ``f``: the ascending positions of the first store of each distinct
    non-constant tape node (and of any non-finite constant)."""
    writer: dict[int, int] = {}              # work slot -> the instruction that wrote it last
    seen: set[int] = set()
    out: list[list[int]] = [[] for _ in range(f.n_out())]
    for k in range(f.n_instructions()):
        op, ins, res = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op != ca.OP_OUTPUT:
            if res:
                writer[res[0]] = k
            continue
        node = writer[ins[0]]
        if f.instruction_id(node) == ca.OP_CONST and math.isfinite(f.instruction_constant(node)):
            continue
        if node not in seen:
            seen.add(node)
            out[res[0]].append(res[1])
    return [sorted(p) for p in out]


def runs(positions: list[int], gap: int) -> list[tuple[int, int]]:
    """``positions`` (ascending) as ``(start, length)`` runs, merging two runs whose
    gap (entries between them) is at most ``gap``."""
    out: list[list[int]] = []
    for p in positions:
        if out and p - (out[-1][0] + out[-1][1]) <= gap:
            out[-1][1] = p - out[-1][0] + 1
        else:
            out.append([p, 1])
    return [(s, n) for s, n in out]


def output_checks(f: ca.Function, gap: int, run_entries: int) -> list[list[tuple[int, int]] | None]:
    """Per output of ``f``: its check runs, or None (checked whole) where they skip fewer
    than ``run_entries`` entries per run."""
    lists = []
    for o, positions in enumerate(checked_entries(f)):
        r = runs(positions, gap)
        skipped = int(f.nnz_out(o)) - sum(n for _, n in r)
        lists.append(None if skipped < run_entries * len(r) else r)
    return lists


def tabled(check_runs: list[tuple[int, int]] | None, max_runs: int) -> bool:
    """Whether the wrapper checks these runs by a loop over a static table of them
    rather than one unrolled call each: more than ``max_runs`` runs (rnea_second_order's
    tensors: solo12 ~160 runs per output holding 9 % of its 5832 entries, talos 5412 runs
    holding 6 % of 500k)."""
    return check_runs is not None and len(check_runs) > max_runs


def run(plan: KernelPlan) -> None:
    """Record ``plan.output_checks`` (None: every output checked whole)."""
    if plan.driver is not None or plan.loops:
        plan.output_checks = None
        return
    c = plan.config
    plan.output_checks = output_checks(plan.funcs[0], c.check_gap, c.check_run_entries)
