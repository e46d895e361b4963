"""Issue 31's targets measured: the three examples in Python and in C++ (crocoddyl's built-in
models against rbdgen's), and where a solve's time goes (:func:`problems.breakdown`),
written as one markdown report.  In Python, rbdgen's models are what ``gen.crocoddyl``'s
classes return: the compiled model (the C++ model of ``rbdgen build --crocoddyl`` in a
boost.python extension; crocoddyl's solver calls it in C++) where it can be built, else
the Python model; the Python model (``gen.crocoddyl.Python*``, whose calc and calcDiff
crocoddyl calls per node through boost.python) is measured beside it.

    python examples/crocoddyl/report.py -o bench/reports/<date>-crocoddyl.md [--repeat 11] [--no-cpp]

The C++ numbers come from ``cpp/run.sh`` (built into ``$WORK``, default
/tmp/rbdgen-crocoddyl, on the Python examples' kernels: ``problems.cpp_kernel_folders``),
parsed from the examples' printed report.  Medians of one run of
``--repeat`` solves per model, alternating; the machine's load is recorded with them.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before crocoddyl loads libgomp: README, "OpenMP"
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio  # noqa: E402

import gen.crocoddyl as gc  # noqa: E402
import problems as P  # noqa: E402

HERE = Path(__file__).resolve().parent
#: issue 31: same iterations, cost to 1e-9 relative, trajectories to 1e-7
COST_RTOL, TRAJ_ATOL = 1e-9, 1e-7
FREE = (crocoddyl.DifferentialActionModelFreeFwdDynamics, gc.DifferentialActionModelFreeFwdDynamics)
CONTACT = (crocoddyl.DifferentialActionModelContactFwdDynamics, gc.DifferentialActionModelContactFwdDynamics)
#: the Python models (measured beside the models gen.crocoddyl's classes return)
PYTHON_MODELS = {"panda": gc.PythonDifferentialActionModelFreeFwdDynamics,
                 "solo12": gc.PythonDifferentialActionModelContactFwdDynamics,
                 "talos": gc.PythonDifferentialActionModelContactFwdDynamics}
#: (key, title, builder, classes, horizon, Python target ratio, C++ target ratio); None: reported
PROBLEMS = [("panda", "panda reaching", P.panda_reaching, FREE, 100, 1.3, None),
            ("solo12", "solo12 four 3D feet", P.solo12_base, CONTACT, 50, 0.8, 1 / 1.5),
            ("talos", "talos two 6D soles", P.talos_standing, CONTACT, 50, 0.8, 1 / 1.5)]
TITLES = {key: title for key, title, *_ in PROBLEMS}
#: the C++ examples' executables, in run.sh's order
CPP_ORDER = ["panda", "solo12", "talos"]


def parse_cpp(text: str) -> list[dict]:
    """The C++ examples' printed reports (compare.hpp), in order."""
    runs = []
    pattern = re.compile(r"\(C\+\+, T = (\d+), (\d+) solves each\)\n"
                         r"\s+built-in\s+iterations\s+(\d+)\s+cost (\S+)\s+solve median\s+(\S+) ms \(CPU\s+(\S+) ms\)\n"
                         r"\s+rbdgen\s+iterations\s+(\d+)\s+cost (\S+)\s+solve median\s+(\S+) ms \(CPU\s+(\S+) ms\)\n"
                         r"\s+same iterations: \w+; cost relative difference (\S+); largest trajectory difference "
                         r"(\S+); rbdgen / built-in CPU time (\S+)")
    for m in pattern.finditer(text):
        T, rep, ib, cb, tb, ub, ir, cr, tr, ur, crel, traj, ratio = m.groups()
        runs.append({"T": int(T), "repeat": int(rep), "iterations": {"built-in": int(ib), "rbdgen": int(ir)},
                     "cost": {"built-in": float(cb), "rbdgen": float(cr)}, "cost_rel": float(crel),
                     "trajectory": float(traj), "ms": {"built-in": float(tb), "rbdgen": float(tr)},
                     "cpu_ms": {"built-in": float(ub), "rbdgen": float(ur)}, "ratio": float(ratio)})
    return runs


def run_cpp(repeat: int, work: str) -> tuple[dict, str]:
    """The C++ examples' results by problem key, or ({}, why not).  Their kernels are the
    Python examples' (problems.cpp_kernel_folders), built once for both."""
    kernels = Path(work) / "kernels"
    P.cpp_kernel_folders(kernels)
    env = dict(os.environ, WORK=work, PYTHON=sys.executable, RBDGEN_KERNELS=str(kernels))
    r = subprocess.run(["sh", str(HERE / "cpp" / "run.sh"), "--repeat", str(repeat)], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        return {}, f"cpp/run.sh failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}"
    runs = parse_cpp(r.stdout)
    if len(runs) != len(CPP_ORDER):
        return {}, f"cpp/run.sh printed {len(runs)} reports, expected {len(CPP_ORDER)}"
    return dict(zip(CPP_ORDER, runs)), ""


def agrees(r: dict) -> bool:
    return (r["iterations"]["built-in"] == r["iterations"]["rbdgen"] and r["cost_rel"] <= COST_RTOL
            and r["trajectory"] <= TRAJ_ATOL)


def verdict(ratio: float, target) -> str:
    if target is None:
        return "reported"
    return f"<= {target:.2f}: {'met' if ratio <= target else 'not met'}"


def row(title: str, kind: str, r: dict, target) -> str:
    it = r["iterations"]
    return (f"| {title}, T = {r['T']} | {kind} | {it['built-in']} / {it['rbdgen']} | {r['cost_rel']:.1e} | "
            f"{r['trajectory']:.1e} | {'yes' if agrees(r) else 'NO'} | {r['cpu_ms']['built-in']:.2f} | "
            f"{r['cpu_ms']['rbdgen']:.2f} | {r['ratio']:.2f} | {r['ms']['built-in']:.2f} | {r['ms']['rbdgen']:.2f} | "
            f"{verdict(r['ratio'], target)} |")


def _median_phases(problem, repeat: int) -> dict:
    """:func:`problems.solve_phases`'s phases, medians of ``repeat`` replays (ms)."""
    runs = [P.solve_phases(problem) for _ in range(repeat)]
    return {"iterations": runs[0]["iterations"],
            "ms": {k: float(np.median([r["ms"][k] for r in runs])) for k in runs[0]["ms"]}}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} logical CPUs, load average {load} (1, 5, 15 min) when the report finished; "
            f"crocoddyl {crocoddyl.__version__}, Pinocchio {pinocchio.__version__}, Python "
            f"{platform.python_version()}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
            f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")


def breakdown_rows(results: dict) -> list[str]:
    lines = ["| problem | model | iterations | trial steps | problem.calc ms | problem.calcDiff ms | backward pass ms | "
             "tryStep ms | solve ms | models ms (share) | solver's own ms (share) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (title, model), b in results.items():
        lines.append(f"| {title} | {model} | {b['iterations']} | {b['trials']} | {b['calc']:.2f} | {b['calcDiff']:.2f} | "
                     f"{b['backward']:.2f} | {b['tryStep']:.2f} | {b['solve']:.1f} | {b['models']:.1f} "
                     f"({b['models'] / b['solve']:.0%}) | {b['solver']:.1f} ({b['solver'] / b['solve']:.0%}) |")
    return lines


def limits(parts: dict, profiles: dict, ours: str) -> list[str]:
    """Per contact problem: the ratio rbdgen's model (``ours``: the model gen.crocoddyl's
    classes return) would reach with models that cost nothing (the solver's own time over
    the built-in's solve), from the breakdown."""
    lines = []
    for title in dict.fromkeys(t for t, _ in parts):
        b, r = parts[(title, "built-in")], parts[(title, ours)]
        lines.append(f"- {title}: the models take {r['models']:.1f} ms with rbdgen's {ours} against "
                     f"{b['models']:.1f} ms with the built-in ({r['models'] / b['models']:.2f}x); the solver's own "
                     f"work is {r['solver']:.1f} against {b['solver']:.1f} ms. With models that cost nothing the "
                     f"ratio would be {r['solver'] / b['solve']:.2f}; FDDP's backward pass alone is "
                     f"{r['iterations'] * r['backward']:.1f} ms of the built-in's {b['solve']:.1f} ms solve.")
    lines.append("- The C++ examples run the same FDDP, so the solver's own work bounds their ratio as it bounds the "
                 "Python examples'.")
    for key, p in profiles.items():
        c = ours.split()[0]
        lines.append(f"- {key}, one node (table below, cache-hot): rbdgen's {ours}'s calc and calcDiff take "
                     f"{p['built-in calc'] / p[f'rbdgen {c} model calc']:.1f}x and "
                     f"{p['built-in calcDiff'] / p[f'rbdgen {c} model calcDiff']:.1f}x less than the built-in's "
                     f"(the compiled model's calc runs the derivative kernel, which returns the value too, and its "
                     f"calcDiff uses what calc left; the Python model runs a value kernel in calc); "
                     f"in the Python model's calcDiff the kernel is {p['  constrained_derivatives kernel']:.1f} us and "
                     f"crocoddyl's costs {p['  costs.calcDiff']:.1f} us; with crocoddyl's Euler step around it the "
                     f"node's calcDiff is {p[f'Euler node calcDiff ({c} model)']:.1f} us ({ours}) and "
                     f"{p['Euler node calcDiff (Python model)']:.1f} us (Python model). Over a solve's nodes "
                     f"(problem.calcDiff above) the ratio is {parts_ratio(parts, key, ours):.2f}.")
    return lines


def phase_rows(phases: dict, profiles: dict, ours: str) -> list[str]:
    """The solves replayed phase by phase (:func:`problems.solve_phases`), per contact
    problem: each phase's CPU ms for the built-in and rbdgen's model, and the ratio rbdgen's
    model would reach if its dynamics kernel cost nothing (the kernel's cache-hot time from
    :func:`problems.node_profile` once per node in every calc sweep: the first calc and each
    trial step)."""
    lines = ["| problem | phase | built-in ms | rbdgen ms | rbdgen - built-in ms |", "|---|---|---:|---:|---:|"]
    notes = []
    for (key, T), by in phases.items():
        b, r = by["built-in"], by[ours]
        for name in b["ms"]:
            lines.append(f"| {TITLES[key]}, T = {T} | {name} | {b['ms'][name]:.1f} | {r['ms'][name]:.1f} | "
                         f"{r['ms'][name] - b['ms'][name]:+.1f} |")
        sb, sr = sum(b["ms"].values()), sum(r["ms"].values())
        lines.append(f"| {TITLES[key]}, T = {T} | **sum** ({b['iterations']} iterations) | {sb:.1f} | {sr:.1f} | "
                     f"{sr - sb:+.1f} ({sr / sb:.2f}x) |")
        kernel = profiles[key]["  constrained_derivatives kernel"] * (T + 1) * (r["iterations"] + 1) / 1e3
        notes.append(f"- {TITLES[key]}: rbdgen's dynamics kernel, cache-hot, is {kernel:.1f} ms of the solve "
                     f"({profiles[key]['  constrained_derivatives kernel']:.1f} us x {T + 1} nodes x "
                     f"{r['iterations'] + 1} calc sweeps); with a kernel that cost nothing the ratio would be "
                     f"{(sr - kernel) / sb:.2f}. The backward pass ({b['ms']['backward pass']:.1f} and "
                     f"{r['ms']['backward pass']:.1f} ms) and the costs, Euler steps and rollouts in the other "
                     "phases are crocoddyl's.")
    return lines + [""] + notes


def parts_ratio(parts: dict, key: str, ours: str) -> float:
    (b,) = [v for (t, m), v in parts.items() if t.startswith(TITLES[key]) and m == "built-in"]
    (r,) = [v for (t, m), v in parts.items() if t.startswith(TITLES[key]) and m == ours]
    return r["calcDiff"] / b["calcDiff"]


def profile_rows(profiles: dict) -> list[str]:
    names = list(next(iter(profiles.values())))
    lines = ["| step | " + " | ".join(f"{k} CPU us" for k in profiles) + " |",
             "|---|" + "---:|" * len(profiles)]
    for n in names:
        lines.append(f"| {n.strip() if not n.startswith('  ') else '&nbsp;&nbsp;' + n.strip()} | "
                     + " | ".join(f"{p[n]:.1f}" for p in profiles.values()) + " |")
    return lines


def cycled_rows(cycled: dict) -> list[str]:
    counts = list(next(iter(cycled.values())))
    lines = ["| problem | model | " + " | ".join(f"k = {k}" for k in counts) + " |",
             "|---|---|" + "---:|" * len(counts)]
    for (key, name), r in cycled.items():
        lines.append(f"| {TITLES[key]} | {name} | " + " | ".join(f"{r[k]:.1f}" for k in counts) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True, help="markdown file to write")
    ap.add_argument("--repeat", type=int, default=11, help="solves per model and problem (medians)")
    ap.add_argument("--no-cpp", action="store_true", help="leave out the C++ examples")
    ap.add_argument("--work", default=os.environ.get("WORK", "/tmp/rbdgen-crocoddyl"), help="C++ build folder")
    args = ap.parse_args(argv)
    py, pymodel = {}, {}
    for key, title, build, (builtin, ours), T, _, _ in PROBLEMS:
        py[key] = P.measure(build, builtin, ours, args.repeat, T=T)
        pymodel[key] = P.measure(build, builtin, PYTHON_MODELS[key], args.repeat, T=T)
        print(f"python {key}: ratio {py[key]['ratio']:.2f} (Python model {pymodel[key]['ratio']:.2f})", flush=True)
    #: the model gen.crocoddyl's classes return here
    ours = f"{P.solo12_base(CONTACT[1], T=1)[0].runningModels[0].differential.implementation} model"
    ours = ours[0].upper() + ours[1:] if ours.startswith("python") else ours
    cpp, why = ({}, "left out (--no-cpp)") if args.no_cpp else run_cpp(args.repeat, args.work)
    parts = {}
    for key, title, build, classes, T, _, _ in PROBLEMS[1:]:
        for name, cls in (("built-in", classes[0]), (ours, classes[1]), ("Python model", PYTHON_MODELS[key])):
            if (f"{title}, T = {T}", name) not in parts:
                parts[(f"{title}, T = {T}", name)] = P.breakdown(build(cls, T=T)[0], args.repeat)
    lines = ["# crocoddyl action models on rbdgen's kernels: issue 31's targets", "",
             f"Written by `examples/crocoddyl/report.py` on {datetime.date.today().isoformat()}. Machine: {machine()}.",
             "", "Medians of one run, "
             f"{args.repeat} solves per model, built-in and rbdgen alternating, FDDP from the same quasi-static "
             "guess. The machine is shared with other builds: wall times move by tens of percent between runs "
             "and include the time a solve waited for a core, so the ratios are of the solves' CPU times "
             "(the process's, one thread); iterations, costs and trajectories do not depend on the load.", "",
             "Targets: same iterations, cost to 1e-9 relative and trajectories to 1e-7 (column *agrees*); solve "
             "time rbdgen / built-in at most 1.3 (panda) and 0.8 (solo12, talos) for the models in Python, at most "
             "1 / 1.5 = 0.67 for the C++ models on solo12 and talos (panda reported).", "",
             f"In Python, rbdgen's models are what `gen.crocoddyl`'s classes return, here the {ours} (rows "
             "*Python*): with a C++ compiler and the crocoddyl wheel's headers, the C++ model of `rbdgen build "
             "--crocoddyl` compiled into a boost.python extension, a subclass of crocoddyl's class whose calc and "
             "calcDiff crocoddyl's solver calls in C++. Rows *Python model*: `gen.crocoddyl`'s Python model "
             "(`PythonDifferentialActionModel*`, what the classes return without a compiler), whose calc and "
             "calcDiff crocoddyl calls per node through boost.python (reported).", "",
             "| problem | model | iterations built-in / rbdgen | cost rel. diff. | trajectory diff. | agrees | "
             "built-in CPU ms | rbdgen CPU ms | rbdgen / built-in (CPU) | built-in wall ms | rbdgen wall ms | target |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for key, title, _, _, _, tpy, tcpp in PROBLEMS:
        lines.append(row(title, "Python", py[key], tpy))
    for key, title, _, _, _, tpy, tcpp in PROBLEMS:
        lines.append(row(title, "Python model", pymodel[key], None))
    for key, title, _, _, _, tpy, tcpp in PROBLEMS:
        if key in cpp:
            lines.append(row(title, "C++", cpp[key], tcpp))
    if why:
        lines += ["", f"C++: {why}."]
    profiles = {key: P.node_profile(build) for key, _, build, _, _, _, _ in PROBLEMS[1:]}
    cycled = {(key, name): P.cycled_nodes(build, cls)
              for key, _, build, classes, _, _, _ in PROBLEMS[1:] for name, cls in zip(("built-in", "rbdgen"), classes)}
    phases = {(key, T): {name: _median_phases(build(cls, T=T)[0], min(args.repeat, 5))
                         for name, cls in (("built-in", classes[0]), (ours, classes[1]))}
              for key, _, build, classes, T, _, _ in PROBLEMS[1:]}
    lines += ["", "## Where a solve's time goes (in Python)", "",
              "`problems.breakdown`: the models over all nodes (`problem.calc`, `problem.calcDiff`: dynamics, "
              "actuation, costs and the Euler step), crocoddyl's backward pass and one trial step (`tryStep`, a "
              "rollout that calls every node's `calc`), each a median at the initial guess; iterations and trial "
              "steps counted on one solve. *models* = iterations x calcDiff + trials x calc; *solver's own* = "
              "iterations x backward pass + trials x (tryStep - calc); their sum estimates the solve.", "",
              *breakdown_rows(parts), "", *limits(parts, profiles, ours), "",
              "One running node at x0 and its quasi-static u (`problems.node_profile`, CPU us per call, "
              f"median of 9 batches of 200): the built-in model, rbdgen's {ours}, rbdgen's Python model and its "
              "steps, and the Euler node around each rbdgen model as the solver calls it (in C++ for the compiled "
              "model, through crocoddyl's Python override for the Python model).",
              "", *profile_rows(profiles), "",
              "A node in a solve costs about twice what it costs in a tight loop: the Euler node's calcDiff "
              "(`problems.cycled_nodes`, CPU us per call) when the calls cycle over k nodes, each with its own "
              "data (k = 50: a solve's sweep). The cost grows with k as the nodes' data (crocoddyl's cost, Euler "
              "and model data, a few hundred kB a node) and the kernel's code stop fitting in the core's L2 "
              "cache, for the built-in models as for rbdgen's.", "",
              *cycled_rows(cycled), "",
              "## A solve phase by phase (in Python)", "",
              "`problems.solve_phases`: the solve replayed from Python one phase at a time (the first calc, then per "
              "iteration calcDiff, the gaps, the backward pass and the trial step, which all take full steps here), "
              "each phase's CPU time summed over the solve, medians of "
              f"{min(args.repeat, 5)} replays. Each phase runs after the one before it, as in `solver.solve`, so "
              "its node data comes from beyond the core's L2 cache; the breakdown above times each phase repeated "
              "on its own, which leaves that phase's data in the caches, so a cheap phase measures less there than "
              "in a solve (calcDiff below against the breakdown's problem.calcDiff times the iterations).",
              "", *phase_rows(phases, profiles, ours), ""]
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
