"""Per-state throughput of batched kernels (issue 15 §1): the scalar kernel against the
batched kernels of N lanes (:func:`gen.build` with ``batch=N``) in one C program, same
flags (:data:`gen.bench.pinshim.BENCH_FLAGS`), interleaved (``batch.c.j2``); Pinocchio
from :func:`gen.bench.harness.benchmark`'s run of the scalar kernel against it.

``python -m gen.bench.batch [ROBOT ALGORITHM [SPEC]] ...`` prints the markdown table of
``bench/reports/2026-11-25-batched-kernels.md`` (default: talos aba, rnea and
constrained_aba with K = 3 on both soles).

Timing (docs/DESIGN.md §5): ``n_states`` random states (fixed seed, :func:`harness.make_states`),
``warmup`` states per implementation, then ``rounds`` rounds; a round times
``per_sample`` states through each implementation (one call per state for the scalar
kernel, one call per N states for a batched one), order rotating; a sample is its time
divided by ``per_sample``: ns per state.  Before timing, every lane of every batched call
is compared with the scalar kernel on the same state (reported, never timed).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from ..api import get_algorithm
from ..build import build, compile_flags
from ..errors import RbdgenError, run_tool
from ..model import Model
from ..robots import load_robot
from . import pinshim
from .harness import (
    _compile_program,
    _env,
    _stats,
    benchmark,
    cache_root,
    machine_info,
    make_states,
)

TEMPLATE = "batch.c.j2"
SOLES = "6D:left_sole_link,6D:right_sole_link"
#: the report's rows: (robot, algorithm, constraints, options)
DEFAULT_ROWS = (("talos", "aba", None, {}), ("talos", "rnea", None, {}),
                ("talos", "constrained_aba", SOLES, {"iterations": 3}))


def batch_benchmark(robot, algorithm: str, constraints=None, *, lanes=(4, 8), n_states: int = 256,
                    rounds: int = 200, per_sample: int = 128, warmup: int = 1024, seed: int = 0,
                    pinocchio: bool = True, progress=None, **options) -> dict:
    """Time the scalar kernel and the ``lanes``-lane batched kernels of ``algorithm``;
    returns medians (ns per state), p10/p90, ratios scalar/batched and, with
    ``pinocchio``, Pinocchio's time per state scaled into this run (its median ratio to
    the scalar kernel in :func:`benchmark`'s interleaved run times this run's scalar
    median; not with ``flags``).  ``options``: the algorithm's, and the build's ``flags``
    (both kernels), ``batch_trig`` (the batched ones) and ``scalar_trig`` (the scalar one)."""
    say = progress or (lambda s: None)
    lanes = tuple(int(n) for n in lanes)
    if any(n_states % n or per_sample % n for n in lanes):
        raise RbdgenError("n_states and per_sample must be multiples of every lane count")
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    flags, trig = options.get("flags"), options.get("batch_trig", "vector")     # build options
    algo_options = {k: v for k, v in options.items() if k not in ("flags", "batch_trig", "scalar_trig")}
    scalar = build(model, algorithm, cset, flags=flags, scalar_trig=options.get("scalar_trig", "hoisted"),
                   progress=progress, **algo_options)
    batched = [build(model, algorithm, cset, flags=flags, batch=n, batch_trig=trig, progress=progress,
                     **algo_options) for n in lanes]
    fn = scalar.function
    inputs, outputs, off = [], [], 0
    for x in fn["inputs"]:
        inputs.append({"name": x["name"], "offset": off, "size": x["size"]})
        off += x["size"]
    stride, off = off, 0
    for y in fn["outputs"]:
        outputs.append({"name": y["name"], "offset": off})
        off += y["size"]
    program = f"bench_batch_{fn['symbol']}"
    ctx = {"program": program, "robot": model.name, "algorithm": algorithm,
           "constraints": getattr(cset, "spec", None), "n_states": n_states, "stride": stride,
           "out_size": off, "inputs": inputs, "outputs": outputs,
           "scalar": {"symbol": scalar.symbol, "header": scalar.manifest["header"]},
           "batched": [{"symbol": k.symbol, "header": k.manifest["header"], "lanes": n, "key": f"b{n}",
                        "name": f"batch{n}"} for k, n in zip(batched, lanes)]}
    source = _env().get_template(TEMPLATE).render(ctx)
    root = cache_root() / program
    root.mkdir(parents=True, exist_ok=True)
    program_c = root / f"{program}.c"
    if not program_c.exists() or program_c.read_text() != source:
        program_c.write_text(source)
    kernels = [scalar, *batched]
    say(f"compiling {program}")
    # the kernels' sources are compiled into the program: with the flags they were built with
    program_flags = None if flags is None else [*compile_flags(flags), "-DNDEBUG"]
    exe, _ = _compile_program(root, [program_c, *[s for k in kernels for s in k.sources]],
                              [k.path for k in kernels], False, None, None, progress, flags=program_flags)
    states = make_states(model, [(x["name"], x["size"]) for x in inputs], n_states, seed)
    with tempfile.TemporaryDirectory(prefix="rbdgen-batch-") as tmp:
        path = Path(tmp) / "states.bin"
        path.write_bytes(states.tobytes())
        say(f"running {program}")
        raw = json.loads(run_tool([str(exe), str(path), str(rounds), str(per_sample), str(warmup)], f"running {program}"))
    impls = {t["name"]: {**_stats(t["samples_ns"]), "rc": t["rc"]} for t in raw["timing"]}
    med = impls["scalar"]["median_ns"]
    verify = {name: {**v, "max_rel_diff": (v["max_abs_diff"] if v["max_abs_diff"] >= 0 else float("nan"))
                     / max(1.0, v["max_abs_ref"])} for name, v in raw["verify"].items()}
    result = {"robot": model.name, "algorithm": algorithm, "constraints": ctx["constraints"],
              "options": options, "nv": model.nv, "ops": (fn["opcount"] or {}).get("total"),
              "implementations": impls, "verify": verify,
              "ratios": {f"scalar/{name}": med / impls[name]["median_ns"] for name in impls if name != "scalar"},
              "settings": {"n_states": n_states, "rounds": rounds, "per_sample": per_sample, "warmup": warmup,
                           "seed": seed, "flags": " ".join(program_flags or pinshim.BENCH_FLAGS)}}
    if pinocchio and flags is None:      # (its ratio is to the scalar kernel of the default flags)
        result["pinocchio"] = _pinocchio_per_state(model, algorithm, cset, med, rounds, progress, algo_options)
    return result


def _pinocchio_per_state(model, algorithm, cset, scalar_median: float, rounds: int, progress, options) -> dict:
    """Pinocchio's time per state scaled into a batch run: its median ratio to the scalar
    kernel in :func:`benchmark`'s interleaved run times ``scalar_median``; or why it was
    not run."""
    try:
        r = benchmark(model, algorithm, cset, against=("pinocchio",), rounds=rounds, batch=100,
                      progress=progress, **options)
    except RbdgenError as e:
        return {"skipped": str(e)}
    if "pinocchio/specialized" not in r["ratios"]:
        return {"skipped": r["skipped"].get("pinocchio", "not run")}
    ratio = r["ratios"]["pinocchio/specialized"]
    return {"function": r["implementations"]["pinocchio"].get("function"), "ratio_to_scalar": ratio,
            "median_ns_scaled": ratio * scalar_median, "max_rel_diff": r["verify"]["max_rel_diff"].get("pinocchio")}


def configuration(r: dict) -> str:
    """A result's build configuration, as the tables show it ("" for the default one)."""
    o = r["options"]
    return ", ".join(([f"batched sin/cos {o['batch_trig']}"] if "batch_trig" in o else [])
                     + ([f"scalar sin/cos {o['scalar_trig']}"] if "scalar_trig" in o else [])
                     + (["-ffp-contract=off"] if "-ffp-contract=off" in (o.get("flags") or "") else []))


def markdown(results: list[dict]) -> str:
    """The report's table: ns per state (median, p10-p90) and scalar/batched ratios."""
    lanes = [k for k in results[0]["implementations"] if k != "scalar"]
    head = ["robot", "algorithm", "ops", "scalar ns/state"] + [f"{n} ns/state" for n in lanes] + \
        [f"scalar/{n}" for n in lanes] + ["Pinocchio ns/state (x N calls)", "Pinocchio/" + lanes[-1],
                                           "max lane diff (rel.)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        im = r["implementations"]

        def cell(name):
            s = im[name]
            return f"{s['median_ns']:.0f} ({s['p10_ns']:.0f}-{s['p90_ns']:.0f})"

        name = r["algorithm"] + (f" ({r['constraints']}, K={r['options'].get('iterations')})" if r["constraints"] else "")
        name += f"; {configuration(r)}" if configuration(r) else ""
        pin = r.get("pinocchio", {})
        pin_ns = f"{pin['median_ns_scaled']:.0f}" if "median_ns_scaled" in pin else pin.get("skipped", "-")
        pin_ratio = f"{pin['median_ns_scaled'] / im[lanes[-1]]['median_ns']:.2f}" if "median_ns_scaled" in pin else "-"
        diff = max(v["max_rel_diff"] for v in r["verify"].values())
        row = [r["robot"], name, str(r["ops"]), cell("scalar"), *[cell(n) for n in lanes],
               *[f"{r['ratios'][f'scalar/{n}']:.2f}" for n in lanes], pin_ns, pin_ratio, f"{diff:.2g}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gen.bench.batch", description=__doc__.split("\n\n")[0])
    p.add_argument("rows", nargs="*", help="ROBOT:ALGORITHM[:ITERATIONS][@SPEC] (default: the report's rows)")
    p.add_argument("--lanes", default="4,8")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--no-pinocchio", action="store_true")
    p.add_argument("--json", help="write the raw results here")
    args = p.parse_args(argv)
    rows = list(DEFAULT_ROWS)
    if args.rows:
        rows = []
        for spec in args.rows:
            head, _, cons = spec.partition("@")
            robot, algorithm, *it = head.split(":")
            rows.append((robot, algorithm, cons or None, {"iterations": int(it[0])} if it else {}))

    def say(msg):
        print(f"rbdgen: {msg}", file=sys.stderr)

    t0 = time.perf_counter()
    results = [batch_benchmark(robot, algorithm, cons, lanes=[int(n) for n in args.lanes.split(",")],
                               rounds=args.rounds, pinocchio=not args.no_pinocchio, progress=say, **opts)
               for robot, algorithm, cons, opts in rows]
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "results": results}, indent=1))
    print(markdown(results))
    say(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
