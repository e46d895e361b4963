"""The CLI never prints a traceback (issue 12 §7): unwritable or non-directory --out,
a negative --seed, an unbalanced quote in --flags; verify --rtol prints the tolerance
applied on each row and a final PASS/FAIL line."""
import json

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


def test_verify_prints_the_tolerance_applied_per_row(capsys):
    assert main(["verify", "chain:3", "-a", "rnea,aba", "-n", "2", "--rtol", "1e-10", "--format", "json", "-q"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert [r["rtol"] for r in rows] == [1e-10, 1e-10]
    assert "PASS" in out.err
