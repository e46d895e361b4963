"""The benchmark suite: every named robot × (rnea, crba, aba, nle), specialised C vs
generic C vs Pinocchio, written as a dated report under ``bench/reports/`` (DESIGN §5)."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..errors import RbdgenError
from . import harness, pinshim, report

SUITE_ALGORITHMS = ("rnea", "crba", "aba", "nle")
REPORTS_DIR = Path(__file__).resolve().parent.parent.parent / "bench" / "reports"


def suite_robots() -> list[str]:
    from ..robots.named import NAMED_ROBOTS

    return list(NAMED_ROBOTS)


def run_suite(robots=None, algorithms=SUITE_ALGORITHMS, *, against=("generic", "pinocchio"),
              progress=None, date: str | None = None, **bench_kwargs) -> dict:
    """Benchmark every robot × algorithm; a failing entry is recorded with its error and
    the suite goes on (a mismatch is an error: its times are not reported)."""
    say = progress or (lambda s: None)
    robots = list(robots or suite_robots())
    machine = harness.machine_info()
    shim_info = None
    if "pinocchio" in against:
        from .. import pinref

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
            shim_info = {"compiler": b.compiler, "compile_seconds": times, "jobs": jobs, "folder": str(b.folder)}
    results = []
    for rb in robots:
        for algo in algorithms:
            say(f"suite: {rb}/{algo}")
            try:
                results.append(harness.benchmark(rb, algo, against=against, progress=progress, **bench_kwargs))
            except RbdgenError as e:
                say(f"suite: {rb}/{algo} failed: {e}")
                results.append({"robot": rb, "algorithm": algo, "error": " ".join(str(e).split())})
    try:
        import os

        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    method = {k: bench_kwargs.get(k, v) for k, v in harness.DEFAULTS.items()}
    if shim_info is not None:
        shim_info["eigen_align"] = next((r["settings"].get("pinocchio_eigen_align") for r in results
                                         if "settings" in r and "pinocchio_eigen_align" in r["settings"]), None)
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "method": method,
            "shim": shim_info, "results": results}


def write_report(suite: dict, out_dir=None, stem: str | None = None) -> dict[str, Path]:
    """``<out_dir>/<date>-suite.{md,json,png}`` (default ``bench/reports/``)."""
    return report.write_suite(suite, Path(out_dir) if out_dir else REPORTS_DIR, stem or f"{suite['date']}-suite")


# --- constrained dynamics (issue 5) ------------------------------------------------------------

CONSTRAINED_SOLVERS = ("constrained_aba", "prox_ltls", "prox_ltl", "prox_pv")
PIN_CONSTRAINED_PEERS = ("constraint_dynamics", "contact_aba")


def constrained_sets(include_redundant: bool = False) -> dict[str, tuple[str, str]]:
    """The named constraint sets of the op-count reports (``opcount.constrained``)."""
    from opcount.constrained import CONSTRAINED_SETS

    sets = dict(CONSTRAINED_SETS)
    if not include_redundant:
        sets = {k: v for k, v in sets.items() if not k.endswith("_x2")}
    return sets


def run_constrained_suite(sets=None, solvers=CONSTRAINED_SOLVERS, *, iterations: int = 3,
                          against=("generic", "pinocchio"), progress=None, date: str | None = None,
                          **bench_kwargs) -> dict:
    """Every set × solver at a fixed iteration count K (Pinocchio's solvers run the same
    K, accuracy 0), specialised vs generic vs Pinocchio's ``constraintDynamics``; the
    constrainedABA row is repeated against Pinocchio's ``contactABA`` (its constrainedABA)
    so "Pinocchio's fastest solver" is measured in the same program as ours."""
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
        for solver in solvers:
            peers = PIN_CONSTRAINED_PEERS if solver == "constrained_aba" else PIN_CONSTRAINED_PEERS[:1]
            for peer in peers if "pinocchio" in against else (None,):
                use = against if peer == PIN_CONSTRAINED_PEERS[0] or peer is None else ("pinocchio",)
                say(f"constrained suite: {name} {solver}" + (f" vs {peer}" if peer else ""))
                try:
                    # contactABA's K-th iterate is not ours (its multiplier update comes at
                    # another point of the loop: ddq differs by up to ~1e-4 relative at K = 3,
                    # agreeing when converged), so its row reports the difference, unchecked
                    r = harness.benchmark(robot, solver, spec, against=use, pin_peer=peer, progress=progress,
                                          iterations=iterations, check=peer != "contact_aba", **bench_kwargs)
                    r["set"] = name
                    results.append(r)
                except RbdgenError as e:
                    say(f"constrained suite: {name} {solver} failed: {e}")
                    results.append({"set": name, "robot": robot, "algorithm": solver, "constraints": spec,
                                    "pin_peer": peer, "error": " ".join(str(e).split())})
    try:
        import os

        machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    method = {k: bench_kwargs.get(k, v) for k, v in harness.DEFAULTS.items()}
    method["iterations"] = iterations
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "method": method,
            "results": results}


def write_constrained_report(suite: dict, out_dir=None, stem: str | None = None) -> dict[str, Path]:
    """``<out_dir>/<date>-constrained.{md,json}`` (default ``bench/reports/``)."""
    return report.write_constrained(suite, Path(out_dir) if out_dir else REPORTS_DIR,
                                    stem or f"{suite['date']}-constrained")
