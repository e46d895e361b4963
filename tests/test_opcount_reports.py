"""Committed op-count reports are up to date (docs/DESIGN.md §3.7-3.8, §6d golden files), and
the report renderers used by ``rbdgen opcount`` work."""
import csv
import io
import json

import pytest
from conftest import load_or_skip

import gen
from gen.errors import RbdgenError
from opcount import report

REFRESH = "run `python -m gen.regenerate` to refresh the committed reports in opcount/reports/"
GOLDEN_ROBOTS = ["ur5", "solo12"]


@pytest.mark.parametrize("robot", GOLDEN_ROBOTS)
def test_committed_robot_json_is_current(robot, tmp_path):
    model = load_or_skip(robot)
    committed = report.REPORTS_DIR / f"{robot}.json"
    assert committed.exists(), f"{committed} missing: {REFRESH}"
    report.write_robot(model, tmp_path, plot=False)
    fresh = (tmp_path / f"{robot}.json").read_text()
    assert fresh == committed.read_text(), f"op counts of {robot} changed: {REFRESH}"


def test_committed_featherstone_json_is_current():
    committed = json.loads((report.REPORTS_DIR / "featherstone.json").read_text())
    fresh = json.loads(report.to_json(report.featherstone_table(["humanoid30", "bintree:31"])))
    for name in fresh:
        assert fresh[name] == committed[name], f"Featherstone table for {name} changed: {REFRESH}"


def test_committed_reports_cover_every_named_robot():
    from gen.robots.named import NAMED_ROBOTS

    missing = [r for r in NAMED_ROBOTS if not (report.REPORTS_DIR / f"{r}.json").exists()
               or not (report.REPORTS_DIR / f"{r}.md").exists()]
    assert not missing, f"no committed report for {missing}: {REFRESH}"
    summary = (report.REPORTS_DIR / "summary.md").read_text()
    assert all(f"| {r} |" in summary for r in NAMED_ROBOTS), REFRESH


def test_json_is_deterministic_and_sorted():
    a = report.render("chain:5", ["all"], "json")
    assert a == report.render("chain:5", ["all"], "json")
    data = json.loads(a)
    assert list(data) == sorted(data)
    assert list(data["algorithms"]) == sorted(data["algorithms"])


def test_render_formats():
    md = report.render("humanoid30", ["aba", "crba"], "md")
    assert "| aba |" in md and "| crba |" in md and "forward" in md
    rows = list(csv.DictReader(io.StringIO(report.render("humanoid30", ["aba", "crba"], "csv"))))
    assert [r["algorithm"] for r in rows] == ["aba", "crba"]
    aba = rows[0]
    assert int(aba["total"]) == sum(int(aba[c]) for c in report.CLASSES)
    assert int(aba["total"]) == sum(int(aba[k]) for k in aba if k.startswith("phase:") and aba[k])
    assert rows[1]["phase:backward"] == ""                  # crba has no backward phase
    data = json.loads(report.render("humanoid30", ["aba"], "json"))
    assert data["algorithms"]["aba"]["total"] == gen.opcount("humanoid30", "aba")["total"]


def test_render_all_and_errors():
    data = json.loads(report.render("chain:3", ["all"], "json"))
    from gen.algorithms import ALGORITHMS

    assert set(data["algorithms"]) == {a for a, alg in ALGORITHMS.items() if not alg.constrained}
    with pytest.raises(RbdgenError, match="unknown format"):
        report.render("chain:3", ["aba"], "xml")
    with pytest.raises(RbdgenError, match="unknown algorithm"):
        report.render("chain:3", ["aba", "nope"], "md")


def test_write_reports_smoke(tmp_path):
    """The whole pipeline on two cheap synthetic robots (the PNG only with matplotlib)."""
    lines = []
    report.write_reports(tmp_path, robots=["chain:4", "bintree:5"], plot=True, log=lines.append,
                         featherstone_robots=["humanoid30", "bintree:7"])
    for stem in ("chain_4", "bintree_5"):
        assert (tmp_path / f"{stem}.json").exists() and (tmp_path / f"{stem}.md").exists()
    assert (tmp_path / "summary.md").exists() and (tmp_path / "featherstone.md").exists()
    assert "yes" in (tmp_path / "featherstone.md").read_text()
    assert len(lines) == 3
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "chain_4.png").stat().st_size > 0


# --- constrained solvers on the named constraint sets (opcount/constrained.py) ------------

GOLDEN_SETS = ["ur5_3d_tool0", "solo12_3d_2feet", "fourbar_cut_loop"]       # the whole regeneration takes ~85 s


def _committed_set(name):
    from opcount.constrained import CONSTRAINED_DIR

    path = CONSTRAINED_DIR / f"{name}.json"
    assert path.exists(), f"{path} missing: {REFRESH}"
    return path


@pytest.mark.parametrize("name", GOLDEN_SETS)
def test_committed_constrained_json_is_current(name, tmp_path):
    from opcount.constrained import REPORT_SETS, write_set

    robot, spec = REPORT_SETS[name]
    model = load_or_skip(robot)
    committed = _committed_set(name)
    write_set(name, model, spec, tmp_path, plot=False)
    assert (tmp_path / f"{name}.json").read_text() == committed.read_text(), \
        f"op counts of the constrained solvers on {name} changed: {REFRESH}"


def test_committed_constrained_reports_cover_every_set_and_add_up():
    """Every set has its json and md, matches its definition, and its counts partition:
    classes and phases sum to the total for every solver and K; more iterations cost more."""
    from gen.constraint_spec import parse_constraints
    from opcount.constrained import (
        CONSTRAINED_DIR,
        ITERATIONS,
        REPORT_SETS,
        SOLVERS,
    )

    summary = (CONSTRAINED_DIR / "summary.md")
    assert summary.exists(), f"{summary} missing: {REFRESH}"
    for name, (robot, spec) in REPORT_SETS.items():
        data = json.loads(_committed_set(name).read_text())
        assert (CONSTRAINED_DIR / f"{name}.md").exists(), f"{name}.md missing: {REFRESH}"
        assert f"| {name} |" in summary.read_text(), f"{name} not in the summary: {REFRESH}"
        model = load_or_skip(robot)
        assert (data["robot"], data["constraints"], data["nv"]) == (robot, spec, model.nv), f"{name}: {REFRESH}"
        assert data["m"] == parse_constraints(model, spec).m and data["iterations"] == list(ITERATIONS)
        assert list(data["algorithms"]) == sorted(SOLVERS)
        for alg, row in data["algorithms"].items():
            for k in ITERATIONS:
                run = row[str(k)]
                assert sum(run["classes"].values()) == run["total"], f"{name} {alg} K={k}: classes"
                for c in report.CLASSES:
                    assert sum(p[c] for p in run["phases"]) == run["classes"][c], f"{name} {alg} K={k}: phases, {c}"
            assert row[str(ITERATIONS[-1])]["total"] > row[str(ITERATIONS[0])]["total"], f"{name} {alg}: iterations"


def test_write_constrained_reports_smoke(tmp_path):
    """The whole pipeline on two cheap synthetic sets (the PNG only with matplotlib)."""
    from opcount.constrained import per_iteration, set_counts, write_constrained_reports

    sets = {"fourbar_loop": ("fourbar", "3D:tip~anchor"), "bintree_leaves": ("bintree:9", "3D:leaf1,6D:leaf2")}
    lines = []
    written = write_constrained_reports(tmp_path, sets=sets, log=lines.append)
    assert len(lines) == 2 and [d["set"] for d in written] == list(sets)
    data = json.loads((tmp_path / "bintree_leaves.json").read_text())
    assert data == json.loads(report.to_json(set_counts("bintree:9", "3D:leaf1,6D:leaf2", "bintree_leaves")))
    assert data["m"] == 9
    for alg in ("prox_ltl", "constrained_aba"):
        one = gen.opcount("bintree:9", alg, "3D:leaf1,6D:leaf2", iterations=1)
        assert data["algorithms"][alg]["1"]["total"] == one["total"]
        three = gen.opcount("bintree:9", alg, "3D:leaf1,6D:leaf2", iterations=3)
        assert per_iteration(data, alg) == (three["total"] - one["total"]) / 2
    md = (tmp_path / "bintree_leaves.md").read_text()
    assert "| prox_pv | 3 |" in md and "## By phase" in md
    summary = (tmp_path / "summary.md").read_text()
    assert "| fourbar_loop |" in summary and "| bintree_leaves |" in summary
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "fourbar_loop.png").stat().st_size > 0
