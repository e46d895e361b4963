"""The ``rbdgen`` command line (gen/cli.py): every command runs and prints its table in
each format; user errors print exactly one line ``rbdgen: error: ...`` and exit 2."""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gen.cli import main, render_table

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def compile_cache(request, monkeypatch):
    if not os.environ.get("RBDGEN_CACHE"):
        monkeypatch.setenv("RBDGEN_CACHE", str(request.config.cache.mkdir("rbdgen-build")))


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc, err, *needles):
    lines = err.strip().splitlines()
    assert rc == 2, f"exit status {rc}, stderr: {err}"
    assert len(lines) == 1 and lines[0].startswith("rbdgen: error: "), f"not one error line: {err!r}"
    for n in needles:
        assert n in lines[0]


# --- tables ----------------------------------------------------------------------------------

def test_render_table_formats():
    rows = [{"a": "x", "b": 1.5e-16, "c": None}, {"a": "yy", "b": 2.0, "c": 3}]
    md = render_table(rows, ["a", "b", "c"], "md").splitlines()
    assert md[0].startswith("| a ") and set(md[1]) <= set("|-:") and len(md) == 4
    assert "1.5e-16" in md[2] and "n/a" in md[2]
    assert list(csv.reader(io.StringIO(render_table(rows, ["a", "b", "c"], "csv"))))[2] == ["yy", "2.0", "3"]
    assert json.loads(render_table(rows, ["a", "b", "c"], "json"))[0] == {"a": "x", "b": 1.5e-16, "c": None}


# --- commands --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["md", "csv", "json"])
def test_robots(capsys, fmt):
    rc, out, _ = run(capsys, "robots", "--format", fmt)
    assert rc == 0
    for name in ("humanoid30", "chain:N", "bintree:N", "fourbar", "talos", "ur5"):
        assert name in out
    if fmt == "json":
        rows = json.loads(out)
        assert {"robot", "kind", "nq", "nv", "description"} <= set(rows[0])


def test_robots_frames(capsys):
    rc, out, _ = run(capsys, "robots", "--frames", "humanoid30", "--format", "json")
    assert rc == 0
    frames = {r["frame"]: r for r in json.loads(out)}
    assert frames["left_foot"]["body"] == "left_leg6"


def test_opcount(capsys):
    rc, out, _ = run(capsys, "opcount", "humanoid30", "--algorithm", "rnea", "--format", "json")
    assert rc == 0
    assert "rnea" in out and json.loads(out)
    rc, out, _ = run(capsys, "opcount", "chain:4", "--algorithm", "all", "--format", "csv")
    assert rc == 0 and "aba" in out and "crba" in out


def test_build(capsys, tmp_path):
    rc, out, err = run(capsys, "build", "chain:3", "--algorithm", "aba", "--out", str(tmp_path / "k"), "--format", "json")
    assert rc == 0, err
    (row,) = json.loads(out)
    assert row["symbol"] == "rbd_chain3_aba" and row["folder"] == str(tmp_path / "k")
    assert (tmp_path / "k" / "rbd_chain3_aba.h").exists() and (tmp_path / "k" / "manifest.json").exists()
    assert "compile" in err and "trace" in err          # progress with timings on stderr
    rc, out, err = run(capsys, "build", "chain:3", "-a", "aba", "-o", str(tmp_path / "k"), "--quiet")
    assert rc == 0 and err == ""


def test_build_early_exit_driver(capsys, tmp_path):
    from gen import RbdgenError, load_robot

    try:
        load_robot("solo12")
    except RbdgenError as e:
        pytest.skip(str(e))
    spec = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
    rc, out, err = run(capsys, "build", "solo12", "-a", "constrained_aba", "-c", spec, "--tol", "1e-10",
                       "--max-iter", "50", "--out", str(tmp_path / "k"), "--format", "json")
    assert rc == 0, err
    (row,) = json.loads(out)
    man = json.loads((tmp_path / "k" / "manifest.json").read_text())
    assert (man["iterations"], man["tolerance"], man["max_iter"]) == (None, 1e-10, 50)
    assert row["ops"] == man["functions"][0]["opcount"]["total"] and "early-exit driver" in err
    rc, out, err = run(capsys, "build", "solo12", "-a", "prox_ltl", "-c", spec, "--iterations", "4",
                       "--out", str(tmp_path / "fixed"), "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "fixed" / "manifest.json").read_text())["iterations"] == 4


def test_verify(capsys):
    rc, out, err = run(capsys, "verify", "chain:4", "--algorithm", "rnea,crba,ltdl", "--samples", "2", "--format", "json")
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["algorithm"] for r in rows] == ["rnea", "crba", "ltdl"]
    for r in rows:
        assert r["status"] == "ok" and r["err_c_numpy"] < 1e-12
        try:
            import pinocchio  # noqa: F401
        except ImportError:
            continue
        assert r["err_c_pinocchio"] is not None and r["err_c_pinocchio"] < 1e-9


def test_demo(capsys, tmp_path):
    rc, out, err = run(capsys, "demo", "--out", str(tmp_path / "demo"), "--samples", "2", "--format", "json")
    assert rc == 0, err
    rows = {r["algorithm"]: r for r in json.loads(out)}
    assert {"rnea", "crba", "aba"} <= set(rows)
    for name, r in rows.items():
        assert r["ops"] > 0 and Path(r["folder"]).is_dir(), name
    assert "demo done in" in err


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "gen.cli", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0
    for cmd in ("robots", "opcount", "build", "verify", "demo"):
        assert cmd in out.stdout
    for cmd in ("robots", "opcount", "build", "verify", "demo"):
        sub = subprocess.run([sys.executable, "-m", "gen.cli", cmd, "--help"], cwd=ROOT, capture_output=True, text=True)
        assert sub.returncode == 0 and "--format" in sub.stdout, cmd


# --- user errors: one line, exit 2 -----------------------------------------------------------

def test_bad_robot(capsys):
    assert_user_error(*run(capsys, "opcount", "no_such_robot", "-a", "rnea")[::2], "unknown robot 'no_such_robot'")


def test_bad_algorithm(capsys):
    assert_user_error(*run(capsys, "verify", "chain:3", "-a", "nope")[::2], "unknown algorithm 'nope'")


def test_bad_frame(capsys):
    rc, _, err = run(capsys, "robots", "--frames", "nope")
    assert_user_error(rc, err, "unknown robot")
    rc, _, err = run(capsys, "opcount", "humanoid30", "-a", "prox_ltl", "-c", "6D:no_such_frame")
    assert_user_error(rc, err, "no_such_frame")


def test_bad_arguments(capsys):
    assert_user_error(*run(capsys, "robots", "--format", "xml")[::2], "xml")
    assert_user_error(*run(capsys, "frobnicate")[::2])
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba")[::2], "--out")
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba", "--iterations", "3", "-o", "x")[::2], "iterations")
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba", "--tol", "1e-9", "-o", "x")[::2], "--tol")
    assert_user_error(*run(capsys, "build", "fourbar", "-a", "prox_ltl", "-c", "3D:tip~anchor", "--max-iter", "9",
                           "-o", "x")[::2], "--max-iter")
    assert_user_error(*run(capsys, "verify", "chain:3", "--samples", "0")[::2], "samples")


def test_user_error_in_a_subprocess_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "gen.cli", "verify", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "Traceback" not in out.stderr
    assert out.stderr.startswith("rbdgen: error: unknown robot 'nope'")
