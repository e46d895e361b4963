"""Issue 12 §6: names from input files never reach the emitted text unescaped, and
kernels built with different options get different symbols (they link together)."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from test_urdf import joint, link, robot, write

import gen
from gen.cli import main
from gen.constraint_spec import parse_constraints
from gen.emit import CASADI_API, casadi_name, emit, emit_trace, inert_text, trace_for


def ptr(k, a):
    """A ``double *`` of kernel ``k``'s cffi to the contiguous float64 array ``a``."""
    return k.ffi.from_buffer("double[]", a)


#: compiled kernel vs NumPy (relative to max(1, max|ref|)): the same tape, rounding only
C_TOL = 1e-12
EVIL = "evil */ #error injected /*"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
SOLO = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
#: the C compilers a build folder is checked with: gcc and clang where installed
COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]

#: one kernel of every code shape: (robot, algorithm, constraints, options, emit options),
#: and the entry points it documents beyond <prefix> itself
SHAPES = {
    "scalar": ("ur5", "aba", None, {}, {}, ["kernel"]),
    "lanes": ("solo12", "aba", None, {}, {}, ["kernel"]),
    "vector_trig": ("solo12", "aba", None, {}, {"scalar_trig": "vector"}, ["kernel"]),
    "libm_trig": ("ur5", "aba", None, {}, {"scalar_trig": "libm"}, ["kernel"]),
    "products": ("solo12", "aba_derivatives", None, {}, {}, ["kernel"]),
    "split": ("ur5", "aba", None, {}, {"split_above": 300}, ["kernel"]),
    "avoid_stack": ("ur5", "crba", None, {}, {"avoid_stack": True}, ["kernel"]),
    "batch": ("solo12", "aba", None, {}, {"batch": 4}, ["kernel", "status"]),
    "driver": ("solo12", "prox_ltl", SOLO, {"tol": 1e-10, "max_iter": 50}, {}, ["setup", "step", "finish", "opts"]),
    "runtime_params": ("solo12", "constrained_aba", SOLO, {"runtime_params": True, "iterations": 3}, {},
                       ["kernel"]),
    "runtime_driver": ("solo12", "prox_ltls", SOLO, {"runtime_params": True, "tol": 1e-10, "max_iter": 20}, {},
                       ["setup", "step", "finish", "opts"]),
}


def emit_shape(name, out_dir):
    robot, algorithm, spec, options, emit_options, _ = SHAPES[name]
    return emit_trace(trace_for(robot, algorithm, spec, **options), out_dir, **emit_options)


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
    rc = k._c(*[ptr(k, np.ascontiguousarray(a)) for a in ins], *[ptr(k, o) for o in outs], k.ffi.NULL)
    assert rc == -3 and all(np.isnan(o).all() for o in outs)


@needs_cc
@needs_cmake
@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("shape", ["lanes", "products", "batch", "driver"])
def test_folder_builds_without_warnings_at_its_own_flags(tmp_path, shape, compiler):
    """Issue 32 §6: the folder's CMake Release build (-O3 -DNDEBUG -std=c99, no -march)
    with -Wall -Wextra -pedantic -Werror, gcc and clang: no warning, in particular no
    -Wpsabi note ("AVX vector return without AVX enabled changes the ABI", on by
    default), which functions returning vectors drew (gen.cwriter.vector_types)."""
    bf = emit_shape(shape, tmp_path / "k")
    build = tmp_path / "build"
    env = {**os.environ, "CC": compiler}
    for cmd in (["cmake", "-S", str(bf.path), "-B", str(build), "-DCMAKE_C_FLAGS=-Wall -Wextra -pedantic -Werror"],
                ["cmake", "--build", str(build), "--verbose"]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        assert out.returncode == 0, f"{shape} with {compiler}: {(out.stdout + out.stderr)[-3000:]}"
    assert "-O3" in out.stdout and "-march" not in out.stdout and "warning" not in out.stdout + out.stderr


@needs_cc
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_code_shape_exports_only_its_documented_symbols(tmp_path, shape):
    """Issue 12 §6, issue 32 §7: the objects of a folder define as global symbols only
    <prefix> and the entry points the header and the kernel file document (a product
    kernel's head, the parts of a split function, sin/cos routines, loops and vector
    helpers are static); nm on the library the folder's Makefile builds."""
    bf = emit_shape(shape, tmp_path / "k")
    subprocess.run(["make", "-s", "-C", str(bf.path), "CFLAGS=-O1"], check=True, capture_output=True)
    nm = subprocess.run(["nm", "-g", "--defined-only", str(bf.path / bf.manifest["library"])],
                        check=True, capture_output=True, text=True).stdout
    syms = sorted(ln.split()[-1] for ln in nm.splitlines() if len(ln.split()) == 3)
    casadi = [] if shape == "batch" else [casadi_name(bf.prefix) + s for s in ("", *CASADI_API)]
    assert syms == sorted([bf.prefix] + [f"{bf.prefix}_{e}" for e in SHAPES[shape][-1]] + casadi), syms
    if shape == "products":
        assert f"static void {bf.prefix}_kernel_head(" in (bf.path / f"{bf.prefix}_kernel.c").read_text()
    if shape == "split":
        assert max(bf.manifest["codegen"]["parts"]) > 1


@needs_cc
def test_avoid_stack_build_links_with_the_default_build(tmp_path):
    """Issue 32 §7: an avoid_stack build has another work size, so it has its own symbol
    (the variant hash): both link into one program and each computes the kernel's values."""
    model = gen.load_robot("ur5")
    a = emit(model, "crba", out_dir=tmp_path / "locals")
    b = emit(model, "crba", out_dir=tmp_path / "work", avoid_stack=True)
    assert b.prefix.startswith(a.prefix + "_v") and a.prefix == "rbd_ur5_crba"
    assert a.manifest["functions"][0]["work_size"] == 0 < b.manifest["functions"][0]["work_size"]
    q = model.random_q(np.random.default_rng(2))
    ref = np.asarray(gen.run(model, "crba", q)).ravel(order="F")
    main_c = tmp_path / "main.c"
    q_c = ", ".join(float(x).hex() for x in q)
    main_c.write_text(f"""#include <stdio.h>
#include "{a.manifest['header']}"
#include "{b.manifest['header']}"
int main(void)
{{
    static const double q[] = {{{q_c}}};
    double ma[{ref.size}], mb[{ref.size}], work[{b.manifest['functions'][0]['work_size']}];
    int i, ra = {a.prefix}(q, ma, 0), rb = {b.prefix}(q, mb, work);
    for (i = 0; i < {ref.size}; ++i) printf("%.17g %.17g\\n", ma[i], mb[i]);
    return ra != 0 || rb != 0;
}}
""")
    srcs = [str(bf.path / s) for bf in (a, b) for s in bf.manifest["sources"]]
    out = subprocess.run(["cc", "-std=c99", "-O1", "-I", str(a.path), "-I", str(b.path), str(main_c), *srcs, "-lm",
                          "-o", str(tmp_path / "app")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    run = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True)
    assert run.returncode == 0
    got = np.array([[float(x) for x in ln.split()] for ln in run.stdout.splitlines()])
    scale = max(1.0, np.max(np.abs(ref)))
    assert np.max(np.abs(got - ref[:, None])) <= C_TOL * scale
