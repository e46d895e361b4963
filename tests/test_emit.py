"""Emission (gen/emit.py, templates/): build-folder contents, determinism, the manifest
contract, symbol hygiene, and the folder building on its own with make / cmake into a
C program whose results equal the NumPy reference (docs/DESIGN.md §4 "Generated C", §6c)."""
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import rel_err

import gen
from gen.algorithms import ALGORITHMS
from gen.emit import STAMP, context, emit, emit_trace, render, sanitize, symbol_prefix
from gen.trace import trace

C_TOL = 1e-12            # relative: max|c - numpy| / max(1, max|numpy|)
PRINT_DIGITS = 17        # %.17g round-trips a double exactly

needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a C compiler and make")



@pytest.fixture(scope="module")
def humanoid_aba(tmp_path_factory):
    return emit("humanoid30", "aba", out_dir=tmp_path_factory.mktemp("emit") / "aba")


# --- names ----------------------------------------------------------------------------------

def test_sanitize_and_prefix():
    assert sanitize("chain:12") == "chain12"
    assert symbol_prefix("chain:12", "aba") == "rbd_chain12_aba"
    assert symbol_prefix("talos", "prox_ltl", "6D:left_sole_link,6D:right_sole_link") == \
        "rbd_talos_prox_ltl_6d_left_sole_link_6d_right_sole_link"
    long = symbol_prefix("talos", "prox_pv", ",".join(f"6D:frame_number_{i}" for i in range(6)))
    assert re.fullmatch(r"rbd_talos_prox_pv_c[0-9a-f]{10}", long)


# --- folder contents ----------------------------------------------------------------------------

def test_folder_has_every_file(humanoid_aba):
    names = sorted(p.name for p in humanoid_aba.path.iterdir())
    assert names == sorted(["rbd_humanoid30_aba.h", "rbd_humanoid30_aba.c", "rbd_humanoid30_aba_kernel.c",
                            "rbd_humanoid30_aba.cdef", "manifest.json", "Makefile", "CMakeLists.txt",
                            "rbd_humanoid30_aba.pc.in", "rbd_humanoid30_aba_casadi.c"])
    assert humanoid_aba.header_path.exists()
    assert [p.name for p in humanoid_aba.sources] == ["rbd_humanoid30_aba.c", "rbd_humanoid30_aba_kernel.c",
                                                      "rbd_humanoid30_aba_casadi.c"]


def test_every_file_is_stamped(humanoid_aba):
    for name, text in humanoid_aba.files.items():
        assert STAMP in "".join(text.splitlines()[:2]), f"{name} lacks the '{STAMP}' stamp at its top"
    assert "/tmp" not in "".join(humanoid_aba.files.values()), "absolute paths leaked into the output"


def test_manifest_contract(humanoid_aba):
    man = json.loads((humanoid_aba.path / "manifest.json").read_text())
    assert man == humanoid_aba.manifest
    model = gen.load_robot("humanoid30")
    assert (man["robot"], man["algorithm"], man["constraints"]) == ("humanoid30", "aba", None)
    assert (man["nq"], man["nv"], man["m"], man["iterations"]) == (model.nq, model.nv, 0, None)
    (f,) = man["functions"]
    assert f["symbol"] == "rbd_humanoid30_aba"
    assert f["inputs"] == [{"name": "q", "size": 31}, {"name": "v", "size": 30}, {"name": "tau", "size": 30}]
    assert [(o["name"], o["size"]) for o in f["outputs"]] == [("ddq", 30)]
    assert isinstance(f["work_size"], int) and f["work_size"] >= 0
    assert f["opcount"]["total"] > 0


def test_opcounts_in_header_and_manifest_match_the_counter():
    import opcount
    tr = trace(gen.load_robot("chain:5"), "crba")
    ctx = context(tr)
    files = render(ctx)
    counts = opcount.count_trace(tr)
    assert ctx["manifest"]["functions"][0]["opcount"]["total"] == counts["total"]["total"]
    header = files["rbd_chain5_crba.h"]
    assert re.search(rf"total\s+{counts['total']['total']} = add {counts['total']['add']} ", header)
    for p in counts["phases"]:
        assert re.search(rf"{p['name']}\s+{p['total']} =", header), f"phase {p['name']} missing from header"


def test_header_declares_the_abi_in_manifest_order(humanoid_aba):
    h = humanoid_aba.files["rbd_humanoid30_aba.h"]
    decl = re.search(r"int rbd_humanoid30_aba\((.*?)\);", h).group(1)
    params = [p.split("*")[-1].strip().replace("RBDGEN_RESTRICT", "").strip() for p in decl.split(",")]
    assert params == ["q", "v", "tau", "ddq", "work"]
    assert "#define RBD_HUMANOID30_ABA_NV 30" in h
    assert f"#define RBD_HUMANOID30_ABA_WORK_SIZE {humanoid_aba.manifest['functions'][0]['work_size']}" in h
    assert "#define RBDGEN_ERR_NONFINITE_INPUT (-1)" in h
    cdef = humanoid_aba.cdef
    assert "int rbd_humanoid30_aba(const double *q, const double *v, const double *tau, double *ddq, double *work);" in cdef


def test_cdef_parses_with_cffi(humanoid_aba):
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(humanoid_aba.cdef)
    assert ffi.typeof("int(*)(const double *, const double *, const double *, double *, double *)")


def test_templates_are_strict():
    import jinja2

    ctx = context(trace(gen.load_robot("chain:2"), "rnea"))
    del ctx["robot"]
    with pytest.raises(jinja2.UndefinedError):
        render(ctx)


def test_avoid_stack_work_size_is_casadis_sz_w(tmp_path):
    tr = trace(gen.load_robot("chain:4"), "aba")
    bf = emit_trace(tr, tmp_path, avoid_stack=True)
    f = bf.manifest["functions"][0]
    assert f["work_size"] == tr.function().sz_w() > 0
    assert f["stack_doubles"] == 0
    bf0 = emit_trace(tr, tmp_path / "locals", scalar_trig="libm", order="tape")   # as CasADi counts it
    assert bf0.manifest["functions"][0]["work_size"] == 0
    assert bf0.manifest["functions"][0]["stack_doubles"] == tr.function().sz_w()


# --- determinism ------------------------------------------------------------------------------

def test_emitting_twice_gives_identical_bytes(tmp_path):
    a = emit("bintree:7", "crba", out_dir=tmp_path / "a")
    b = emit("bintree:7", "crba", out_dir=tmp_path / "b")
    for name in a.files:
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), f"{name} differs between two emissions"


# --- standalone C (no Python in the loop) -------------------------------------------------------

MAIN_C = r"""
#include <stdio.h>
#include "{header}"
int main(void)
{{
{decls}
    double work[{work} + 1];
    int i, rc = {symbol}({args}, work);
    if (rc != 0) {{ printf("rc %d\n", rc); return 1; }}
{prints}
    return 0;
}}
"""


def _c_array(name, values):
    return f"    double {name}[{max(1, len(values))}] = {{{', '.join(repr(float(x)) for x in values) or '0'}}};"


def standalone_program(bf, inputs, build_dir, link=(), compile_with="make"):
    """Write main.c calling the kernel on ``inputs``; build the folder's library with its
    Makefile (or CMakeLists.txt); link; run; parse the printed outputs."""
    f = bf.manifest["functions"][0]
    decls = [_c_array(x["name"], v) for x, v in zip(f["inputs"], inputs)]
    decls += [f"    double {y['name']}[{max(1, y['size'])}];" for y in f["outputs"]]
    prints = [f'    for (i = 0; i < {y["size"]}; ++i) printf("{y["name"]} %.{PRINT_DIGITS}g\\n", {y["name"]}[i]);'
              for y in f["outputs"]]
    args = ", ".join([x["name"] for x in f["inputs"]] + [y["name"] for y in f["outputs"]])
    main = build_dir / "main.c"
    main.write_text(MAIN_C.format(header=bf.header_path.name, decls="\n".join(decls), work=f["work_size"],
                                  symbol=f["symbol"], args=args, prints="\n".join(prints)))
    if compile_with == "make":
        subprocess.run(["make", "-s", "-C", str(bf.path)], check=True, capture_output=True)
        lib = bf.path / bf.manifest["library"]
    else:
        cm = build_dir / "cmake-build"
        subprocess.run(["cmake", "-S", str(bf.path), "-B", str(cm)], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", str(cm)], check=True, capture_output=True)
        lib = cm / bf.manifest["library"]
    exe = build_dir / "prog"
    subprocess.run(["cc", "-std=c99", "-I", str(bf.path), str(main), str(lib), *map(str, link), "-lm", "-o", str(exe)],
                   check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    values = {}
    for line in out.splitlines():
        name, x = line.split()
        values.setdefault(name, []).append(float(x))
    return values


def _inputs(model, algorithm, seed=3):
    rng = np.random.default_rng(seed)
    return [model.random_q(rng) if n == "q" else rng.normal(size=k) for n, k in ALGORITHMS[algorithm].inputs(model, None)]


@needs_cc
@pytest.mark.parametrize("robot,algorithm", [("chain:7", "ltdl"), ("humanoid30", "aba")])
def test_standalone_program_built_with_the_makefile_equals_numpy(tmp_path, robot, algorithm):
    model = gen.load_robot(robot)
    bf = emit(robot, algorithm, out_dir=tmp_path / "kernel")
    ins = _inputs(model, algorithm)
    got = standalone_program(bf, ins, tmp_path)
    ref = gen.run(model, algorithm, *ins)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for spec, r in zip(bf.manifest["functions"][0]["outputs"], ref):
        g = np.reshape(got[spec["name"]], np.shape(r), order="F")
        err = rel_err(g, r)
        assert err < C_TOL, f"{algorithm}/{spec['name']} on {robot}: standalone C vs NumPy error {err:.2e}"


@needs_cc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_standalone_program_built_with_cmake(tmp_path):
    model = gen.load_robot("chain:4")
    bf = emit("chain:4", "rnea", out_dir=tmp_path / "kernel")
    ins = _inputs(model, "rnea")
    got = standalone_program(bf, ins, tmp_path, compile_with="cmake")
    assert rel_err(np.array(got["tau"]), gen.run(model, "rnea", *ins)) < C_TOL


@needs_cc
def test_two_kernels_link_into_one_program(tmp_path):
    """Every exported symbol starts with the kernel prefix, so kernels coexist."""
    a = emit("chain:3", "aba", out_dir=tmp_path / "a")
    b = emit("chain:4", "aba", out_dir=tmp_path / "b")
    for bf in (a, b):
        subprocess.run(["make", "-s", "-C", str(bf.path)], check=True, capture_output=True)
        nm = subprocess.run(["nm", "-g", "--defined-only", str(bf.path / bf.manifest["library"])],
                            check=True, capture_output=True, text=True).stdout
        syms = [ln.split()[-1] for ln in nm.splitlines() if len(ln.split()) == 3]
        assert syms and all(s.startswith(bf.prefix) for s in syms), f"unprefixed symbols: {syms}"
    model = gen.load_robot("chain:4")
    ins = _inputs(model, "aba")
    objects = [a.path / src.replace(".c", ".o") for src in a.manifest["sources"]]   # force a in
    got = standalone_program(b, ins, tmp_path, link=objects)
    assert rel_err(np.array(got["ddq"]), gen.run(model, "aba", *ins)) < C_TOL


def test_every_registered_input_and_output_is_documented_in_the_header():
    from gen.algorithms import ALGORITHMS
    from gen.constraint_spec import parse_constraints
    from gen.robots.synthetic import humanoid30

    model = humanoid30()
    cset = parse_constraints(model, "6D:left_foot,3D:right_hand")
    for name, algo in ALGORITHMS.items():
        c = cset if algo.constrained else None
        names = [n for n, *_ in algo.inputs(model, c)] + [n for n, *_ in algo.outputs(model, c)]
        missing = [n for n in names if not algo.doc(n)]
        assert not missing, f"{name}: no header documentation for {missing} (its registry row's docs)"


def test_manifest_records_each_constraint_gains_weight_and_anchor():
    import gen
    from gen.emit import context
    from gen.trace import trace

    model = gen.load_robot("humanoid30")
    rng = np.random.default_rng(2)
    q0 = model.random_q(rng)
    cset = gen.parse_constraints(model, "6D:left_foot,3Dv:right_hand", Kp=3.0, Kd=1.0, Kv=2.0,
                                 weights=[1.0, 0.5], reference_q=q0)
    man = context(trace(model, "prox_ltl", cset, iterations=2))["manifest"]
    g = man["constraint_gains"]
    assert [(r["constraint"], r["Kp"], r["Kd"], r["weight"]) for r in g] == [
        ("6D:left_foot", 3.0, 1.0, 1.0), ("3Dv:right_hand", 0.0, 2.0, 0.5)]
    assert np.allclose(g[0]["anchor"]["p"], cset.constraints[0].placement2.p)
    assert "constraint_gains" not in context(trace(model, "aba"))["manifest"]


@needs_cc
@pytest.mark.parametrize("batch, max_runs", [(None, 64), (4, 64), (None, 0), (4, 0)])
def test_a_kernel_whose_outputs_overflow_is_refused_with_only_some_entries_checked(batch, max_runs, tmp_path):
    """crba of a revolute/prismatic tree: the wrapper checks only the entries the kernel
    stores a distinct non-constant value in (gen.codegen.output_check, fewer than nv^2;
    a batched kernel those of every lane), one call per run or (check_max_runs = 0) a
    loop over a table of the runs, and still refuses q = 1e200 (M holds a prismatic
    offset squared about a revolute axis: inf) with RBDGEN_ERR_NONFINITE_OUTPUT (-2), and
    accepts and computes an ordinary q."""
    from random_trees import random_tree

    from gen.codegen.config import CodegenConfig
    from gen.codegen.pipeline import plan_kernel

    model = random_tree(10, 6, kinds=("revolute", "prismatic"))
    b = model.bodies
    assert b[3].kind == "prismatic" and b[b[3].parent].kind == "revolute"   # offset from a revolute axis
    config = CodegenConfig(batch=batch, check_max_runs=max_runs)
    (runs,) = plan_kernel(trace(model, "crba"), config, "rbd_t").output_checks
    assert runs is not None and sum(n for _, n in runs) < model.nv ** 2
    k = gen.build(model, "crba", out_dir=tmp_path / "k", config=config)
    wrapper = "".join(p.read_text() for p in (tmp_path / "k").glob("*.c") if not p.stem.endswith("_kernel"))
    assert ("static const int32_t M_runs[" in wrapper) == (max_runs == 0)
    lanes = batch or 1
    M = np.zeros(model.nv ** 2 * lanes)
    assert k.call_raw([np.full(model.nq * lanes, 1e200)], [M]) == -2
    assert not np.all(np.isfinite(M))
    q = np.random.default_rng(4).uniform(-1, 1, (lanes, model.nq))
    assert k.call_raw([np.ascontiguousarray(q.T).reshape(-1)], [M]) == 0
    for lane in range(lanes):
        got = M.reshape(model.nv ** 2, lanes)[:, lane].reshape(model.nv, model.nv, order="F")
        assert rel_err(got, gen.run(model, "crba", q[lane])) < C_TOL
