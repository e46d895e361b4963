"""Op-count reports of the four proximal constrained-dynamics solvers on the named
constraint sets (docs/DESIGN.md §3.8), as Sathya 2024 Fig. 1: each solver traced with K = 1 and
K = 3 unrolled proximal iterations, counted in total, by op class and by phase (the
phases are whatever the solvers close with ``be.mark``; nothing here names them).

``python -m opcount.constrained [OUT_DIR]`` (and ``python -m opcount.report``, which
also writes the unconstrained reports) regenerates ``opcount/reports/constrained/``:

* ``<set>.json`` / ``<set>.md`` for every entry of :data:`REPORT_SETS`: rows =
  solver × K, columns = total, the op classes, the per-phase totals, and the cost of one
  more proximal iteration ``(total(K=3) - total(K=1)) / 2``;
* ``<set>.png`` (with matplotlib): one bar per solver and K, stacked by phase;
* ``summary.md``: set × solver totals at K = 1 and K = 3.

The JSON is deterministic (sorted keys, no timestamps) so that
``tests/test_opcount_reports.py`` can compare a regeneration with the committed files.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from gen.algorithms import in_report

from .api import _model, opcount
from .counter import CLASSES
from .tables import COLUMNS, REPORTS_DIR, STAMP, _md_table, plot_phases, to_json

CONSTRAINED_DIR = REPORTS_DIR / "constrained"
SOLVERS = tuple(in_report("opcount-constrained"))
ITERATIONS = (1, 3)
STAMP_CONSTRAINED = STAMP.replace("opcount.report", "opcount.constrained")

_TALOS_FEET = "6D:left_sole_link,6D:right_sole_link"
_TALOS_FEET_HAND = _TALOS_FEET + ",6D:arm_left_7_link"
CONSTRAINED_SETS: dict[str, tuple[str, str]] = {
    "ur5_3d_tool0": ("ur5", "3D:tool0"),
    "ur5_6d_tool0": ("ur5", "6D:tool0"),
    "panda_3d_tcp": ("panda", "3D:panda_hand_tcp"),
    "panda_6d_tcp": ("panda", "6D:panda_hand_tcp"),
    "solo12_3d_2feet": ("solo12", "3D:FL_FOOT,3D:HR_FOOT"),
    "solo12_3d_4feet": ("solo12", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"),
    "anymal_c_3d_4feet": ("anymal_c", "3D:LF_FOOT,3D:RF_FOOT,3D:LH_FOOT,3D:RH_FOOT"),
    "go1_3d_4feet": ("go1", "3D:FL_foot,3D:FR_foot,3D:RL_foot,3D:RR_foot"),
    "talos_6d_soles": ("talos", _TALOS_FEET),
    "talos_6d_soles_arms": ("talos", _TALOS_FEET + ",6D:arm_left_7_link,6D:arm_right_7_link"),
    "icub_6d_soles": ("icub", "6D:l_sole,6D:r_sole"),
    "talos_6d_soles_x2": ("talos", _TALOS_FEET + "," + _TALOS_FEET),                  # m = 24
    "talos_6d_soles_hand_x2": ("talos", _TALOS_FEET_HAND + "," + _TALOS_FEET_HAND),   # m = 36
}
"""Set name -> (robot, constraint spec): issue 5's named sets, with the redundant ones
last (talos' soles duplicated, m = 24; Carpentier 2021 §V-F, m = 36)."""

LOOP_SETS: dict[str, tuple[str, str]] = {
    "fourbar_cut_loop": ("fourbar_cut", "3D:coupler_tip~rocker_tip"),
    "closed_leg_loop_foot": ("closed_leg", "3D:shin_a_tip~shin_b_tip,3D:shin_a_tip"),
    "talos_6d_soles_grippers": ("talos", _TALOS_FEET + ",6D:gripper_left_base_link~gripper_right_base_link"),
}
"""Loops between two moving bodies, which every solver closes (the articulated ones by
the loop-constrained ABA, :mod:`gen.algorithms.loops`): the four-bar cut between its two
moving links, a five-bar leg standing on its foot, talos standing and holding an object
with both grippers."""
REPORT_SETS = {**CONSTRAINED_SETS, **LOOP_SETS}
"""Every set of the committed constrained op-count reports."""


# --- data ------------------------------------------------------------------------------

def set_counts(robot, spec: str, name: str | None = None, solvers=SOLVERS, iterations=ITERATIONS) -> dict:
    """Op counts of ``solvers`` on ``robot`` under constraints ``spec``, one row per
    iteration count: ``{"set", "robot", "nq", "nv", "m", "constraints", "iterations",
    "algorithms": {solver: {"<K>": {"total", "classes", "phases"}}}}``."""
    model = _model(robot)
    rows: dict = {}
    m = None
    for alg in solvers:
        rows[alg] = {}
        for k in iterations:
            r = opcount(model, alg, spec, iterations=k)
            rows[alg][str(k)] = {key: r[key] for key in ("total", "classes", "phases")}
            m = r["m"]
    return {"set": name or f"{model.name}:{spec}", "robot": model.name, "nq": model.nq, "nv": model.nv,
            "m": m, "constraints": spec, "iterations": list(iterations), "algorithms": rows}


def per_iteration(data: dict, alg: str) -> float | None:
    """Cost of one more proximal iteration, ``(total(K_max) - total(K_min)) / (K_max - K_min)``."""
    ks = data["iterations"]
    if len(ks) < 2:
        return None
    row = data["algorithms"][alg]
    return (row[str(ks[-1])]["total"] - row[str(ks[0])]["total"]) / (ks[-1] - ks[0])


def phase_names(data: dict) -> list[str]:
    """Every phase name over solvers and iteration counts, each new name placed right
    after its predecessor in the run that has it (so ``iteration_2`` of a K = 3 run
    follows ``iteration_1`` rather than the K = 1 run's last phase)."""
    names: list[str] = []
    for row in data["algorithms"].values():
        for run in row.values():
            prev = None
            for p in run["phases"]:
                if p["name"] not in names:
                    names.insert(names.index(prev) + 1 if prev is not None else len(names), p["name"])
                prev = p["name"]
    return names


# --- rendering -------------------------------------------------------------------------

def _solvers(data: dict) -> list[str]:
    """The solvers of ``data`` in :data:`SOLVERS` order (the JSON sorts its keys)."""
    return sorted(data["algorithms"], key=lambda a: (SOLVERS.index(a) if a in SOLVERS else len(SOLVERS), a))


def _fmt(x) -> str:
    return "" if x is None else (f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}")


def to_md(data: dict) -> str:
    phases = phase_names(data)
    head = [f"# Constrained op counts: {data['set']}", "",
            f"`{data['robot']}` (nq={data['nq']}, nv={data['nv']}), constraints `{data['constraints']}` "
            f"(m={data['m']}).", "", f"<!-- {STAMP_CONSTRAINED} -->", "",
            "Floating-point operations of the traced CasADi SX graph after common-subexpression "
            "elimination (what the emitted C computes), each solver unrolled for K proximal "
            "iterations (Sathya 2024 Fig. 1 uses K = 3). `add` includes subtractions, `mul` squares, "
            "`other` is fmax, comparisons, `twice`, ... Phases partition the total: ops are attributed "
            "to the first `be.mark` phase whose values need them (`output`: after the last mark). "
            "*Per iteration* is the cost of one more proximal step, "
            f"(total(K={data['iterations'][-1]}) − total(K={data['iterations'][0]})) / "
            f"{data['iterations'][-1] - data['iterations'][0]}.", ""]
    by_class, by_phase = [], []
    for alg in _solvers(data):
        for k in data["iterations"]:
            run = data["algorithms"][alg][str(k)]
            by_class.append([alg, k, run["total"], *(run["classes"][c] for c in CLASSES),
                             _fmt(per_iteration(data, alg)) if k == data["iterations"][0] else ""])
            per = {p["name"]: p["total"] for p in run["phases"]}
            by_phase.append([alg, k, run["total"], *(per.get(p, "") for p in phases)])
    return "\n".join(head + ["## By op class", "",
                             _md_table(["solver", "K", *COLUMNS, "per iteration"], by_class),
                             "## By phase", "",
                             _md_table(["solver", "K", "total", *phases], by_phase)])


def plot_set(data: dict, path) -> bool:
    """One bar per solver and K, stacked by phase (:func:`opcount.report.plot_phases`)."""
    bars = {f"{alg}\nK={k}": data["algorithms"][alg][str(k)] for alg in _solvers(data) for k in data["iterations"]}
    title = f"{data['robot']} (nv={data['nv']}), {data['set']} (m={data['m']}): op counts by phase"
    return plot_phases({"robot": data["robot"], "nv": data["nv"], "algorithms": bars}, path, title=title,
                       phases=phase_names(data))


def summary_md(all_data: list[dict]) -> str:
    solvers: list[str] = []
    for d in all_data:
        solvers += [a for a in _solvers(d) if a not in solvers]
    ks = all_data[0]["iterations"] if all_data else list(ITERATIONS)
    rows = []
    for d in all_data:
        cells = [" / ".join(str(d["algorithms"][a][str(k)]["total"]) for k in ks) if a in d["algorithms"] else ""
                 for a in solvers]
        rows.append([d["set"], d["robot"], f"`{d['constraints']}`", d["nv"], d["m"], *cells])
    return "\n".join(["# Constrained op counts: set × solver (total operations after CSE)", "",
                      f"<!-- {STAMP_CONSTRAINED} -->", "",
                      f"Each cell: K = {' / K = '.join(str(k) for k in ks)} proximal iterations. "
                      "Per-class and per-phase breakdowns, and the cost per iteration, are in "
                      "`<set>.md` / `<set>.json`; `<set>.png` stacks them by phase as Sathya 2024 Fig. 1.",
                      "", _md_table(["set", "robot", "constraints", "nv", "m", *solvers], rows,
                                    "lll" + "r" * (2 + len(solvers)))])


# --- the committed reports ----------------------------------------------------------------

def write_set(name: str, robot, spec: str, out_dir=CONSTRAINED_DIR, plot: bool = True) -> dict:
    """Write ``<name>.json``, ``<name>.md`` (and ``<name>.png``) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = set_counts(robot, spec, name)
    (out / f"{name}.json").write_text(to_json(data))
    (out / f"{name}.md").write_text(to_md(data))
    if plot:
        plot_set(data, out / f"{name}.png")
    return data


def write_constrained_reports(out_dir=CONSTRAINED_DIR, sets=None, plot: bool = True, log=print) -> list[dict]:
    """Regenerate the constrained reports in ``out_dir`` (see the module docstring);
    ``sets`` (name -> (robot, spec)) defaults to :data:`REPORT_SETS`."""
    all_data = []
    for name, (robot, spec) in (sets if sets is not None else REPORT_SETS).items():
        t0 = time.perf_counter()
        all_data.append(write_set(name, robot, spec, out_dir, plot))
        log(f"{name:>24}: m={all_data[-1]['m']}, {time.perf_counter() - t0:.1f} s")
    (Path(out_dir) / "summary.md").write_text(summary_md(all_data))
    return all_data


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else CONSTRAINED_DIR
    write_constrained_reports(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
