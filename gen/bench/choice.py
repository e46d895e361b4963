"""The automatic choice (gen/choose.py) against measured times (issue 15 §4).

``python -m gen.bench.choice [SUITE_JSON] [TIMES_JSON ...]`` prints, for every
bilateral named constraint set of :data:`opcount.constrained.CONSTRAINED_SETS` (the
redundant ones left out, as the constrained suite does) and for ``auto`` and
``auto_osim``: each candidate's op count, weighted cost or exclusion, and its measured
median time -- from ``rbdgen bench ... --format json`` outputs given as TIMES_JSON
(measured now) or else from the constrained suite's JSON (SUITE_JSON, default the newest
``bench/reports/*-constrained.json``) -- and whether the choice is within 10 % of the
fastest measured candidate.  Default options (K = 3, mu = 1e-6).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from opcount.constrained import CONSTRAINED_SETS

from ..choose import AUTO, choose
from ..errors import RbdgenError
from ..robots import load_robot

REPORTS = Path(__file__).resolve().parents[2] / "bench" / "reports"
#: the choice is "within" when its measured time is at most this factor of the fastest
WITHIN = 1.10


def bilateral_sets() -> dict[str, tuple[str, str]]:
    """The named sets the choice is checked on: bilateral, not redundant (as the
    constrained suite)."""
    return {k: v for k, v in CONSTRAINED_SETS.items() if "+" not in v[1] and not k.endswith("_x2")}


def _times(sources) -> dict[tuple[str, str, str], float]:
    """(robot, constraints, algorithm) -> median ns of the specialised kernel at K = 3
    (the first entry of a repeated key: the suite times constrained_aba against two peers).
    A source is a JSON path or already a list of benchmark results; failed ones are left out."""
    out = {}
    for p in sources:
        d = p if isinstance(p, list) else json.loads(Path(p).read_text())
        for r in d["results"] if isinstance(d, dict) else d:
            if "error" in r:
                continue
            if (r.get("options") or {}).get("iterations", 3) not in (3, None) and r.get("iterations") not in (3, None):
                continue
            key = (r["robot"], r["constraints"], r["algorithm"])
            out.setdefault(key, r["implementations"]["specialized"]["median_ns"])
    return out


def rows(suite, now=(), sets=None) -> list[dict]:
    """Per set (default :func:`bilateral_sets`) and automatic choice, each candidate's ops,
    cost and time (from ``now``, else from the constrained suite's JSON ``suite``), then a
    summary row."""
    fresh, old = _times(now), _times([suite]) if suite else {}
    out = []
    for name, (robot, spec) in (sets or bilateral_sets()).items():
        try:
            model = load_robot(robot)
        except RbdgenError as e:
            print(f"skipped {name}: {e}", file=sys.stderr)
            continue
        for auto in AUTO:
            ch = choose(model, auto, spec)
            timed = {}
            for c in ch.candidates:
                key = (robot, spec, c["algorithm"])
                t, src = (fresh[key], "now") if key in fresh else (old.get(key), "suite")
                timed[c["algorithm"]] = t
                out.append({"set": name, "auto": auto, "algorithm": c["algorithm"], "status": c["status"],
                            "ops": c["ops"], "cost": c["cost"], "ns": t, "source": src if t else None,
                            "reason": c["reason"]})
            ok = {a: t for a, t in timed.items() if t is not None
                  and any(c["algorithm"] == a and c["status"] != "excluded" for c in ch.candidates)}
            best = min(ok, key=ok.get) if ok else None
            mine = ok.get(ch.chosen)
            out.append({"set": name, "auto": auto, "algorithm": f"=> {ch.chosen}", "status": "summary",
                        "fastest": best, "ratio": None if mine is None or best is None else mine / ok[best]})
    return out


def markdown(table: list[dict]) -> str:
    lines = ["| set | auto | algorithm | status | ops | cost | median ns | source |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for r in table:
        if r["status"] == "summary":
            ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
            verdict = "n/a" if r["ratio"] is None else ("yes" if r["ratio"] <= WITHIN else "**no**")
            lines.append(f"| {r['set']} | {r['auto']} | **{r['algorithm']}** | fastest measured: {r['fastest']}, "
                         f"chosen/fastest {ratio}, within 10 %: {verdict} | | | | |")
            continue
        ns = "n/a" if r["ns"] is None else f"{r['ns']:.0f}"
        cost = "" if r["cost"] is None else f"{r['cost']:.0f}"
        why = f"excluded: {r['reason'][:60]}..." if r["status"] == "excluded" else r["status"]
        lines.append(f"| {r['set']} | {r['auto']} | {r['algorithm']} | {why} | {r['ops'] or ''} | "
                     f"{cost} | {ns} | {r['source'] or ''} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    suites = sorted(REPORTS.glob("*-constrained.json"))
    suite = argv[0] if argv else (suites[-1] if suites else None)
    print(markdown(rows(suite, argv[1:])), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
