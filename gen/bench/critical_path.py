"""Latency against throughput: the longest dependency chain of a kernel's instruction tape
(in cycles, from per-operation latencies) next to its operation count, and the run time
of the 2026-11-26 suite, to tell whether a kernel waits on its chain of dependent
operations (more operations per cycle cannot help; a shorter chain can) or on the core's
issue width.

Latencies in cycles of AMD Zen 4 (the suite's machine; Agner Fog, "Instruction tables",
and AMD's software optimisation guide for family 19h): add, sub, mul 3; a mul whose only
user is an add or sub is contracted by gcc into an FMA, 4 for the pair; div 13; sqrt 20.
A libm sin or cos of a joint angle (gcc merges a sin and a cos of one argument into one
``sincos`` call of ~100 instructions) is taken as 40.  The chain is a lower bound of the
run time at any issue width; ``ops / 4`` (two FMA pipes, an FMA two operations) that of
an unbounded-latency machine.

    python -m gen.bench.critical_path [--robots ur5,panda,talos] [--algorithms rnea,nle,crba,aba]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import casadi as ca

from ..codegen.functions import kernel_function as _traced_function
from ..emit import trace_for

LATENCY = {ca.OP_ADD: 3, ca.OP_SUB: 3, ca.OP_MUL: 3, ca.OP_NEG: 1, ca.OP_TWICE: 3, ca.OP_SQ: 3,
           ca.OP_DIV: 13, ca.OP_INV: 13, ca.OP_SQRT: 20, ca.OP_SIN: 40, ca.OP_COS: 40}
#: an FMA (a mul contracted into its one add or sub user): the pair's latency
FMA = 4
#: latency of any other operation (libm calls, comparisons)
OTHER = 20
SUITE = Path(__file__).resolve().parents[2] / "bench" / "reports" / "2026-11-26-suite.json"
#: the core clock measured under load by the emission-order report (GHz)
CLOCK_GHZ = 4.27


def critical_path(f: ca.Function) -> dict:
    """``{"cycles", "ops", "depth"}``: the longest chain of ``f``'s tape in cycles
    (:data:`LATENCY`), its arithmetic operations and the chain's length in operations."""
    n = f.n_instructions()
    ops = [f.instruction_id(k) for k in range(n)]
    ins = [f.instruction_input(k) for k in range(n)]
    outs = [f.instruction_output(k) for k in range(n)]
    writer: dict[int, int] = {}
    producer = []                                   # per instruction: the instructions it reads
    for k in range(n):
        producer.append([writer[a] for a in ins[k] if a in writer] if ops[k] not in (ca.OP_CONST, ca.OP_INPUT) else [])
        if ops[k] != ca.OP_OUTPUT:
            writer[outs[k][0]] = k
    users = [0] * n
    for k in range(n):
        for p in producer[k]:
            users[p] += 1
    fused = [ops[k] == ca.OP_MUL and users[k] == 1 for k in range(n)]
    finish, depth = [0] * n, [0] * n
    arith = 0
    for k in range(n):
        op = ops[k]
        if op in (ca.OP_CONST, ca.OP_INPUT):
            continue
        start = max((finish[p] for p in producer[k]), default=0)
        d = max((depth[p] for p in producer[k]), default=0)
        if op == ca.OP_OUTPUT:
            finish[k], depth[k] = start, d
            continue
        arith += 1
        if op in (ca.OP_ADD, ca.OP_SUB) and any(fused[p] and ops[p] == ca.OP_MUL for p in producer[k]):
            # the contracted mul took no time of its own; the FMA's latency from its inputs
            start = max([finish[p] for p in producer[k] if not fused[p]] +
                        [max((finish[q] for q in producer[p]), default=0) for p in producer[k] if fused[p]],
                        default=0)
            finish[k] = start + FMA
        elif fused[k]:
            finish[k] = start                         # counted in its add's FMA
        else:
            finish[k] = start + LATENCY.get(op, OTHER)
        depth[k] = d + 1
    return {"cycles": max(finish, default=0), "ops": arith, "depth": max(depth, default=0)}


def kernel_function(robot: str, algorithm: str) -> ca.Function:
    return _traced_function("k", trace_for(robot, algorithm))


def suite_ns() -> dict:
    """(robot, algorithm) -> the suite's median ns of the specialised kernel."""
    data = json.loads(SUITE.read_text())
    return {(r["robot"], r["algorithm"]): r["implementations"]["specialized"]["median_ns"] for r in data["results"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gen.bench.critical_path", description=__doc__.split("\n\n")[0])
    p.add_argument("--robots", default="ur5,panda,anymal_c,icub,g1,talos")
    p.add_argument("--algorithms", default="rnea,nle,crba,aba")
    a = p.parse_args(argv)
    measured = suite_ns()
    print("| robot | algorithm | ops | chain (ops) | chain (cycles) | ops / 4 (cycles) | measured (cycles, suite) "
          "| chain / measured |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for robot in a.robots.split(","):
        for alg in a.algorithms.split(","):
            c = critical_path(kernel_function(robot, alg))
            ns = measured.get((robot, alg))
            cyc = ns * CLOCK_GHZ if ns else None
            tail = "- | -" if cyc is None else f"{cyc:.0f} | {c['cycles'] / cyc:.2f}"
            print(f"| {robot} | {alg} | {c['ops']} | {c['depth']} | {c['cycles']} | {c['ops'] / 4:.0f} | {tail} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
