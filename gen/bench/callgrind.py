"""Instruction counts per call with ``valgrind --tool=callgrind`` (issue 4: the repeatable
measure on a noisy machine, next to the wall-clock benchmark).

For each robot and algorithm one small C program calls the specialised kernel and the
generic C ``n_calls`` times each on precomputed random states; callgrind's inclusive
instruction count (Ir) of each entry point divided by its number of calls is the cost per
call.  Op counts (:mod:`opcount`) give the arithmetic in the specialised graph, so
``ops / Ir`` says how much of what the CPU executes is arithmetic rather than loads,
stores and control.

valgrind does not decode AVX-512, so these programs are built for ``x86-64-v3`` (AVX2,
FMA) rather than ``-march=native``; the counts are of the same code modulo vector width
(or for x86-64-v2 where valgrind cannot decode the x86-64-v3 build, :data:`FALLBACK_MARCH`;
the table's *target* column says which).

    python -m gen.bench.callgrind [--robots talos,solo12,panda] [--algorithms rnea,aba]
                                  [--calls N] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from opcount.api import opcount

from ..algorithms import in_report
from ..api import get_algorithm
from ..build import build
from ..errors import RbdgenError
from ..generic import INCLUDE_DIR, SOURCES
from ..generic.serialize import model_to_c
from ..robots import load_robot
from .harness import make_states

FLAGS = ("-O3", "-march=x86-64-v3", "-DNDEBUG")
#: the target a count falls back to when valgrind cannot decode the x86-64-v3 program
#: (valgrind 3.19 stops with SIGILL on the register form of VEX ``vmovq``, opcode 66 0F D6,
#: which gcc 12 emits at x86-64-v3 where the vector sin/cos routine's lanes go to integer
#: registers); SSE4.2, no AVX or FMA: more instructions for the same kernel
FALLBACK_MARCH = "x86-64-v2"
MAIN = r"""
#include <stdio.h>
#include "{header}"
#include "rbg.h"
{model_c}
static const double states[{ns}][{stride}] = {{ {states} }};
static double out_spec[{out_size}], out_gen[{out_size}];
static double work_spec[{work_spec} + 1], work_gen[{work_gen} + 1];

int main(void)
{{
    int i, rc = 0;
    for (i = 0; i < {calls}; ++i) {{
        const double *s = states[i % {ns}];
        rc |= {spec_call};
    }}
    for (i = 0; i < {calls}; ++i) {{
        const double *s = states[i % {ns}];
        rc |= {gen_call};
    }}
    printf("%d %g %g\n", rc, out_spec[0], out_gen[0]);
    return rc != 0;
}}
"""


def _args(inputs, outputs, out_name):
    offs, o = [], 0
    for _, size in inputs:
        offs.append(o)
        o += size
    ins = ", ".join(f"s + {k}" for k in offs)
    outs, o = [], 0
    for size in outputs:
        outs.append(f"{out_name} + {o}")
        o += size
    return ins, ", ".join(outs)


def count(robot: str, algorithm: str, calls: int = 2000, n_states: int = 16, seed: int = 0,
          march: str = "x86-64-v3", **build_options) -> dict:
    """Instructions per call of the specialised and the generic C for one algorithm.
    ``build_options`` go to :func:`gen.build.build` (e.g. ``scalar_trig="vector"``).
    ``ir_specialized_self``: the specialised call's instructions outside any callee (libm's
    sin and cos are the callees of a scalar kernel), of which ``ir_entry_self`` the entry
    point's own (its input and output checks), ``ir_specialized_callees`` the rest;
    ``march``: the target; where valgrind cannot decode the program built for it, the
    count is of the :data:`FALLBACK_MARCH` build, and ``march`` in the result says which."""
    if shutil.which("valgrind") is None:
        raise RbdgenError("valgrind is not installed (apt install valgrind)")
    generic = get_algorithm(algorithm).generic
    if generic is None or get_algorithm(algorithm).constrained:
        raise RbdgenError(f"callgrind counts unconstrained algorithms with generic C; not {algorithm}")
    model = load_robot(robot)
    kernel = build(model, algorithm, **build_options)
    fn = kernel.manifest["functions"][0]
    inputs = [(x["name"], int(x["size"])) for x in fn["inputs"]]
    out_sizes = [int(y["size"]) for y in fn["outputs"]]
    states = make_states(model, inputs, n_states, seed)
    ins, outs_spec = _args(inputs, out_sizes, "out_spec")
    _, outs_gen = _args(inputs, out_sizes, "out_gen")
    source = MAIN.format(
        header=kernel.manifest["header"], model_c=model_to_c(model, "cg_model"), ns=n_states,
        stride=states.shape[1], states=", ".join(f"{{{', '.join(repr(float(x)) for x in row)}}}" for row in states),
        out_size=sum(out_sizes), work_spec=int(fn["work_size"]), work_gen=int(generic.work(model.nbodies, model.nv, 0)),
        calls=calls, spec_call=f"{fn['symbol']}({ins}, {outs_spec}, work_spec)",
        gen_call=f"{generic.entry}(&cg_model, {ins}, {outs_gen}, work_gen)")
    try:
        text, self_text = _callgrind(source, kernel, march)
    except _IllegalInstruction:
        if march == FALLBACK_MARCH:
            raise RbdgenError(f"valgrind cannot decode the {robot}/{algorithm} program even at {march}") from None
        march = FALLBACK_MARCH
        text, self_text = _callgrind(source, kernel, march)
    ir = {name: _ir(text, sym) / calls for name, sym in (("specialized", fn["symbol"]), ("generic", generic.entry))}
    # the public entry point's own code (checks) and the kernel function's, without callees
    entry = _ir(self_text, fn["symbol"], required=False) / calls
    own = entry + _ir(self_text, _kernel_symbol(fn["symbol"]), required=False) / calls
    ops = opcount(model, algorithm)["total"]
    return {"robot": robot, "algorithm": algorithm, "march": march, "ops": ops, "ir_specialized": ir["specialized"],
            "ir_specialized_self": own, "ir_entry_self": entry, "ir_specialized_callees": ir["specialized"] - own,
            "ir_generic": ir["generic"], "ratio": ir["generic"] / ir["specialized"],
            "ops_per_ir": ops / ir["specialized"]}


class _IllegalInstruction(Exception):
    """valgrind stopped the program with SIGILL: an instruction it does not decode."""


def _callgrind(source: str, kernel, march: str) -> tuple[str, str]:
    """Compile ``source`` with the kernel and the generic C for ``march``, run it under
    callgrind; ``callgrind_annotate``'s inclusive and exclusive listings."""
    with tempfile.TemporaryDirectory(prefix="rbdgen-cg-") as tmp:
        tmp = Path(tmp)
        (tmp / "main.c").write_text(source)
        exe = tmp / "main"
        flags = [f if not f.startswith("-march=") else f"-march={march}" for f in FLAGS]
        cmd = ["gcc", *flags, "-I", str(kernel.path), "-I", str(INCLUDE_DIR), str(tmp / "main.c"),
               *[str(s) for s in kernel.sources], *[str(s) for s in SOURCES], "-lm", "-o", str(exe)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        out = tmp / "cg.out"
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe)],
                             capture_output=True, text=True)
        if run.returncode == -signal.SIGILL or "unhandled instruction bytes" in run.stderr:
            raise _IllegalInstruction
        if run.returncode != 0:
            raise RbdgenError(f"valgrind --tool=callgrind failed ({run.returncode}): {run.stderr.strip()[-300:]}")
        return tuple(subprocess.run(["callgrind_annotate", f"--inclusive={inc}", str(out)],
                                    check=True, capture_output=True, text=True).stdout for inc in ("yes", "no"))


def _kernel_symbol(entry: str) -> str:
    """The kernel function a scalar entry point ``<prefix>`` calls (gen.emit: ``<prefix>_kernel``)."""
    return entry + "_kernel"


def _ir(text: str, sym: str, required: bool = True) -> int:
    """Ir of function ``sym`` in a ``callgrind_annotate`` listing (0 if absent and not required)."""
    m = re.search(r"^\s*([\d,]+)\s+\([^)]*\)\s+\S*:" + re.escape(sym) + r"\s", text, re.M)
    if not m:
        if required:
            raise RbdgenError(f"callgrind output has no entry for {sym}")
        return 0
    return int(m.group(1).replace(",", ""))


def table(rows: list[dict]) -> str:
    lines = ["| robot | algorithm | target | ops (specialized) | Ir/call specialized | Ir/call generic "
             "| generic/specialized (Ir) | ops per Ir (specialized) |",
             "|---|---|---|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['robot']} | {r['algorithm']} | {r.get('march', '')} | {r['ops']} | {r['ir_specialized']:.0f} "
              f"| {r['ir_generic']:.0f} | {r['ratio']:.2f} | {r['ops_per_ir']:.2f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gen.bench.callgrind", description=__doc__.split("\n\n")[0])
    p.add_argument("--robots", default="talos,solo12,panda")
    p.add_argument("--algorithms", default=",".join(in_report("callgrind")))
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--out", help="write the markdown table to this file")
    a = p.parse_args(argv)
    rows = []
    for robot in a.robots.split(","):
        for alg in a.algorithms.split(","):
            rows.append(count(robot, alg, a.calls))
            print(f"{robot} {alg}: generic/specialized {rows[-1]['ratio']:.2f} (Ir)", file=sys.stderr, flush=True)
    text = table(rows)
    if a.out:
        Path(a.out).write_text(f"# Instructions per call (valgrind --tool=callgrind)\n\n"
                               f"`python -m gen.bench.callgrind --robots {a.robots} --algorithms {a.algorithms} "
                               f"--calls {a.calls}`; gcc `{' '.join(FLAGS)}`, {a.calls} calls each over 16 "
                               f"random states; inclusive Ir of the entry point / calls.\n\n{text}")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
