"""Scaling studies on chains and balanced binary trees (Sathya 2024 §V and Fig. 3;
Featherstone 2005 §4.2): op counts and specialised-C timings of the constrained solvers
and the Delassus algorithms against the number of links, with fitted growth exponents.

Mechanisms (the papers' set-ups):

* ``chain:N`` with a 6D weld on the last link's tip (``6D:link<N>_tip``): m = 6 for
  every N, so the growth is in n alone;
* ``bintree:N`` (branches of three links, balanced) with a 3D connect constraint on every
  leaf (``3D:leaf<k>``): m = 3 x leaves grows with n, which separates the O(n + m)
  solvers from the ones cubic in m.

For each case and algorithm: the op count with K = 1 and K = 3 proximal iterations
(one count for the non-iterative Delassus algorithms), the pipeline times (trace +
count, build), and with ``bench`` the median time of the specialised C (K as counted).
The growth exponent is the least-squares slope of log(cost) against log(n).

    rbdgen scaling [--chains 10,20,...] [--trees 12,24,...] [--algorithms ...]
                   [--iterations 1,3] [--no-bench] [--out DIR]
"""
from __future__ import annotations

import datetime
import json
import math
import sys
import time
from pathlib import Path

from opcount.api import opcount

from .algorithms import ALGORITHMS as REGISTRY
from .algorithms import in_report
from .bench.harness import benchmark
from .constraint_spec import parse_constraints
from .errors import RbdgenError
from .robots import load_robot

ALGORITHMS = tuple(in_report("scaling"))
CHAINS = (10, 20, 40, 60, 80, 100)
TREES = (12, 24, 48, 72, 102)
ITERATIONS = (1, 3)
MAX_TIMED_OPS = 600_000
"""Kernels above this many operations are counted but not compiled and timed.  Since
gen.cwriter splits long kernels into parts, gcc's time grows linearly: the largest point
of the default study, chain:100 prox_ltl K = 3 (520k operations, 105 parts), traces in
11 s, emits in 9 s and compiles in 46 s with 864 MB (-O3 -march=native; one function,
140k operations already took ~2 min)."""
REPORT_DIR = Path("bench") / "reports" / "scaling"     # relative: run from the repository root


def case(family: str, n: int):
    """``(model, constraint spec)`` of a study case."""
    if family == "chain":
        model = load_robot(f"chain:{n}")
        return model, f"6D:link{n}_tip"
    if family == "tree":
        model = load_robot(f"bintree:{n}")
        leaves = [f.name for f in model.frames if f.name.startswith("leaf")]
        return model, ",".join(f"3D:{name}" for name in leaves)
    raise RbdgenError(f"unknown mechanism family '{family}' (choose chain or tree)")


def fit_exponent(ns, costs) -> float | None:
    """Least-squares slope of ``log(cost)`` against ``log(n)`` (None with < 2 points)."""
    pts = [(math.log(n), math.log(c)) for n, c in zip(ns, costs) if c and c > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def _available(algorithms):
    missing = [a for a in algorithms if a not in REGISTRY]
    if missing:
        raise RbdgenError(f"unknown algorithm(s) {', '.join(missing)} for the scaling study")
    return [(a, REGISTRY[a]) for a in algorithms]


def _iterative(name: str) -> bool:
    """True for the proximal solvers (they take an iteration count K)."""
    return REGISTRY[name].iterative


def study(chains=CHAINS, trees=TREES, algorithms=ALGORITHMS, iterations=ITERATIONS, bench: bool = True,
          rounds: int = 50, batch: int = 20, max_timed_ops: int = MAX_TIMED_OPS, progress=None) -> dict:
    """Run the study; returns ``{"cases": [...], "fits": {...}, "settings": {...}}``."""

    say = progress or (lambda s: None)
    algos = _available(algorithms)
    cases = []
    for family, sizes in (("chain", chains), ("tree", trees)):
        for n in sizes:
            model, spec = case(family, n)
            m = parse_constraints(model, spec).m
            for name, _ in algos:
                ks = iterations if _iterative(name) else (None,)
                for k in ks:
                    opts = {} if k is None else {"iterations": k}
                    label = f"{model.name} {name}" + ("" if k is None else f" K={k}")
                    t0 = time.perf_counter()
                    total = opcount(model, name, constraints=spec, **opts)["total"]
                    t_count = time.perf_counter() - t0
                    row = {"family": family, "n": n, "nv": model.nv, "m": m, "algorithm": name,
                           "iterations": k, "ops": total, "seconds_trace_count": round(t_count, 2)}
                    if bench and total > max_timed_ops:
                        row["not_timed"] = f"{total} ops > {max_timed_ops}"
                    elif bench:

                        t0 = time.perf_counter()
                        r = benchmark(model, name, spec, against=(), rounds=rounds, batch=batch,
                                      warmup=batch, **opts)
                        row["median_us"] = r["implementations"]["specialized"]["median_ns"] / 1000.0
                        row["seconds_build"] = r["seconds"]["build_kernel"]
                        row["seconds_bench_total"] = round(time.perf_counter() - t0, 2)
                    timed_here = "median_us" in row
                    say(f"{label}: {total} ops" + (f", {row['median_us']:.2f} us" if timed_here else "")
                        + f" ({row['seconds_trace_count']} s to trace and count"
                        + (f", {row['seconds_build']} s to build" if timed_here else "")
                        + (", not timed" if "not_timed" in row else "") + ")")
                    cases.append(row)
    return {"cases": cases, "fits": fits(cases),
            "settings": {"chains": list(chains), "trees": list(trees), "algorithms": list(algorithms),
                         "iterations": list(iterations), "bench": bench, "rounds": rounds, "batch": batch,
                         "max_timed_ops": max_timed_ops}}


def _series(cases, family, algorithm, k, key):
    pts = [(c["n"], c[key]) for c in cases if c["family"] == family and c["algorithm"] == algorithm
           and c["iterations"] == k and c.get(key) is not None]
    return sorted(pts)


def fits(cases) -> list[dict]:
    out = []
    keys = sorted({(c["family"], c["algorithm"], c["iterations"]) for c in cases},
                  key=lambda t: (t[0], t[1], -1 if t[2] is None else t[2]))
    for family, algorithm, k in keys:
        row = {"family": family, "algorithm": algorithm, "iterations": k}
        for key, name in (("ops", "ops_exponent"), ("median_us", "time_exponent")):
            pts = _series(cases, family, algorithm, k, key)
            row[name] = fit_exponent([p[0] for p in pts], [p[1] for p in pts])
        out.append(row)
    return out


def _fmt(x, digits=2):
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def markdown(result: dict, date: str | None = None) -> str:
    cases, s = result["cases"], result["settings"]
    lines = [f"# Scaling on chains and binary trees{' — ' + date if date else ''}", "",
             "Generated by `rbdgen scaling` — do not edit. Chains carry a 6D weld on the last link's tip "
             "(m = 6); balanced binary trees (branches of three links) carry a 3D connect constraint on every "
             "leaf (m = 3 x leaves). Op counts of the traced graphs (docs/DESIGN.md §4 op classes); times are medians "
             "of the specialised C (one process per kernel, "
             f"{s['rounds']} rounds x {s['batch']} calls). Exponent: least-squares slope of log(cost) "
             "against log(n) (Sathya 2024 Fig. 3; Featherstone 2005 §4.2)."
             + (f" Kernels above {s.get('max_timed_ops', MAX_TIMED_OPS)} operations are counted, not compiled "
                "(marked *)." if s["bench"] else "")
             + (f" {s['merged']}" if s.get("merged") else ""), ""]
    lines += ["## Growth exponents", "", "| mechanism | algorithm | K | ops exponent | time exponent |",
              "|---|---|--:|--:|--:|"]
    for f in result["fits"]:
        lines.append(f"| {f['family']} | {f['algorithm']} | {_fmt(f['iterations'])} | {_fmt(f['ops_exponent'])} "
                     f"| {_fmt(f['time_exponent'])} |")
    for family in ("chain", "tree"):
        rows = [c for c in cases if c["family"] == family]
        if not rows:
            continue
        lines += ["", f"## {family}s: op counts" + (" and median times (µs)" if s["bench"] else ""), ""]
        cols = sorted({(c["algorithm"], c["iterations"]) for c in rows},
                      key=lambda t: (s["algorithms"].index(t[0]), -1 if t[1] is None else t[1]))
        head = ["n", "nv", "m"] + [a + ("" if k is None else f" K={k}") for a, k in cols]
        lines += ["| " + " | ".join(head) + " |", "|" + "--:|" * len(head)]
        for n in sorted({c["n"] for c in rows}):
            at = {(c["algorithm"], c["iterations"]): c for c in rows if c["n"] == n}
            first = next(iter(at.values()))
            cells = [str(n), str(first["nv"]), str(first["m"])]
            for key in cols:
                c = at.get(key)
                cell = "" if c is None else str(c["ops"])
                if c is not None and c.get("median_us") is not None:
                    cell += f" · {c['median_us']:.2f}"
                elif c is not None and c.get("not_timed"):
                    cell += "*"
                cells.append(cell)
            lines.append("| " + " | ".join(cells) + " |")
    slow = sorted(cases, key=lambda c: -(c["seconds_trace_count"] + c.get("seconds_build", 0.0)))[:5]
    lines += ["", "## Pipeline cost of the largest cases", "",
              "| case | algorithm | K | ops | trace + count (s) | build (s) |", "|---|---|--:|--:|--:|--:|"]
    for c in slow:
        lines.append(f"| {c['family']} n={c['n']} | {c['algorithm']} | {_fmt(c['iterations'])} | {c['ops']} "
                     f"| {c['seconds_trace_count']:.1f} | {_fmt(c.get('seconds_build'), 1)} |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path, key: str = "ops") -> Path | None:
    """Log-log plot of ``key`` against n: one panel per mechanism and K."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cases = [c for c in result["cases"] if c.get(key) is not None]
    if not cases:
        return None
    ks = [k for k in result["settings"]["iterations"]]
    families = [f for f in ("chain", "tree") if any(c["family"] == f for c in cases)]
    fig, axes = plt.subplots(len(families), len(ks), figsize=(5.2 * len(ks), 4.0 * len(families)),
                             squeeze=False)
    for r, family in enumerate(families):
        for col, k in enumerate(ks):
            ax = axes[r, col]
            for name in result["settings"]["algorithms"]:
                kk = k if _iterative(name) else None
                pts = _series(cases, family, name, kk, key)
                if pts:
                    ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", label=name, ms=3)
            ax.set_title(f"{family}s, K = {k} ({'6D on the tip' if family == 'chain' else '3D on every leaf'})",
                         fontsize=9)
            ax.set_xlabel("links n")
            ax.set_ylabel("operations" if key == "ops" else "median time (µs)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def write(result: dict, out_dir=REPORT_DIR, date: str | None = None) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "scaling.json", "md": out_dir / "scaling.md"}
    paths["json"].write_text(json.dumps(result, indent=1) + "\n")
    paths["md"].write_text(markdown(result, date))
    for key, stem in (("ops", "scaling-ops"), ("median_us", "scaling-time")):
        png = plot(result, out_dir / f"{stem}.png", key)
        if png is not None:
            paths[stem] = png
    return paths


def _ints(text: str, what: str, least: int) -> tuple[int, ...]:
    try:
        out = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise RbdgenError(f"--{what} takes a comma list of integers, got '{text}'") from None
    if any(n < least for n in out):
        raise RbdgenError(f"--{what}: every value must be at least {least}, got '{text}'")
    return out


def add_parser(subparsers):
    p = subparsers.add_parser("scaling", help="op counts and timings of the constrained and Delassus "
                                              "algorithms on chains and binary trees (Sathya 2024 Fig. 3)")
    p.add_argument("--chains", default=",".join(map(str, CHAINS)), help="chain sizes (links)")
    p.add_argument("--trees", default=",".join(map(str, TREES)), help="binary-tree sizes (links)")
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--iterations", default=",".join(map(str, ITERATIONS)), help="proximal iteration counts K")
    p.add_argument("--no-bench", action="store_true", help="op counts only (no compilation, no timing)")
    p.add_argument("--max-timed-ops", type=int, default=MAX_TIMED_OPS,
                   help=f"count but do not compile kernels above this many operations (default {MAX_TIMED_OPS})")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--out", "-o", default=str(REPORT_DIR), help=f"report folder (default {REPORT_DIR})")
    p.add_argument("--format", choices=("md", "json"), default="md", help="what to print (default md)")
    p.add_argument("--quiet", "-q", action="store_true")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    progress = None if args.quiet else (lambda s: print(f"rbdgen: {s}", file=sys.stderr, flush=True))
    chains = _ints(args.chains, "chains", 2) if args.chains else ()
    trees = _ints(args.trees, "trees", 2) if args.trees else ()
    algorithms = tuple(a.strip() for a in args.algorithms.split(",") if a.strip())
    iterations = _ints(args.iterations, "iterations", 1) if args.iterations else ITERATIONS
    result = study(chains, trees, algorithms, iterations, bench=not args.no_bench, rounds=args.rounds,
                   batch=args.batch, max_timed_ops=args.max_timed_ops, progress=progress)
    date = datetime.date.today().isoformat()
    result["date"] = date
    paths = write(result, args.out, date)
    if progress:
        progress("wrote " + ", ".join(str(p) for p in paths.values()))
    print(json.dumps(result, indent=1) if args.format == "json" else markdown(result, date), end="")
    return 0
