"""Benchmark results as tables, and the suite's dated report (markdown, JSON, PNG chart).

A *result* is the dict :func:`gen.bench.harness.benchmark` returns; a *suite* is
``{"date", "machine", "method", "results": [result | {"robot", "algorithm", "error"}]}``.
Tables quote ratios first (docs/DESIGN.md §5: "quote ratios, not absolute times"); absolute
medians with p10-p90 follow for reference.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from ..algorithms import ALGORITHMS, in_report
from .peers.pinocchio import DELASSUS_MU

#: the committed benchmark reports, relative to the working directory: run the report
#: commands from the repository root (docs/ARCHITECTURE.md, "Reports")
REPORTS_DIR = Path("bench") / "reports"

IMPLS = ("specialized", "generic", "pinocchio", "adam", "mujoco")
SHORT = {"specialized": "spec", "generic": "generic", "pinocchio": "pin", "adam": "adam", "mujoco": "mujoco"}
TITLE = {"specialized": "spec", "generic": "generic", "pinocchio": "Pinocchio", "adam": "ADAM", "mujoco": "MuJoCo"}
PEERS = IMPLS[1:]


def _us(ns) -> float | None:
    return None if ns is None else round(ns / 1000.0, 4)


def rows(results: list[dict]) -> list[dict]:
    """One flat row per result (robot, algorithm, medians in µs, p10/p90, ratios, check)."""
    out = []
    for r in results:
        row = {"robot": r["robot"], "algorithm": r["algorithm"], "constraints": r.get("constraints"),
               "nv": r.get("nv")}
        if "error" in r:
            row["status"] = f"error: {r['error']}"
            out.append(row)
            continue
        imps = r["implementations"]
        for name in IMPLS:
            s = imps.get(name)
            k = SHORT[name]
            row[f"{k}_us"] = _us(s["median_ns"]) if s else None
            row[f"{k}_p10_us"] = _us(s["p10_ns"]) if s else None
            row[f"{k}_p90_us"] = _us(s["p90_ns"]) if s else None
        for name in PEERS:
            row[f"{SHORT[name]}/spec"] = r["ratios"].get(f"{name}/specialized")
        row["spec_ops"] = r.get("opcount")
        row["adam_ops"] = imps["adam"]["ops"] if "adam" in imps else None
        row["max_rel_diff"] = max(r["verify"]["max_rel_diff"].values(), default=None)
        row["trials"] = imps["specialized"]["trials"]
        row["status"] = "ok" if r["verify"]["ok"] else "MISMATCH"
        if r.get("skipped"):
            row["status"] += "; " + "; ".join(f"{k}: {v}" for k, v in r["skipped"].items())
        out.append(row)
    return out


CSV_COLUMNS = (["robot", "algorithm", "constraints", "nv", *[f"{SHORT[n]}/spec" for n in PEERS]]
               + [f"{SHORT[n]}_{c}" for n in IMPLS for c in ("us", "p10_us", "p90_us")]
               + ["spec_ops", "adam_ops", "max_rel_diff", "trials", "status"])


def _fmt(x, digits=3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if x == 0.0:
            return "0"
        if abs(x) < 1e-3:
            return f"{x:.1e}"
        return f"{x:.{digits}g}"
    return str(x)


def _range(row, k) -> str:
    if row.get(f"{k}_us") is None:
        return "n/a"
    return f"{_fmt(row[f'{k}_us'])} [{_fmt(row[f'{k}_p10_us'])}–{_fmt(row[f'{k}_p90_us'])}]"


def markdown_table(results: list[dict]) -> str:
    """Ratios against every peer, then each implementation's median [p10–p90]."""
    rs = rows(results)
    cols = len(PEERS) + len(IMPLS)
    head = ("| robot | algorithm | nv | " + " | ".join(f"{TITLE[n]} / spec" for n in PEERS) + " | "
            + " | ".join(f"{TITLE[n]} µs [p10–p90]" for n in IMPLS) + " | max rel. diff | status |")
    sep = "|---|---|--:|" + "--:|" * (cols + 1) + "---|"
    lines = [head, sep]
    for r in rs:
        name = r["algorithm"] + (f" ({r['constraints']})" if r.get("constraints") else "")
        if r["status"].startswith("error"):
            lines.append(f"| {r['robot']} | {name} | {_fmt(r.get('nv'))} |" + " |" * (cols + 1) + f" {r['status']} |")
            continue
        cells = [_fmt(r[f"{SHORT[n]}/spec"]) for n in PEERS] + [_range(r, SHORT[n]) for n in IMPLS]
        lines.append(f"| {r['robot']} | {name} | {r['nv']} | " + " | ".join(cells)
                     + f" | {_fmt(r['max_rel_diff'], 2)} | {r['status']} |")
    return "\n".join(lines)


def render(results: list[dict], fmt: str) -> str:
    """Results as ``md``, ``csv`` or ``json`` (the full result dicts)."""
    if fmt == "json":
        return json.dumps(results, indent=1)
    if fmt == "csv":

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for r in rows(results):
            w.writerow(["" if r.get(c) is None else r.get(c) for c in CSV_COLUMNS])
        return buf.getvalue().rstrip("\n")
    return markdown_table(results)


# --- the suite report -------------------------------------------------------------------------

def _ratio_grid(results, key) -> tuple[list[str], list[str], dict]:
    robots = list(dict.fromkeys(r["robot"] for r in results))
    algos = list(dict.fromkeys(r["algorithm"] for r in results))
    grid = {(r["robot"], r["algorithm"]): (r.get("ratios", {}).get(key) if "error" not in r else None)
            for r in results}
    return robots, algos, grid


#: the speed issue's floors on every robot x algorithm pair of the suite: a peer's median
#: over the specialised C's
PEER_FLOORS = {"pinocchio/specialized": ("Pinocchio", 4.0), "adam/specialized": ("ADAM", 2.0)}


def floors_markdown(results) -> list[str]:
    """The section checking :data:`PEER_FLOORS` on every pair the peer ran: met or not,
    and the pairs below a floor with their ratios."""
    out = ["## Floors: Pinocchio / specialized >= 4, ADAM / specialized >= 2 on every pair", ""]
    for key, (peer, floor) in PEER_FLOORS.items():
        robots, algos, grid = _ratio_grid(results, key)
        pairs = {k: x for k, x in grid.items() if x is not None}
        below = [f"{rb} {a} {_fmt(x, 3)}" for (rb, a), x in pairs.items() if x < floor]
        verdict = "met" if pairs and not below else "not met" if pairs else "not measured"
        out.append(f"- {peer} / specialized >= {floor:g}: {verdict}, {len(pairs) - len(below)} of "
                   f"{len(pairs)} pairs at or above" + (f"; below: {', '.join(below)}" if below else ""))
    out += ["", "What limits a pair below its floor, measured: docs/ARCHITECTURE.md, \"What still limits "
            "the targets of the speed issue\".", ""]
    return out


def suite_markdown(suite: dict, targets_md: tuple[str, str] = ("", "")) -> str:
    """The suite report; ``targets_md``: the issue 15 sections (:mod:`gen.bench.targets`'
    summary, after the machine, and details, after all results)."""
    m, meth = suite["machine"], suite["method"]
    v = m["versions"]
    res = suite["results"]
    out = [f"# rbdgen benchmark suite — {suite['date']}", "",
           "Specialized C (rbdgen's robot-specific kernels) against the generic C (rbdgen's "
           "hand-written model-as-data library) and Pinocchio's C++ (header-only, compiled here), "
           "all in one process per benchmark, interleaved, same compiler and flags "
           "(docs/DESIGN.md §5).", "",
           "## Machine and build", "",
           f"- CPU: {m['cpu']} ({m['cores']} logical cores; {m.get('isa', '')}), {m['os']}"
           + (f"; load average at start {m['loadavg']}" if m.get("loadavg") else "")
           + (f", at end {m['loadavg_end']}" if m.get("loadavg_end") else ""),
           f"- C compiler: {m['cc']}; C++ compiler: {m['cxx']}",
           f"- flags (every implementation): `{m['flags']}`",
           f"- versions: rbdgen {v['rbdgen']}, Pinocchio {v['pinocchio']}, CasADi {v['casadi']}, "
           f"NumPy {v['numpy']}, Python {m['python']}",
           f"- method: {meth['n_states']} random states (seed {meth['seed']}) cycled in order; "
           f"{meth['warmup']} warm-up calls; {meth['rounds']} rounds × {meth['batch']} calls "
           f"= {meth['rounds'] * meth['batch']} timed calls per implementation; "
           f"`clock_gettime(CLOCK_MONOTONIC)` per batch; implementations interleaved (order "
           f"rotating every round); median and p10–p90 of the per-call batch means. "
           f"Outputs of the three implementations compared on every state before timing.",
           "- Pinocchio is timed as its API call (results left in `pinocchio::Data`, CRBA's upper "
           "triangle); rbdgen's C writes its outputs (full symmetric M) to caller memory.", ""]
    if targets_md[0]:
        out += [targets_md[0]]
    for key, title in (("pinocchio/specialized", "Pinocchio / specialized (median time ratio; > 1: specialized is faster)"),
                       ("generic/specialized", "generic / specialized (median time ratio)"),
                       ("adam/specialized", "ADAM / specialized (median time ratio; ADAM's CasADi functions as C "
                        "from CasADi's code generator, same flags; gen/bench/peers/adam.py)")):
        robots, algos, grid = _ratio_grid(res, key)
        out += [f"## {title}", "", "| robot | " + " | ".join(algos) + " |",
                "|---|" + "--:|" * len(algos)]
        for rb in robots:
            out.append(f"| {rb} | " + " | ".join(_fmt(grid.get((rb, a)), 3) for a in algos) + " |")
        out.append("")
    out += floors_markdown(res)
    rs = [r for r in rows(res) if r.get("adam_ops")]
    if rs:
        out += ["## Operations: rbdgen vs ADAM (after CSE, all classes)", "",
                "| robot | algorithm | rbdgen | ADAM | ADAM / rbdgen |", "|---|---|--:|--:|--:|"]
        out += [f"| {r['robot']} | {r['algorithm']} | {r['spec_ops']} | {r['adam_ops']} | "
                f"{_fmt(r['adam_ops'] / r['spec_ops'])} |" for r in rs if r.get("spec_ops")]
        out.append("")
    out += ["## All results", "", markdown_table(res), ""]
    if targets_md[1]:
        out += [targets_md[1]]
    errors = [r for r in res if "error" in r]
    if errors:
        out += ["## Errors", ""] + [f"- {r['robot']}/{r['algorithm']}: {r['error']}" for r in errors] + [""]
    if suite.get("shim"):
        sh = suite["shim"]
        times = ", ".join(f"{k} {v} s" for k, v in sh.get("compile_seconds", {}).items() if v is not None)
        build = ("Library-mode build of `gen/bench/pin_shim.cpp` (the pin wheel's libpinocchio_default "
                 "linked, without the machine options" if sh.get("mode") == "library" else
                 "Header-only build of `gen/bench/pin_shim.cpp` (no Pinocchio library linked")
        out += ["## Pinocchio shim", "",
                f"{build}; model passed as `pin.Model.saveToString()`), compiler `{sh.get('compiler')}`, Eigen alignment "
                f"{sh.get('eigen_align', 'n/a')} bytes. Compile time per part (wall, parts built "
                f"{sh.get('jobs', '?')} at a time, when first built): {times or 'cached'}.", ""]
    if suite.get("chart"):
        out += [f"![median time per call]({Path(suite['chart']).name})", ""]
    return "\n".join(out)


def chart(suite: dict, path: Path) -> Path | None:
    """Grouped bars: median time per robot × algorithm × implementation (log scale).
    ``None`` when matplotlib is not importable."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    res = [r for r in suite["results"] if "error" not in r]
    if not res:
        return None
    algos = list(dict.fromkeys(r["algorithm"] for r in res))
    robots = list(dict.fromkeys(r["robot"] for r in res))
    colors = {"specialized": "#1b9e77", "generic": "#7570b3", "pinocchio": "#d95f02", "adam": "#e7298a",
              "mujoco": "#66a61e"}
    fig, axes = plt.subplots(len(algos), 1, figsize=(max(7, 1.2 * len(robots) + 2), 2.6 * len(algos)),
                             squeeze=False, sharex=True)
    width = 0.8 / len(IMPLS)
    for ax, algo in zip(axes[:, 0], algos):
        for k, impl in enumerate(IMPLS):
            xs, meds, lo, hi = [], [], [], []
            for i, rb in enumerate(robots):
                r = next((r for r in res if r["robot"] == rb and r["algorithm"] == algo), None)
                s = r and r["implementations"].get(impl)
                if not s:
                    continue
                xs.append(i + (k - (len(IMPLS) - 1) / 2) * width)
                meds.append(s["median_ns"] / 1000)
                lo.append((s["median_ns"] - s["p10_ns"]) / 1000)
                hi.append((s["p90_ns"] - s["median_ns"]) / 1000)
            if xs:
                ax.bar(xs, meds, width, yerr=[lo, hi], color=colors[impl], label=impl, capsize=2,
                       error_kw={"elinewidth": 0.7})
        ax.set_yscale("log")
        ax.set_ylabel(f"{algo}\nµs / call")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[-1, 0].set_xticks(range(len(robots)))
    axes[-1, 0].set_xticklabels(robots)
    axes[0, 0].legend(ncol=3, fontsize=8, loc="upper left")
    m = suite["machine"]
    fig.suptitle(f"rbdgen suite {suite['date']} — median time per call (p10–p90), log scale\n"
                 f"{m['cpu']}, {m['flags']}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_suite(suite: dict, out_dir: Path, stem: str, targets_md: tuple[str, str] = ("", "")) -> dict[str, Path]:
    """Write ``<stem>.json``, ``<stem>.png`` (if matplotlib) and ``<stem>.md`` (with
    ``targets_md``, see :func:`suite_markdown`) into ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    png = chart(suite, out_dir / f"{stem}.png")
    if png is not None:
        suite["chart"] = png.name
        paths["png"] = png
    paths["json"] = out_dir / f"{stem}.json"
    paths["json"].write_text(json.dumps(suite, indent=1) + "\n")
    paths["md"] = out_dir / f"{stem}.md"
    paths["md"].write_text(suite_markdown(suite, targets_md) + "\n")
    return paths


def machine_sentence(m: dict) -> str:
    """``Machine: CPU, N cores, shared with other jobs (load average at the end [...]).``
    from :func:`gen.bench.harness.machine_info` taken at the end of a run."""
    return (f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, shared with other jobs "
            f"(load average at the end {m.get('loadavg', '?')}).")


def progress(message: str) -> None:
    """A progress line of the report scripts, on stderr."""
    print(f"rbdgen: {message}", file=sys.stderr, flush=True)


def publish(doc: dict, kind: str, markdown: str, out_dir=None) -> None:
    """:func:`write_dated`, the paths as progress, and the markdown on stdout (the
    ``main`` of each dated-report script)."""
    for path in write_dated(doc, kind, markdown, out_dir).values():
        progress(f"wrote {path}")
    print(markdown)


def write_dated(doc: dict, kind: str, markdown: str, out_dir=None) -> dict[str, Path]:
    """``<out_dir>/<date>-<kind>.json`` (``doc``; its ``results``, if any, without the
    states and outputs a benchmark may keep for tests) and ``.md`` (``markdown``); ``out_dir``
    defaults to :data:`REPORTS_DIR`.  The dated reports of ``gen.bench.derivatives``,
    ``gen.bench.mujoco_suite`` and ``gen.bench.compile_time``."""
    out_dir = Path(out_dir) if out_dir else REPORTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{doc['date']}-{kind}"
    slim = doc if "results" not in doc else \
        {**doc, "results": [{k: v for k, v in r.items() if k not in ("states", "outputs")} for r in doc["results"]]}
    paths = {"json": stem.with_suffix(".json"), "md": stem.with_suffix(".md")}
    paths["json"].write_text(json.dumps(slim, indent=1, default=str) + "\n")
    paths["md"].write_text(markdown)
    return paths


# --- the constrained suite report -------------------------------------------------------------

def _pin_ratio(rows, function):
    r = next((r for r in rows if r["implementations"].get("pinocchio", {}).get("function") == function), None)
    return (r["ratios"].get("pinocchio/specialized"), r) if r else (None, None)


def constrained_markdown(suite: dict) -> str:
    """Three tables (proximal solvers; Delassus and damped inverses; impact map and
    unilateral solver): each row's specialised median and the generic and Pinocchio
    ratios, then the issues' targets: Pinocchio's fastest solver / our constrainedABA and
    Pinocchio's damped Delassus inverse / our cABA-OSIM."""
    suite_rows = in_report("suite-constrained")
    CONSTRAINED_SOLVERS, DELASSUS_ALGORITHMS, EVENT_ALGORITHMS = (
        tuple(a for a in suite_rows if ALGORITHMS[a].family == f) for f in ("solver", "delassus", "event"))

    m, meth = suite["machine"], suite["method"]
    by: dict = {}
    for r in suite["results"]:
        by.setdefault((r["set"], r["algorithm"]), []).append(r)
    out = [f"# rbdgen constrained-dynamics benchmarks — {suite['date']}", "",
           f"Specialized C vs rbdgen's generic C vs Pinocchio {m['versions']['pinocchio']} on the named "
           f"constraint sets, one process per row, implementations interleaved, `{m['flags']}`, "
           f"{meth['rounds']} rounds × {meth['batch']} calls; CPU {m['cpu']} ({m['cores']} cores), load average "
           f"{m.get('loadavg')} → {m.get('loadavg_end')}. Ratios > 1: the specialized C is faster. Outputs "
           "cross-checked before timing, except against contactABA (Pinocchio's constrainedABA): its λ is not "
           "the constraint force and its K-th iterate is not ours, so its column gives the relative ddq "
           "difference at this K (Δ) instead of refusing (converged, 60 iterations at μ = 1e-4: 1.2e-12 on "
           "talos' soles, 2.6e-5 on ur5's 6D tool0)."]
    best = {}

    def rows_of(algorithms):
        for (name, alg), rs in by.items():
            if alg in algorithms:
                ok = [r for r in rs if "error" not in r]
                yield name, alg, ok, rs

    def section(title, head, algorithms):
        if any(alg in algorithms for _, alg in by):
            out.extend(["", title, "", head, "|---|--:|---|" + "--:|" * (head.count("|") - 4)])

    section(f"## Proximal solvers, K = {meth['iterations']} (Pinocchio: `max_iter = {meth['iterations']}`, "
            "accuracy 0, same μ)",
            "| set | m | solver | spec µs | generic / spec | constraintDynamics / spec | contactABA / spec |",
            CONSTRAINED_SOLVERS)
    for name, alg, ok, rs in rows_of(CONSTRAINED_SOLVERS):
        if not ok:
            out.append(f"| {name} | | {alg} | | | | {rs[0]['error']} |")
            continue
        spec = ok[0]["implementations"]["specialized"]["median_ns"] / 1000
        gen = next((r["ratios"]["generic/specialized"] for r in ok if "generic/specialized" in r["ratios"]), None)
        cd, _ = _pin_ratio(ok, "constraint_dynamics")
        ca, ca_row = _pin_ratio(ok, "contact_aba")
        ca_text = _fmt(ca) if ca_row is None else \
            f"{_fmt(ca)} (ddq Δ {_fmt(ca_row['verify']['max_rel_diff'].get('pinocchio'), 2)})"
        mu = ok[0].get("options", {}).get("mu")
        label = alg + (f" (μ = {mu:g})" if mu is not None else "")
        out.append(f"| {name} | {ok[0]['m']} | {label} | {_fmt(spec)} | {_fmt(gen)} | {_fmt(cd)} | {ca_text} |")
        if alg == "constrained_aba":
            best[name] = min((x for x in (cd, ca) if x is not None), default=None)
    section(f"## Delassus matrix and damped inverses (μ = {DELASSUS_MU:g})",
            "| set | m | algorithm | spec µs | generic / spec | damped Delassus⁻¹ (Pinocchio) / spec |",
            DELASSUS_ALGORITHMS)
    def one_peer_rows(algorithms):
        """spec µs, generic / spec, Pinocchio / spec per row; returns {(set, algorithm): pin ratio}."""
        pins = {}
        for name, alg, ok, rs in rows_of(algorithms):
            if not ok:
                out.append(f"| {name} | | {alg} | | | {rs[0]['error']} |")
                continue
            r = ok[0]
            pins[name, alg] = r["ratios"].get("pinocchio/specialized")
            out.append(f"| {name} | {r['m']} | {alg} | {_fmt(r['implementations']['specialized']['median_ns'] / 1000)} "
                       f"| {_fmt(r['ratios'].get('generic/specialized'))} | {_fmt(pins[name, alg])} |")
        return pins

    osim = {name: pin for (name, alg), pin in one_peer_rows(DELASSUS_ALGORITHMS).items() if alg == "caba_osim"}
    section("## Impact map (K = 1, μ = 1e-4) and unilateral contacts (prox_lcp, the contacts made "
            f"one-sided, K = {meth['iterations']})",
            "| set | m | algorithm | spec µs | generic / spec | impulseDynamics (Pinocchio) / spec |",
            EVENT_ALGORITHMS)
    one_peer_rows(EVENT_ALGORITHMS)
    return "\n".join(out + _constrained_targets(best, osim) + _errors(suite)) + "\n"


def _constrained_targets(best: dict, osim: dict) -> list[str]:
    """The constrained suite's targets per set: Pinocchio's fastest solver / constrainedABA,
    Pinocchio's damped Delassus inverse / cABA-OSIM."""
    out = ["", "## Targets", "", "| set | Pinocchio's fastest solver / constrainedABA | "
           "Pinocchio damped Delassus⁻¹ / cABA-OSIM |", "|---|--:|--:|"]
    return out + [f"| {name} | {_fmt(best.get(name))} | {_fmt(osim.get(name))} |"
                  for name in dict.fromkeys([*best, *osim])]


def _errors(suite: dict) -> list[str]:
    errors = [r for r in suite["results"] if "error" in r]
    return ["", "## Errors", ""] + [f"- {r['set']}/{r['algorithm']} ({r.get('pin_peer')}): {r['error']}"
                                    for r in errors] if errors else []


def write_constrained(suite: dict, out_dir: Path, stem: str) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{stem}.json", "md": out_dir / f"{stem}.md"}
    paths["json"].write_text(json.dumps(suite, indent=1) + "\n")
    paths["md"].write_text(constrained_markdown(suite))
    return paths
