"""A scalar kernel's sines and cosines through libm or together through the vector routine
(:func:`gen.cwriter.hoist_trig`): instructions per call (callgrind), run time against
Pinocchio and ADAM in one program per variant, and the largest difference of the outputs.

The two variants are gen.build's ``scalar_trig="libm"`` and its default ``"hoisted"``.

    python -m gen.bench.trig_hoist [--robots ur5,panda] [--algorithms rnea,nle,crba,aba]
                                   [--repeats 3] [--no-time] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..build import build
from . import harness
from ..robots import load_robot
from .callgrind import count
from .harness import make_states

VARIANTS = ("libm", "hoisted")


def _options(variant: str) -> dict:
    return {"scalar_trig": variant}


def max_difference(robot: str, algorithm: str, n_states: int = 64, seed: int = 1) -> tuple[float, float]:
    """``(hoisted, ulp)``: the largest |hoisted - libm| over every output of ``n_states``
    random states, relative to max(1, |libm|), and as the yardstick of rounding the
    largest change of the libm kernel's outputs when every input moves by one ulp
    (``numpy.nextafter`` away from zero), in the same measure."""
    model = load_robot(robot)
    ref = build(model, algorithm, quiet=True, **_options("libm"))
    hoisted = build(model, algorithm, quiet=True, **_options("hoisted"))
    fn = ref.manifest["functions"][0]
    inputs = [(x["name"], int(x["size"])) for x in fn["inputs"]]
    states = make_states(model, inputs, n_states, seed)

    def outputs(kernel, s):
        args, o = [], 0
        for _, size in inputs:
            args.append(s[o:o + size])
            o += size
        y = kernel(*args)
        return [np.asarray(x) for x in (y if isinstance(y, tuple) else (y,))]

    def rel(a, b):
        return max(float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(x)))) for x, y in zip(a, b))

    worst = ulp = 0.0
    for s in states:
        a = outputs(ref, s)
        worst = max(worst, rel(a, outputs(hoisted, s)))
        ulp = max(ulp, rel(a, outputs(ref, np.nextafter(s, np.copysign(np.inf, s)))))
    return worst, ulp


def measure(robot: str, algorithm: str, repeats: int, time_it: bool, calls: int = 500) -> dict:
    row = {"robot": robot, "algorithm": algorithm}
    for variant in VARIANTS:
        try:
            cg = count(robot, algorithm, calls=calls, **_options(variant))
            row[variant] = {"ir": cg["ir_specialized"], "ir_self": cg["ir_specialized_self"],
                            "ir_callees": cg["ir_specialized_callees"], "ops": cg["ops"]}
        except subprocess.CalledProcessError:
            # valgrind 3.19 stops on some AVX2 encodings gcc picks (SIGILL: the register
            # form of VEX vmovq, 0xC5 0x79 0xD6); the program itself runs
            row[variant] = {"ir": None, "ir_self": None, "ir_callees": None}
        if time_it:
            runs = [_benchmark(robot, algorithm, _options(variant)) for _ in range(repeats)]
            row[variant]["runs"] = [_ratios(r) for r in runs]
    row["max_difference"], row["one_ulp_change"] = max_difference(robot, algorithm)
    return row


def _benchmark(robot: str, algorithm: str, build_options: dict) -> dict:
    """``gen.bench.harness.benchmark`` against Pinocchio and ADAM with the kernel built with
    ``build_options`` (the harness hands its options to the algorithm, which takes none of
    these, so its ``build`` is wrapped for the call)."""
    saved = harness.build
    harness.build = lambda *a, **k: saved(*a, **{**k, **build_options})
    try:
        return harness.benchmark(robot, algorithm, against=("pinocchio", "adam"), rounds=100)
    finally:
        harness.build = saved


def _ratios(result: dict) -> dict:
    """Median ns per call of each implementation and the peers' ratios to the kernel."""
    ns = {name: st["median_ns"] for name, st in result["implementations"].items()}
    return {"ns": ns, **result["ratios"]}


def summary(rows: list[dict]) -> str:
    lines = ["| robot | algorithm | Ir libm / hoisted | callees libm / hoisted | ns libm / hoisted (median of runs) "
             "| Pinocchio / rbdgen libm / hoisted | ADAM / rbdgen libm / hoisted | max rel. diff | one-ulp input change |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        a, b = r["libm"], r["hoisted"]

        def med(v, key):
            xs = [run["ns"]["specialized"] if key == "ns" else run[key] for run in v.get("runs", []) if key in run
                  or key == "ns"]
            return f"{statistics.median(xs):.3g} ({min(xs):.3g}-{max(xs):.3g})" if xs else "-"

        def ir(v, key):
            return "-" if v[key] is None else f"{v[key]:.0f}"

        lines.append(f"| {r['robot']} | {r['algorithm']} | {ir(a, 'ir')} / {ir(b, 'ir')} "
                     f"| {ir(a, 'ir_callees')} / {ir(b, 'ir_callees')} | {med(a, 'ns')} / {med(b, 'ns')} "
                     f"| {med(a, 'pinocchio/specialized')} / {med(b, 'pinocchio/specialized')} "
                     f"| {med(a, 'adam/specialized')} / {med(b, 'adam/specialized')} | {r['max_difference']:.1e} | {r['one_ulp_change']:.1e} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gen.bench.trig_hoist", description=__doc__.split("\n\n")[0])
    p.add_argument("--robots", default="ur5,panda")
    p.add_argument("--algorithms", default="rnea,nle,crba,aba")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-time", action="store_true", help="callgrind and values only")
    p.add_argument("--out", help="write the rows as JSON to this file")
    a = p.parse_args(argv)
    rows = []
    for robot in a.robots.split(","):
        for alg in a.algorithms.split(","):
            rows.append(measure(robot, alg, a.repeats, not a.no_time))
            print(summary(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    print(summary(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
