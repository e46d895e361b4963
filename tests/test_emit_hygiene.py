"""Issue 12 §6: names from input files never reach the emitted text unescaped, and
kernels built with different options get different symbols (they link together)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from test_urdf import joint, link, robot, write

import gen
from gen.cli import main
from gen.constraint_spec import parse_constraints
from gen.emit import emit, inert_text

EVIL = "evil */ #error injected /*"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def test_inert_text_keeps_names_and_neutralises_the_rest():
    assert inert_text("3D:FL_FOOT,6D:a~b") == "3D:FL_FOOT,6D:a~b"
    for bad in (EVIL, "a\nb", "x${HOME}", "q\"'`;#"):
        out = inert_text(bad)
        assert "*/" not in out and "/*" not in out and "\n" not in out and "$" not in out and "#" not in out


def evil_robot(tmp_path):
    xml = robot(link("base"), link("arm*/x"), joint("j*/1", "revolute", "base", "arm*/x", axis="0 0 1"),
                name=EVIL.replace('"', ""))
    return gen.load_robot(str(write(tmp_path, xml)))


@needs_cc
def test_hostile_names_do_not_reach_the_c_source(tmp_path):
    model = evil_robot(tmp_path)
    assert model.name == EVIL
    k = gen.build(model, "aba", out_dir=tmp_path / "aba")          # compiles: no #error
    for f in (tmp_path / "aba").iterdir():
        if f.name != "manifest.json":
            assert "#error" not in f.read_text(), f"{f.name} carries the robot name unescaped"
    rng = np.random.default_rng(0)
    q, v, tau = model.random_q(rng), rng.normal(size=1), rng.normal(size=1)
    assert np.allclose(k(q, v, tau), gen.run(model, "aba", q, v, tau), rtol=1e-12, atol=1e-12)
    cset = parse_constraints(model, "3D:arm*/x")
    bf = emit(model, "constrained_aba", cset, out_dir=tmp_path / "ca")
    header = (bf.path / bf.manifest["header"]).read_text()
    assert "3D:arm??x" in header and "arm*/x" not in header


def test_options_give_distinct_symbols(tmp_path):
    model = gen.load_robot("solo12")
    spec = "3D:FL_FOOT,3D:HR_FOOT"
    builds = {
        "default": emit(model, "constrained_aba", spec, out_dir=tmp_path / "a"),
        "default K": emit(model, "constrained_aba", spec, out_dir=tmp_path / "b", iterations=3),
        "K = 5": emit(model, "constrained_aba", spec, out_dir=tmp_path / "c", iterations=5),
        "driver": emit(model, "constrained_aba", spec, out_dir=tmp_path / "d", tol=1e-9, max_iter=20),
        "Kd = 10": emit(model, "constrained_aba", parse_constraints(model, spec, Kd=10.0), out_dir=tmp_path / "e"),
        "Kd = 20": emit(model, "constrained_aba", parse_constraints(model, spec, Kd=20.0), out_dir=tmp_path / "f"),
    }
    sym = {k: b.prefix for k, b in builds.items()}
    assert sym["default"] == sym["default K"] == "rbd_solo12_constrained_aba_3d_fl_foot_3d_hr_foot"
    others = [sym[k] for k in ("K = 5", "driver", "Kd = 10", "Kd = 20")]
    assert len(set(others) | {sym["default"]}) == 5, sym
    assert all(s.startswith(sym["default"] + "_v") and len(s) == len(sym["default"]) + 8 for s in others)


@needs_cc
def test_variants_link_into_one_program(tmp_path):
    """A fixed-K kernel and an early-exit driver of the same robot, algorithm and set,
    compiled and linked together (no duplicate symbol)."""
    model = gen.load_robot("ur5")
    a = emit(model, "prox_ltl", "3D:tool0", out_dir=tmp_path / "fixed", iterations=2)
    b = emit(model, "prox_ltl", "3D:tool0", out_dir=tmp_path / "driver", tol=1e-10, max_iter=30)
    main_c = tmp_path / "main.c"
    main_c.write_text(f'#include "{a.manifest["header"]}"\n#include "{b.manifest["header"]}"\n'
                      f"int main(void) {{ return (&{a.prefix} == 0) + (&{b.prefix} == 0); }}\n")
    srcs = [str(bf.path / s) for bf in (a, b) for s in bf.manifest["sources"]]
    out = subprocess.run(["cc", "-O0", "-I", str(a.path), "-I", str(b.path), str(main_c), *srcs, "-lm",
                          "-o", str(tmp_path / "app")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert subprocess.run([str(tmp_path / "app")]).returncode == 0


def test_cli_prefix(tmp_path, capsys):
    assert main(["build", "chain:3", "-a", "rnea", "--prefix", "my_rnea", "-o", str(tmp_path / "k"), "-q",
                 "--format", "csv"]) == 0
    assert (tmp_path / "k" / "my_rnea.h").exists() and "my_rnea" in capsys.readouterr().out
    assert main(["build", "chain:3", "-a", "rnea", "--prefix", "1bad", "-o", str(tmp_path / "j"), "-q"]) == 2
    assert "not a C identifier" in capsys.readouterr().err


@needs_cc
@pytest.mark.parametrize("robot, algorithm, spec, options", [
    ("ur5", "aba", None, {}),
    ("ur5", "crba", None, {"avoid_stack": True}),
    ("ur5", "constrained_aba", "3D:tool0", {}),
    ("ur5", "prox_ltl", "3D:tool0", {"tol": 1e-9, "max_iter": 20}),
    ("ur5", "prox_ltl", "3D:tool0", {"tol": 1e-9, "max_iter": 20, "avoid_stack": True}),
    ("ur5", "aba", None, {"split_above": 300}),
])
def test_c_is_warning_free(tmp_path, robot, algorithm, spec, options):
    """The emitted C compiles without a warning under -std=c99 -Wall -Wextra -pedantic."""
    bf = emit(robot, algorithm, spec, out_dir=tmp_path / "k", **options)
    for src in bf.manifest["sources"]:
        out = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-c",
                              str(bf.path / src), "-o", str(tmp_path / (src + ".o"))],
                             capture_output=True, text=True)
        assert out.returncode == 0, f"{src}: {out.stderr[-2000:]}"


@needs_cc
@pytest.mark.parametrize("spec, options", [(None, {"avoid_stack": True}),
                                           ("3D:tool0", {"tol": 1e-9, "max_iter": 20})])
def test_null_work_is_an_error_code_not_a_crash(tmp_path, spec, options):
    """work == NULL with a non-zero work size: RBDGEN_ERR_INVALID_ARGUMENT (-3), outputs NaN."""
    model = gen.load_robot("ur5")
    algorithm = "crba" if spec is None else "prox_ltl"
    k = gen.build(model, algorithm, spec, out_dir=tmp_path / "k", **options)
    assert k.work_size > 0
    rng = np.random.default_rng(1)
    ins = [model.random_q(rng)] + [rng.normal(size=model.nv) for _ in range(len(k.function["inputs"]) - 1)]
    outs = [np.zeros(o["size"]) for o in k.function["outputs"]]
    rc = k._c(*[k._ptr(np.ascontiguousarray(a)) for a in ins], *[k._ptr(o) for o in outs], k.ffi.NULL)
    assert rc == -3 and all(np.isnan(o).all() for o in outs)
