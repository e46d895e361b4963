"""The CLI never prints a traceback (issue 12 §7): unwritable or non-directory --out,
a negative --seed, an unbalanced quote in --flags, and a fault of rbdgen's own (one
line, exit 3, the traceback with RBDGEN_TRACEBACK=1); verify --rtol prints the tolerance
applied on each row and a final PASS/FAIL line."""
import io
import json

import pytest

import gen
from gen.cli import main


def _error(capsys, *argv):
    rc = main(list(argv))
    err = capsys.readouterr().err
    assert rc == 2, f"{argv}: exit {rc}"
    lines = [ln for ln in err.splitlines() if ln.startswith("rbdgen: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_out_is_an_existing_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert "file" in _error(capsys, "build", "chain:2", "-a", "rnea", "--out", str(f), "-q")


def test_out_is_unwritable(tmp_path, capsys):
    assert _error(capsys, "build", "chain:2", "-a", "rnea", "--out", "/proc/rbdgen/out", "-q")


def test_negative_seed(capsys):
    assert "non-negative integer" in _error(capsys, "verify", "chain:2", "-a", "rnea", "--seed", "-1")


def test_unbalanced_quote_in_flags(tmp_path, capsys):
    assert "compiler flags" in _error(capsys, "build", "chain:2", "-a", "rnea", "--out", str(tmp_path / "b"),
                                      "--flags", "-O2 '-DX", "-q")


def test_an_internal_fault_is_one_line_and_its_traceback_on_request(monkeypatch, capsys):
    def broken(*_, **__):
        raise ValueError("a fault\nover two lines")
    monkeypatch.setattr("gen.cli.load_robot", broken)
    monkeypatch.delenv("RBDGEN_TRACEBACK", raising=False)
    rc = main(["robots"])
    err = capsys.readouterr().err
    assert rc == 3 and "Traceback" not in err
    assert err.strip().splitlines() == ["rbdgen: internal error: ValueError: a fault over two lines "
                                        "(please report it; RBDGEN_TRACEBACK=1 prints where)"]
    monkeypatch.setenv("RBDGEN_TRACEBACK", "1")
    with pytest.raises(ValueError, match="a fault"):
        main(["robots"])


def test_a_closed_pipe_is_not_an_error(monkeypatch, capsys):
    def closed(*_, **__):                            # `rbdgen robots | head`: the reader has gone
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr("gen.cli.render_table", closed)
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert main(["robots"]) == 0 and capsys.readouterr().err == ""


def test_verify_prints_the_tolerance_applied_per_row(capsys):
    assert main(["verify", "chain:3", "-a", "rnea,aba", "-n", "2", "--rtol", "1e-10", "--format", "json", "-q"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert [r["rtol"] for r in rows] == [1e-10, 1e-10]
    assert "PASS" in out.err


# --- issue 12 §7: solver options for opcount and verify, -a all, ambiguous frames -----------

def test_opcount_and_verify_take_the_solver_options(capsys):
    spec = "3D:FL_FOOT,3D:FR_FOOT"
    totals = {}
    for k in (2, 5):
        assert main(["opcount", "solo12", "-a", "prox_ltl", "-c", spec, "--iterations", str(k), "--format",
                     "json"]) == 0
        totals[k] = json.loads(capsys.readouterr().out)["algorithms"]["prox_ltl"]["total"]
    assert totals[5] > totals[2]
    assert main(["opcount", "solo12", "-a", "prox_ltl,caba_osim,rnea", "-c", spec, "--mu", "1e-4", "--format",
                 "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["algorithms"]
    assert rows["prox_ltl"]["options"] == rows["caba_osim"]["options"] == {"mu": 1e-4} and "options" not in rows["rnea"]
    assert main(["opcount", "solo12", "-a", "rnea,aba", "--mu", "1e-4"]) == 2
    assert "--mu applies to none of rnea, aba" in capsys.readouterr().err
    assert main(["verify", "solo12", "-a", "prox_ltl", "-c", spec, "--iterations", "5", "--samples", "1", "-q",
                 "--format", "csv"]) == 0
    capsys.readouterr()


def test_opcount_all_says_what_it_left_out(capsys):
    assert main(["opcount", "chain:3", "-a", "all", "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert "leaves out the constrained algorithms" in err and "prox_ltl" in err


def test_ambiguous_frame_name_lists_both(tmp_path, capsys):
    urdf = tmp_path / "twin.urdf"
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" '
                'izz="0.1"/></inertial>')
    urdf.write_text(f'<robot name="twin"><link name="base"/><link name="a">{inertial}</link>'
                    f'<link name="tip">{inertial}</link>'
                    '<joint name="tip" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>'
                    '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
                    '<joint name="tip_mount" type="fixed"><parent link="a"/><child link="tip"/>'
                    '<origin xyz="0 0 0.5"/></joint></robot>')
    model = gen.load_robot(str(urdf))
    assert model.frame("tip_mount").name == "tip_mount"
    with pytest.raises(gen.RbdgenError, match=r"frame name 'tip' is ambiguous \(2 frames"):
        model.frame("tip")
    assert main(["opcount", str(urdf), "-a", "prox_ltl", "-c", "3D:tip"]) == 2
    assert "ambiguous" in capsys.readouterr().err
