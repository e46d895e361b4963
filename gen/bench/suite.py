"""The benchmark suite: every named robot × (rnea, crba, aba, nle), specialised C vs
generic C vs Pinocchio, written as a dated report under ``bench/reports/`` (docs/DESIGN.md §5)."""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from opcount.constrained import REPORT_SETS

from .. import pinref
from ..algorithms import ALGORITHMS, ALM_FLOOR, in_report
from ..errors import RbdgenError
from ..robots.named import NAMED_ROBOTS
from . import harness, pinshim, report
from . import targets as target_parts
from .peers.pinocchio import DELASSUS_MU

SUITE_ALGORITHMS = tuple(in_report("suite"))
CONSTRAINED_SUITE = tuple(in_report("suite-constrained"))


def suite_robots() -> list[str]:
    return list(NAMED_ROBOTS)


def run_suite(robots=None, algorithms=SUITE_ALGORITHMS, *, against=("generic", "pinocchio", "adam"),
              targets=(), progress=None, date: str | None = None, **bench_kwargs) -> dict:
    """Benchmark every robot × algorithm; a failing entry is recorded with its error and
    the suite goes on (a mismatch is an error: its times are not reported).  ``targets``:
    the parts of :mod:`gen.bench.targets` to measure after it (issue 15's targets)."""
    say = progress or (lambda s: None)
    robots = list(robots or suite_robots())
    machine = harness.machine_info()
    shim_info = None
    if "pinocchio" in against:
        try:
            ready = pinref.available() and pinshim.pin_prefix() is not None
        except RbdgenError as e:
            say(f"suite: Pinocchio skipped: {e}")
            ready = False
        if ready:
            parts = ["core"] + sorted({pinshim.FUNCTION_PART[a] for a in algorithms if a in pinshim.FUNCTION_PART})
            b = pinshim.build_shim(parts, progress=progress)      # all parts at once, in parallel
            times = {k: v for k, v in b.compile_seconds.items() if not k.startswith("_")}
            jobs = b.compile_seconds.get("_jobs")
            shim_info = {"compiler": b.compiler, "compile_seconds": times, "jobs": jobs, "folder": str(b.folder),
                         "mode": b.mode}
    results = []
    for rb in robots:
        for algo in algorithms:
            say(f"suite: {rb}/{algo}")
            try:
                results.append(harness.benchmark(rb, algo, against=against, progress=progress, **bench_kwargs))
            except RbdgenError as e:
                say(f"suite: {rb}/{algo} failed: {e}")
                results.append({"robot": rb, "algorithm": algo, "error": " ".join(str(e).split())})
    measured = target_parts.run(targets, progress) if targets else None
    try:
        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    method = {k: bench_kwargs.get(k, v) for k, v in harness.DEFAULTS.items()}
    if shim_info is not None:
        shim_info["eigen_align"] = next((r["settings"].get("pinocchio_eigen_align") for r in results
                                         if "settings" in r and "pinocchio_eigen_align" in r["settings"]), None)
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "method": method,
            "shim": shim_info, "results": results, **({"targets": measured} if measured else {})}


def write_report(suite: dict, out_dir=None, stem: str | None = None) -> dict[str, Path]:
    """``<out_dir>/<date>-suite.{md,json,png}`` (default ``bench/reports/``), with the
    issue 15 sections when the suite measured them."""
    measured = suite.get("targets")
    sections = target_parts.sections(measured, suite["results"]) if measured else ("", "")
    return report.write_suite(suite, Path(out_dir) if out_dir else report.REPORTS_DIR,
                              stem or f"{suite['date']}-suite", sections)


# --- constrained dynamics, Delassus, events (issues 5-7) -----------------------------------------

#: the augmented-Lagrangian solvers' rounding floor grows like 1/mu (gen/algorithms/proximal.py
#: "Accuracy"); on icub's light legs it is ~5e-5 relative at the default 1e-6, above the
#: harness's cross-check, so their rows there run at this damping (Pinocchio the same)
ALM_MU = {"icub": 1e-4}


def constrained_sets(include_redundant: bool = False) -> dict[str, tuple[str, str]]:
    """The named constraint sets of the op-count reports (``opcount.constrained``), loops
    between moving bodies included."""
    sets = dict(REPORT_SETS)
    if not include_redundant:
        sets = {k: v for k, v in sets.items() if not k.endswith("_x2")}
    return sets


def _jobs(name, robot, spec, algorithms, iterations, against):
    """(algorithm, spec, Pinocchio peer or None, implementations, options, check) per row."""
    pin = "pinocchio" in against
    gen_only = tuple(a for a in against if a != "pinocchio")
    out = []
    for alg in algorithms:
        row = ALGORITHMS[alg]
        if alg not in CONSTRAINED_SUITE:
            raise RbdgenError(f"{alg} is not part of the constrained suite (choose from {', '.join(CONSTRAINED_SUITE)})")
        peer = row.pin_peer if pin else None
        use = against if peer else gen_only
        sp, opts = spec, {}
        if row.family == "solver":
            opts = {"iterations": iterations}
            if row.floor == ALM_FLOOR and robot in ALM_MU:
                opts["mu"] = ALM_MU[robot]
        elif any(o.name == "mu" for o in row.options) and row.family == "delassus":
            opts = {"mu": DELASSUS_MU}
        elif row.pinocchio is not None and row.pinocchio.converged:
            # Pinocchio's impulseDynamics is one damped solve: our K = 1 iterate
            opts = {"iterations": 1, "mu": 1e-4}
        elif getattr(row.fn, "unilateral", False):
            sp = ",".join(t.replace(":", "+:", 1) for t in spec.split(","))     # the contacts made one-sided
            opts = {"iterations": iterations}
        out.append((alg, sp, peer, use, opts, True))
        if alg == "constrained_aba" and pin:
            # contactABA's K-th iterate is not ours (its multiplier update comes at another
            # point of the loop), so its row reports the ddq difference, unchecked
            out.append((alg, spec, "contact_aba", ("pinocchio",), opts, False))
    return out


def run_constrained_suite(sets=None, algorithms=CONSTRAINED_SUITE, *, iterations: int = 3,
                          against=("generic", "pinocchio"), progress=None, date: str | None = None,
                          **bench_kwargs) -> dict:
    """Every set × algorithm: the proximal solvers at a fixed iteration count K
    (Pinocchio's ``constraintDynamics`` runs the same K, accuracy 0; the constrainedABA
    row is repeated against ``contactABA``, Pinocchio's constrainedABA, so "Pinocchio's
    fastest solver" is timed in the same program as ours), the damped Delassus inverses
    against ``computeDampedDelassusMatrixInverse`` (mu = :data:`DELASSUS_MU`), the impact
    map against ``impulseDynamics`` (K = 1) and the unilateral solver on the set's
    contacts made one-sided (generic only)."""
    say = progress or (lambda s: None)
    chosen = constrained_sets()
    if sets is not None:
        unknown = [s for s in sets if s not in constrained_sets(True)]
        if unknown:
            raise RbdgenError(f"unknown constraint set(s) {', '.join(unknown)} "
                              f"(choose from {', '.join(constrained_sets(True))})")
        chosen = {s: constrained_sets(True)[s] for s in sets}
    machine = harness.machine_info()
    results = []
    for name, (robot, spec) in chosen.items():
        for alg, sp, peer, use, opts, check in _jobs(name, robot, spec, algorithms, iterations, against):
            say(f"constrained suite: {name} {alg}" + (f" vs {peer}" if peer else ""))
            try:
                r = harness.benchmark(robot, alg, sp, against=use, pin_peer=peer, progress=progress, check=check,
                                      **{**bench_kwargs, **opts})
                r["set"] = name
                r["options"] = opts
                results.append(r)
            except RbdgenError as e:
                say(f"constrained suite: {name} {alg} failed: {e}")
                results.append({"set": name, "robot": robot, "algorithm": alg, "constraints": sp,
                                "pin_peer": peer, "options": opts, "error": " ".join(str(e).split())})
    try:
        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    method = {k: bench_kwargs.get(k, v) for k, v in harness.DEFAULTS.items()}
    method["iterations"] = iterations
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "method": method,
            "results": results}


def write_constrained_report(suite: dict, out_dir=None, stem: str | None = None) -> dict[str, Path]:
    """``<out_dir>/<date>-constrained.{md,json}`` (default ``bench/reports/``)."""
    return report.write_constrained(suite, Path(out_dir) if out_dir else report.REPORTS_DIR,
                                    stem or f"{suite['date']}-constrained")
