"""The hand-written generic C library (gen/generic) against the NumPy reference
(docs/DESIGN.md §6c): every algorithm on synthetic trees, a prismatic + continuous model, random
branched trees (free joints mid-tree; spherical, planar and helical joints among every
kind, to 1e-12) and the named robots; NaN/inf inputs return RBG_EINPUT; the workspace the
API asks for is enough (canaries after it stay untouched); model_to_c embeds a model in a
standalone C program."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import load_or_skip, rel_err
from random_trees import (
    every_kind_tree,
    random_inertia,
    random_rotation,
    random_state,
    random_tree,
)

import gen
from gen.errors import RbdgenError
from gen.generic import (
    HEADER,
    INCLUDE_DIR,
    SOURCES,
    GenericModel,
    model_to_c,
    serialize,
    work_sizes,
)
from gen.generic.binding import load_library
from gen.generic.serialize import ALGO_IDS, inertia_params
from gen.model import SE3, Body, Frame, Inertia, Model
from gen.robots.named import NAMED_ROBOTS
from gen.robots.synthetic import bintree, chain, fourbar, humanoid30

REL_TOL = 1e-10          # max|x - ref| / max(1, max|ref|), C vs NumPy float64
KINDS_TOL = 1e-12        # the same on the trees with every joint kind (worst seen 3e-14)
N_STATES = 4
CANARY = -1.2345e300
RBG_EINPUT, RBG_ESINGULAR, RBG_EMODEL = 1, 2, 4
MAX_ERR: dict[tuple[str, str], float] = {}      # (model, algorithm) -> worst error seen


def prismatic_continuous() -> Model:
    """Free-flyer root, then continuous (revolute_unb) and prismatic joints about
    aligned and unaligned axes, rotated placements, a branch, a prismatic joint on an
    axis-aligned direction and a bounded revolute about -y."""
    rng = np.random.default_rng(7)
    u = lambda x: np.asarray(x, dtype=float) / np.linalg.norm(x)
    spec = [  # (parent, kind, axis)
        (-1, "free", np.zeros(3)),
        (0, "revolute_unb", np.array([0.0, 0.0, 1.0])),
        (1, "prismatic", u([1.0, 2.0, -0.5])),
        (2, "revolute_unb", u([0.3, -1.0, 0.2])),
        (0, "prismatic", np.array([0.0, 1.0, 0.0])),
        (4, "revolute", np.array([0.0, -1.0, 0.0])),
        (4, "revolute_unb", np.array([1.0, 0.0, 0.0])),
        (6, "prismatic", np.array([0.0, 0.0, 1.0])),
    ]
    bodies, frames = [], []
    for i, (parent, kind, axis) in enumerate(spec):
        placement = SE3(random_rotation(rng), rng.normal(scale=0.3, size=3))
        bodies.append(Body(f"j{i}", f"l{i}", parent, kind, axis, placement, random_inertia(rng)))
        frames.append(Frame(f"l{i}", i, SE3.identity(), "body"))
    return Model("prismatic_continuous", bodies, frames, source="test_generic")


SYNTHETIC = [chain(7), bintree(15), humanoid30(), fourbar(), prismatic_continuous()]
RANDOM = [random_tree(12, s) for s in range(4)] + [random_tree(9, 11, kinds=("prismatic", "revolute_unb"))]
# every joint kind in each (seed 8: a spherical root; free, spherical, planar joints mid-tree)
EVERY_KIND = [every_kind_tree(12, s) for s in (8, 10, 11)]


@pytest.fixture(scope="module")
def lib():
    return load_library()


_GENERIC: dict[int, GenericModel] = {}


def generic(model: Model) -> GenericModel:
    if id(model) not in _GENERIC:
        _GENERIC[id(model)] = GenericModel(model)
    return _GENERIC[id(model)]


def reference_inputs(model: Model, rng):
    q, v, a = random_state(model, rng)
    return {"rnea": (q, v, a), "nle": (q, v), "crba": (q,), "ltdl": (q,), "ltl": (q,),
            "crba_solve": (q, a), "aba": (q, v, a)}


def check_against_numpy(model: Model, seed: int = 0, n_states: int = N_STATES, tol: float = REL_TOL) -> None:
    g = generic(model)
    rng = np.random.default_rng(seed)
    for _ in range(n_states):
        for algo, inputs in reference_inputs(model, rng).items():
            out, ref = g.call(algo, *inputs), gen.run(model, algo, *inputs)
            outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
            for k, (o, r) in enumerate(zip(outs, refs)):
                assert o.shape == r.shape, f"{model.name} {algo} output {k}: shape {o.shape} != {r.shape}"
                err = rel_err(o, r)
                key = (model.name, algo)
                MAX_ERR[key] = max(MAX_ERR.get(key, 0.0), err)
                assert err < tol, f"{model.name} {algo} output {k}: generic C vs NumPy rel. error {err:.2e}"


# --- C = NumPy --------------------------------------------------------------------------

@pytest.mark.parametrize("model", SYNTHETIC, ids=lambda m: m.name)
def test_synthetic_matches_numpy(model):
    check_against_numpy(model)


@pytest.mark.parametrize("model", RANDOM, ids=lambda m: m.name)
def test_random_trees_match_numpy(model):
    check_against_numpy(model, seed=3)


@pytest.mark.parametrize("model", EVERY_KIND, ids=lambda m: m.name)
def test_spherical_planar_helical_match_numpy(model):
    """rnea, nle, crba, ltdl, ltl, crba_solve and aba with spherical, planar and helical
    joints (3-DoF blocks, the helical S = [h u; u]) next to every other kind."""
    assert {"spherical", "planar", "helical"} <= {b.kind for b in model.bodies}
    check_against_numpy(model, seed=4, tol=KINDS_TOL)


@pytest.mark.parametrize("name", list(NAMED_ROBOTS))
def test_named_robot_matches_numpy(name):
    check_against_numpy(load_or_skip(name), seed=5, n_states=2)


# --- return codes and workspace -----------------------------------------------------------

def _call_raw(g: GenericModel, algo: str, inputs, work, outs):
    ffi, lib = g.ffi, g.lib
    ptr = lambda a: ffi.from_buffer("double[]", a)
    fn = getattr(lib, f"rbg_{algo}")
    return fn(g.c_model, *(ptr(np.ascontiguousarray(x, dtype=float)) for x in inputs), *(ptr(o) for o in outs), ptr(work))


def _outputs(model: Model, algo: str, pad: int = 0):
    nv = model.nv
    shapes = {"crba": [nv * nv], "ltdl": [nv * nv, nv], "ltl": [nv * nv]}.get(algo, [nv])
    return [np.full(n + pad, CANARY) for n in shapes]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("model", [humanoid30(), prismatic_continuous(), EVERY_KIND[0]], ids=lambda m: m.name)
def test_non_finite_input_returns_einput(model, bad):
    g = generic(model)
    rng = np.random.default_rng(1)
    for algo, inputs in reference_inputs(model, rng).items():
        for k in range(len(inputs)):
            for pos in (0, len(inputs[k]) - 1):
                spoiled = [np.array(x, dtype=float) for x in inputs]
                spoiled[k][pos] = bad
                work = np.zeros(g.work_size(algo))
                rc = _call_raw(g, algo, spoiled, work, _outputs(model, algo))
                assert rc == RBG_EINPUT, f"{algo}: {bad} in input {k}[{pos}] returned {rc}, expected RBG_EINPUT"
    with pytest.raises(RbdgenError, match="NaN or inf"):
        g.aba(*[np.full(n, np.nan) for n in (model.nq, model.nv, model.nv)])


@pytest.mark.parametrize("model", [chain(7), humanoid30(), prismatic_continuous(), RANDOM[0], EVERY_KIND[0]],
                         ids=lambda m: m.name)
def test_workspace_size_is_enough(model):
    """A workspace of exactly rbg_work_size doubles, followed by canaries, gives the
    reference results and leaves the canaries (and those after each output) untouched."""
    g = generic(model)
    pad = 32
    rng = np.random.default_rng(2)
    sizes = work_sizes(model)
    for algo, inputs in reference_inputs(model, rng).items():
        n = g.work_size(algo)
        assert n == sizes[algo] == g.lib.rbg_work_size(g.c_model, ALGO_IDS[algo]), f"{algo}: work size mismatch"
        work = np.full(n + pad, CANARY)
        outs = _outputs(model, algo, pad)
        assert _call_raw(g, algo, inputs, work, outs) == 0, f"{algo} failed"
        assert np.all(work[n:] == CANARY), f"{algo} wrote past its {n}-double workspace"
        for k, o in enumerate(outs):
            assert np.all(o[len(o) - pad:] == CANARY), f"{algo} wrote past output {k}"
        ref = gen.run(model, algo, *inputs)
        refs = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(outs, refs):
            assert rel_err(o[:len(o) - pad].reshape(np.shape(r)), r) < REL_TOL, f"{algo} with exact workspace"
    with pytest.raises(RbdgenError, match="no algorithm"):
        g.work_size("kkt_delassus")
    assert g.lib.rbg_work_size(g.c_model, 99) == 0, "unknown algo id must give work size 0"


def test_singular_model_returns_esingular():
    """A joint that moves a massless, inertia-free leaf makes M singular."""
    m = chain(3)
    m.bodies[2].inertia = Inertia.zero()
    g = GenericModel(m)
    q, v, tau = np.zeros(3), np.zeros(3), np.zeros(3)
    for algo, inputs in {"aba": (q, v, tau), "ltdl": (q,), "ltl": (q,), "crba_solve": (q, tau)}.items():
        with pytest.raises(RbdgenError, match="singular"):
            g.call(algo, *inputs)


def test_check_model_rejects_inconsistent_arrays(lib):
    g = GenericModel(humanoid30())
    ffi = g.ffi
    assert lib.lib.rbg_check_model(g.c_model) == 0
    for field, value in [("parent", 5), ("jtype", 9), ("idx_v", 3), ("nvj", 6), ("dof_parent", 4), ("axis_k", 0)]:
        bad = np.array(getattr(g.arrays, field))
        bad[1 if field != "axis_k" else 0] = value
        buf = ffi.from_buffer("int[]", bad)
        m2 = ffi.new("rbg_model *", g.c_model[0])
        setattr(m2, field, buf)
        assert lib.lib.rbg_check_model(m2) == RBG_EMODEL, f"rbg_check_model accepted a bad {field}"
    # a spherical joint has no axis (axis_k -1); a helical one needs its pitch
    g = GenericModel(EVERY_KIND[0])
    kinds = [b.kind for b in EVERY_KIND[0].bodies]
    assert lib.lib.rbg_check_model(g.c_model) == 0
    bad = np.array(g.arrays.axis_k)
    bad[kinds.index("spherical")] = 2
    m2 = ffi.new("rbg_model *", g.c_model[0])
    m2.axis_k = ffi.from_buffer("int[]", bad)
    assert lib.lib.rbg_check_model(m2) == RBG_EMODEL, "rbg_check_model accepted a spherical joint with an axis"
    m2 = ffi.new("rbg_model *", g.c_model[0])
    m2.pitch = ffi.NULL
    assert lib.lib.rbg_check_model(m2) == RBG_EMODEL, "rbg_check_model accepted a helical joint without pitch"


def test_inertia_params_match_serializer(lib):
    rng = np.random.default_rng(4)
    ffi = lib.ffi
    for _ in range(5):
        I = random_inertia(rng)
        out = ffi.new("double[10]")
        com, Ic = np.ascontiguousarray(I.com, dtype=float), np.ascontiguousarray(I.I_c, dtype=float)
        lib.lib.rbg_inertia_params(I.mass, ffi.from_buffer("double[]", com), ffi.from_buffer("double[]", Ic), out)
        assert rel_err(np.array(list(out)), inertia_params(I)) < 1e-14


# --- Python API -----------------------------------------------------------------------------

def test_call_dispatch_and_errors():
    m = chain(4)
    g = generic(m)
    q, v, a = random_state(m, np.random.default_rng(0))
    assert np.array_equal(g.call("aba", q, v, a), g.aba(q, v, a))
    L, D = g.call("ltdl", q)
    assert L.shape == (4, 4) and D.shape == (4,)
    with pytest.raises(RbdgenError, match="no algorithm 'kkt_delassus'"):
        g.call("kkt_delassus", q)
    with pytest.raises(RbdgenError, match="input 'v' must have 4 entries"):
        g.rnea(q, np.zeros(3), a)
    # column vectors are accepted, like gen.run
    assert rel_err(g.rnea(q.reshape(-1, 1), v.reshape(-1, 1), a.reshape(-1, 1)), gen.run(m, "rnea", q, v, a)) < REL_TOL


def test_library_cache_respects_env(tmp_path, monkeypatch):
    """A fresh $RBDGEN_CACHE gets a compiled module keyed by the flags; loading again reuses it."""
    monkeypatch.setenv("RBDGEN_CACHE", str(tmp_path))
    mod = load_library(("-O1",))
    built = list(tmp_path.glob("_rbg_*"))
    assert len(built) == 1 and built[0].is_file(), f"expected one cached module, found {built}"
    assert load_library(("-O1",)) is mod
    g = GenericModel(chain(3), cflags=("-O1",))
    assert g.lib is mod.lib


# --- C-level: strict C99 and an embedded model --------------------------------------------

CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_sources_compile_as_strict_c99(tmp_path):
    for src in SOURCES:
        subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-c", str(src),
                        "-o", str(tmp_path / "rbg.o")], check=True, capture_output=True, text=True)
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx:
        subprocess.run([cxx, "-x", "c++", "-std=c++11", "-Wall", "-Werror", "-fsyntax-only", "-include",
                        str(HEADER), "/dev/null"], check=True, capture_output=True, text=True)


HARNESS = r"""
#include <stdio.h>
#include "model.h"
int main(void) {
    static const double q[] = {%(q)s}, v[] = {%(v)s}, a[] = {%(a)s};
    static double work[ROBOT_WORK_MAX], out[%(nv)d * %(nv)d];
    if (rbg_check_model(&robot)) return 10;
    if (rbg_work_size(&robot, RBG_ALGO_ABA) != ROBOT_WORK_ABA) return 11;
    if (rbg_work_size(&robot, RBG_ALGO_ABA) != RBG_WORK_ABA(%(nb)d, %(nv)d)) return 12;
    if (rbg_rnea(&robot, q, v, a, out, work)) return 1;
    for (int k = 0; k < %(nv)d; ++k) printf("%%.17g\n", out[k]);
    if (rbg_aba(&robot, q, v, a, out, work)) return 2;
    for (int k = 0; k < %(nv)d; ++k) printf("%%.17g\n", out[k]);
    if (rbg_crba(&robot, q, out, work)) return 3;
    for (int k = 0; k < %(nv)d * %(nv)d; ++k) printf("%%.17g\n", out[k]);
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("robot", ["humanoid30", "prismatic_continuous", "every_kind", "talos"])
def test_model_to_c_in_a_standalone_program(tmp_path, robot):
    """model_to_c output + rbg.c build as strict C99 and reproduce NumPy (talos: the
    largest named robot, when example-robot-data is available; every_kind: spherical,
    planar and helical joints among the others)."""
    if robot == "talos":
        model = load_or_skip("talos")
    else:
        model = {"prismatic_continuous": prismatic_continuous, "every_kind": lambda: EVERY_KIND[0],
                 "humanoid30": humanoid30}[robot]()
    q, v, a = random_state(model, np.random.default_rng(6))
    (tmp_path / "model.h").write_text(model_to_c(model, "robot"))
    fmt = lambda x: ", ".join(repr(float(t)) for t in x)
    (tmp_path / "main.c").write_text(HARNESS % {"q": fmt(q), "v": fmt(v), "a": fmt(a), "nv": model.nv,
                                                "nb": model.nbodies})
    exe = tmp_path / "harness"
    subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-I", str(INCLUDE_DIR), "-I",
                    str(tmp_path), str(tmp_path / "main.c"), *map(str, SOURCES), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"harness exited {run.returncode}"
    vals = np.array([float(x) for x in run.stdout.split()])
    nv = model.nv
    assert rel_err(vals[:nv], gen.run(model, "rnea", q, v, a)) < REL_TOL, "embedded rnea"
    assert rel_err(vals[nv:2 * nv], gen.run(model, "aba", q, v, a)) < REL_TOL, "embedded aba"
    assert rel_err(vals[2 * nv:].reshape(nv, nv), gen.run(model, "crba", q)) < REL_TOL, "embedded crba"


def test_serialized_arrays_describe_the_model():
    m = prismatic_continuous()
    a = serialize(m)
    assert list(a.parent) == m.parents and list(a.dof_parent) == m.dof_parents()
    assert list(a.jtype) == [3, 1, 2, 1, 2, 0, 1, 2]
    assert list(a.axis_k) == [-1, 2, -1, -1, 1, -1, 0, 2], "only +e_k axes take the aligned path"
    assert a.inertia.shape == (10 * m.nbodies,) and a.plc_R.shape == (9 * m.nbodies,)
    assert not a.pitch.any()
    m = EVERY_KIND[0]
    a = serialize(m)
    codes = {"revolute": 0, "revolute_unb": 1, "prismatic": 2, "free": 3, "spherical": 4, "planar": 5, "helical": 6}
    assert list(a.jtype) == [codes[b.kind] for b in m.bodies]
    assert list(a.nvj) == [b.nv for b in m.bodies]
    for i, b in enumerate(m.bodies):
        assert a.pitch[i] == (b.pitch if b.kind == "helical" else 0.0)
        if b.kind in ("free", "spherical", "planar"):
            assert a.axis_k[i] == -1 and not a.axis[3 * i:3 * i + 3].any(), f"{b.kind} joints carry no axis"


def teardown_module(module):
    if MAX_ERR:
        worst = {}
        for (name, algo), e in MAX_ERR.items():
            worst[algo] = max(worst.get(algo, (0.0, "")), (e, name))
        lines = [f"  {algo:<11s} {e:.2e} ({name})" for algo, (e, name) in sorted(worst.items())]
        print("\nworst generic-C vs NumPy relative errors:\n" + "\n".join(lines), file=sys.stderr)
