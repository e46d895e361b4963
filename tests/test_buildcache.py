"""The build cache found before tracing (gen/buildcache.py, gen.build; issue 32 §4): a
cached build neither traces nor emits, every component of the key rebuilds when it
changes, a damaged entry is rebuilt, and concurrent builders of one kernel agree.

The kernels are small (3-link chain) and compiled at -O1; every kernel a test gets back,
hit or miss, is checked against the NumPy path (``gen.run``)."""
import copy
import dataclasses
import importlib
import json
import multiprocessing
import os
import sys

import numpy as np
import pytest
from conftest import rel_err

import gen
from gen import buildcache
from gen.buildcache import Uncacheable, canonical, model_digest, request_key, tree_digest
from gen.model import Inertia, Mimic

build_module = importlib.import_module("gen.build")   # the module; gen.build is the function
FLAGS = "-O1"
SPEC = "3D:link2_tip"
#: the proximal kernels equal NumPy to rounding (fixed iteration count, same operations)
C_TOL = 1e-12


def _traced(msgs) -> bool:
    return any(m.startswith("trace ") for m in msgs)


def _check(kernel, model, algorithm, constraints=None, **options):
    """The kernel's outputs equal gen.run's on two random states (the reference)."""
    rng = np.random.default_rng(3)
    for _ in range(2):
        ins = [model.random_q(rng) if n == "q" else rng.normal(size=k)
               for n, k in kernel.algorithm.inputs(model, kernel.cset)]
        got, ref = kernel(*ins), gen.run(model, algorithm, *ins, constraints=constraints, **options)
        got, ref = (got, ref) if isinstance(ref, tuple) else ((got,), (ref,))
        for g, r in zip(got, ref):
            assert rel_err(g, r) <= C_TOL


def _no_tracing(monkeypatch):
    """Make any trace, emission or automatic choice in gen.build fail the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a cached build traced or emitted")
    for name in ("trace_for", "resolve", "emit_trace"):
        monkeypatch.setattr(build_module, name, refuse)


# --- the hit ---------------------------------------------------------------------------------

def test_a_cached_build_does_not_trace(tmp_path, monkeypatch):
    model = gen.load_robot("chain:3")
    msgs = []
    k1 = gen.build(model, "prox_ltl", SPEC, iterations=2, flags=FLAGS, cache=tmp_path, progress=msgs.append)
    assert _traced(msgs)
    _no_tracing(monkeypatch)
    msgs.clear()
    k2 = gen.build(gen.load_robot("chain:3"), "prox_ltl", SPEC, iterations=2, flags=FLAGS, cache=tmp_path,
                   progress=msgs.append)
    assert len(msgs) == 1 and "cached" in msgs[0], msgs
    assert k2.path == k1.path and k2.module is k1.module and k2.manifest == k1.manifest
    assert k2.algorithm.name == "prox_ltl" and k2.cset.spec == SPEC and k2.options == {"iterations": 2}
    _check(k2, model, "prox_ltl", SPEC, iterations=2)


def test_a_cached_auto_build_keeps_the_choice(tmp_path, monkeypatch):
    model = gen.load_robot("chain:3")
    k1 = gen.build(model, "auto", SPEC, iterations=2, flags=FLAGS, cache=tmp_path)
    _no_tracing(monkeypatch)
    msgs = []
    k2 = gen.build(model, "auto", SPEC, iterations=2, flags=FLAGS, cache=tmp_path, progress=msgs.append)
    chosen = k1.manifest["choice"]["chosen"]
    assert k2.manifest["choice"] == k1.manifest["choice"] and k2.algorithm.name == chosen == k1.algorithm.name
    assert msgs[0].startswith(f"auto: chose {chosen} (") and "cached" in msgs[-1]
    _check(k2, model, chosen, SPEC, iterations=2)


def test_out_dir_receives_the_cached_folder(tmp_path, monkeypatch):
    """Rule: with out_dir, hit or miss, the build folder's files are written into out_dir
    (same-named files replaced, other files left alone) and the kernel's folder is out_dir;
    the cache keeps its own copy."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    k1 = gen.build("chain:3", "aba", flags=FLAGS, cache=cache)
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "manifest.json").write_text("stale")
    _no_tracing(monkeypatch)
    k2 = gen.build("chain:3", "aba", flags=FLAGS, cache=cache, out_dir=out)
    assert k2.path == out and (out / "notes.txt").read_text() == "mine"
    assert buildcache.read_folder(out) == {**buildcache.read_folder(k1.path), "notes.txt": b"mine"}
    _check(k2, k2.model, "aba")


def test_a_modified_cached_folder_is_rebuilt(tmp_path):
    msgs = []
    k1 = gen.build("chain:3", "rnea", flags=FLAGS, cache=tmp_path)
    original = buildcache.read_folder(k1.path)
    kernel_c = next(n for n in original if n.endswith("_kernel.c"))
    (k1.path / kernel_c).write_text("/* edited */\n")
    k2 = gen.build("chain:3", "rnea", flags=FLAGS, cache=tmp_path, progress=msgs.append)
    assert _traced(msgs), "a cached folder whose files changed was used"
    assert buildcache.read_folder(k2.path) == original
    _check(k2, k2.model, "rnea")


def test_a_removed_extension_is_compiled_without_tracing(tmp_path, monkeypatch):
    k1 = gen.build("chain:3", "crba", flags=FLAGS, cache=tmp_path)
    library = k1.module.__file__
    os.remove(library)
    del sys.modules[k1.module.__name__]
    _no_tracing(monkeypatch)
    msgs = []
    k2 = gen.build("chain:3", "crba", flags=FLAGS, cache=tmp_path, progress=msgs.append)
    assert any(m.startswith("compile") and "cached" not in m for m in msgs) and os.path.exists(library)
    _check(k2, k2.model, "crba")


def test_other_flags_compile_the_cached_folder_without_tracing(tmp_path, monkeypatch):
    """The flags are not in the request key (the build folder does not depend on them):
    the same request at other flags compiles the cached folder into another extension,
    without tracing, and both extensions stay cached."""
    k1 = gen.build("chain:3", "aba", flags=FLAGS, cache=tmp_path)
    _no_tracing(monkeypatch)
    msgs = []
    k2 = gen.build("chain:3", "aba", flags="-O0", cache=tmp_path, progress=msgs.append)
    assert any(m.startswith("compile") and "-O0" in m for m in msgs), msgs
    assert k2.path == k1.path and k2.module is not k1.module
    msgs.clear()
    assert gen.build("chain:3", "aba", flags=FLAGS, cache=tmp_path, progress=msgs.append).module is k1.module
    assert len(msgs) == 1 and "cached" in msgs[0], msgs
    _check(k2, k2.model, "aba")


# --- every component of the key rebuilds ------------------------------------------------------

def _heavier_link(model):
    """``model`` with the mass of its last link one ulp larger."""
    m = copy.deepcopy(model)
    b = m.bodies[-1]
    b.inertia = Inertia(float(np.nextafter(b.inertia.mass, np.inf)), b.inertia.com, b.inertia.I_c)
    return m


CHANGES = {
    "model constant": lambda r: {**r, "robot": _heavier_link(r["robot"])},
    "algorithm": lambda r: {**r, "algorithm": "prox_pv"},
    "constraint gains": lambda r: {**r, "constraints": gen.parse_constraints(r["robot"], SPEC, Kp=1.0, Kd=2.0)},
    "constraint weights": lambda r: {**r, "constraints": gen.parse_constraints(r["robot"], SPEC, weights=[2.0])},
    "option": lambda r: {**r, "options": {"iterations": 3}},
}


@pytest.mark.parametrize("change", [*CHANGES, "generator"])
def test_a_change_to_any_key_component_rebuilds(change, tmp_path, monkeypatch):
    model = gen.load_robot("chain:3")
    base = {"robot": model, "algorithm": "prox_ltl", "constraints": SPEC, "options": {"iterations": 2},
            "flags": FLAGS}

    def build(r, msgs):
        return gen.build(r["robot"], r["algorithm"], r["constraints"], flags=r["flags"], cache=tmp_path,
                         progress=msgs.append, **r["options"])

    build(base, [])
    if change == "generator":            # another rbdgen version or an edited source file
        identity = buildcache.generator_identity()
        monkeypatch.setattr(buildcache, "generator_identity", lambda: {**identity, "sources": "edited"})
        changed = base
    else:
        changed = CHANGES[change](base)
    msgs = []
    k = build(changed, msgs)
    assert _traced(msgs), f"a changed {change} did not rebuild"
    msgs.clear()
    assert build(changed, msgs).module is k.module and not _traced(msgs), "the changed request is cached too"
    _check(k, changed["robot"], changed["algorithm"], changed["constraints"], **changed["options"])


def test_every_codegen_option_is_in_the_key():
    model = gen.load_robot("chain:3")
    base = {"prefix": None, "avoid_stack": False, "batch": None, "batch_trig": "vector", "scalar_trig": "hoisted",
            "lanes": True}
    variants = [{"prefix": "my_kernel"}, {"avoid_stack": True}, {"batch": 4}, {"batch_trig": "libm"},
                {"scalar_trig": "vector"}, {"scalar_trig": "libm"}, {"lanes": False}]
    keys = {request_key(model, "aba", None, {}, {**base, **v}) for v in variants}
    keys.add(request_key(model, "aba", None, {}, base))
    assert len(keys) == len(variants) + 1 and None not in keys


# --- the model's digest and the canonical form -----------------------------------------------

def _mimic_model():
    m = gen.load_robot("chain:3")
    m2 = copy.deepcopy(m)
    m2.bodies[2].mimic = Mimic(1, 2.0, 0.5)
    return m2


PERTURB = {
    "name": lambda m: setattr(m, "name", m.name + "x"),
    "gravity": lambda m: m.gravity.__setitem__(2, np.nextafter(m.gravity[2], 0.0)),
    "joint axis": lambda m: m.bodies[1].axis.__setitem__(0, np.nextafter(m.bodies[1].axis[0], 1.0)),
    "joint placement": lambda m: m.bodies[1].placement.p.__setitem__(0, np.nextafter(m.bodies[1].placement.p[0], 9)),
    "inertia about the com": lambda m: m.bodies[0].inertia.I_c.__setitem__((0, 1), -0.0
                                                                          if m.bodies[0].inertia.I_c[0, 1] == 0.0
                                                                          else 0.0),
    "centre of mass": lambda m: m.bodies[2].inertia.com.__setitem__(2, np.nextafter(m.bodies[2].inertia.com[2], 9)),
    "joint kind": lambda m: setattr(m.bodies[2], "kind", "prismatic"),
    "pitch": lambda m: setattr(m.bodies[2], "pitch", 5e-324),
    "link name": lambda m: setattr(m.bodies[0], "link", "other"),
    "frame placement": lambda m: m.frames[-1].placement.R.__setitem__((2, 2), np.nextafter(1.0, 0.0)),
    "frame list": lambda m: m.frames.pop(),
    "locked joints": lambda m: setattr(m, "locked", ("j",)),
    "source": lambda m: setattr(m, "source", "elsewhere.urdf"),
}


@pytest.mark.parametrize("what", list(PERTURB))
def test_the_model_digest_sees_every_constant(what):
    model = gen.load_robot("chain:3")
    before = model_digest(model)
    assert model_digest(gen.load_robot("chain:3")) == before, "two loads of one model differ"
    PERTURB[what](model)
    assert model_digest(model) != before
    assert model_digest(gen.load_robot("chain:3")) == before, "a change to one model reached a fresh load"


def test_the_model_digest_covers_every_field():
    """Every field of the model's dataclasses is in the canonical form (a field added
    later joins the key without a change here)."""
    model = _mimic_model()
    form = canonical(model)
    body = form["fields"]["bodies"][2]
    assert set(form["fields"]) == {f.name for f in dataclasses.fields(model)}
    assert set(body["fields"]) == {f.name for f in dataclasses.fields(model.bodies[2])}
    assert body["fields"]["mimic"]["fields"]["multiplier"] == {"f": (2.0).hex()}
    assert model_digest(model) != model_digest(gen.load_robot("chain:3"))


def test_canonical_floats_are_exact_and_typed():
    assert canonical(0.1) == {"f": "0x1.999999999999ap-4"} and canonical(-0.0) != canonical(0.0)
    assert canonical(np.float64(0.1)) == canonical(0.1) and canonical(1) != canonical(1.0)
    assert canonical(np.array([1.0, 2.0])) != canonical(np.array([[1.0, 2.0]]))
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})
    with pytest.raises(Uncacheable):
        canonical(np.array([object()]))
    with pytest.raises(Uncacheable):
        canonical(lambda: 0)


def test_the_source_digest_follows_the_generator_files(tmp_path):
    """gen/**/*.py, gen/templates/* and opcount/*.py are in the digest; other files not."""
    files = {"gen/build.py": "a", "gen/bench/x.py": "b", "gen/templates/kernel.c.j2": "c", "opcount/counter.py": "d"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = tree_digest(tmp_path)
    (tmp_path / "opcount" / "reports").mkdir()
    (tmp_path / "opcount" / "reports" / "r.md").write_text("report")
    (tmp_path / "gen" / "notes.md").write_text("notes")
    assert tree_digest(tmp_path) == before
    for name in files:
        (tmp_path / name).write_text(files[name] + " ")
        assert tree_digest(tmp_path) != before, f"{name} is not in the digest"
        (tmp_path / name).write_text(files[name])
    assert tree_digest(tmp_path) == before


def test_the_installed_sources_are_digested():
    root = buildcache.Path(buildcache.__file__).resolve().parent.parent
    assert buildcache.source_digest() == tree_digest(root)
    assert buildcache.generator_identity()["rbdgen"] == gen.__version__


# --- concurrency ---------------------------------------------------------------------------------

def test_install_first_builder_wins(tmp_path):
    build_root = tmp_path / "build"
    build_root.mkdir()
    files = {"a.c": b"int a;\n", "manifest.json": b"{}"}

    def staged(name, content):
        d = tmp_path / name / "rbd_x-0123456789"
        d.mkdir(parents=True)
        for n, b in content.items():
            (d / n).write_bytes(b)
        return d

    first = buildcache.install(staged("s1", files), build_root, files)
    second = buildcache.install(staged("s2", files), build_root, files)
    assert first == second == build_root / "rbd_x-0123456789" and buildcache.read_folder(first) == files
    (first / "a.c").write_bytes(b"edited")               # a modified folder of that name is replaced
    assert buildcache.install(staged("s3", files), build_root, files) == first
    assert buildcache.read_folder(first) == files and [p.name for p in build_root.iterdir()] == [first.name]


def _build_in_process(cache, barrier, queue):
    barrier.wait()
    msgs = []
    k = gen.build("chain:3", "nle", flags=FLAGS, cache=cache, progress=msgs.append)
    q = k.model.neutral()
    queue.put((str(k.path), k.module.__name__, k(q, np.ones(3)).tolist(), _traced(msgs)))


def test_two_processes_building_one_kernel_agree(tmp_path):
    """Started together, they take turns (gen.buildcache.building): one traces and
    compiles, the other finds its entry; both get the same kernel."""
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_build_in_process, args=(str(tmp_path), barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(r[3] for r in results) == [False, True], "both processes traced the kernel"
    results = [r[:3] for r in results]
    assert results[0] == results[1]
    ref = gen.run("chain:3", "nle", gen.load_robot("chain:3").neutral(), np.ones(3))
    assert rel_err(results[0][2], ref) <= C_TOL
    assert [p.name for p in (tmp_path / "build").iterdir()] == [os.path.basename(results[0][0])]
    keys = list((tmp_path / "keys").iterdir())
    assert len(keys) == 1 and json.loads(keys[0].read_text())["folder"] == os.path.basename(results[0][0])
    assert not [p for p in tmp_path.rglob(".*")], "temporary files left behind"


def test_native_flags_key_on_the_cpu(monkeypatch):
    """-march=native compiles for the host: a cache shared by machines with different CPUs
    must not hand one an extension built for another, so native flags carry the CPU's
    identity in both keys; portable flags do not."""
    from gen import buildcache
    from gen.build import content_key
    native, portable = ["-O2", "-march=native"], ["-O2", "-march=x86-64-v2"]
    assert buildcache.flag_identity(portable) == portable
    here = buildcache.flag_identity(native)
    assert here[:2] == native and here[2].startswith("cpu: ")
    files = {"a.c": b"int x;"}
    key_here, portable_here = content_key(files, native), content_key(files, portable)
    monkeypatch.setattr(buildcache, "cpu_identity", lambda: "model name: another CPU")
    assert content_key(files, native) != key_here
    assert content_key(files, portable) == portable_here
