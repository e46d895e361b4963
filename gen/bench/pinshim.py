"""Build and bind the Pinocchio C++ shim (``pin_shim.cpp``) for the benchmarks (docs/DESIGN.md §5).

**How the model gets into C++, and why.**  The ``pin`` wheel ships its headers and a
shared library built for baseline x86-64.  Two hazards follow for code compiled with
``-march=native``:

1. Eigen's ABI depends on the instruction set: ``EIGEN_MAX_ALIGN_BYTES`` is 16 for
   baseline x86-64 but 32 with AVX and 64 with AVX-512, which changes the layout and
   alignment of fixed-size members of ``pinocchio::Model`` / ``Data``.  Handing an object
   built by ``libpinocchio_*.so`` (e.g. by its URDF loader) to an algorithm compiled with
   ``-march=native`` -- or the reverse -- reads misaligned, mis-laid-out memory: the crash
   docs/DESIGN.md §5 warns about.
2. With ``PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION`` (what the wheel's CMake config would
   add) the algorithms themselves resolve to the library's *baseline* instantiations, so
   we would time Pinocchio compiled for another CPU than our own code.

So the shim is **header-only**: it never defines ``PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION``
and links **no** Pinocchio library; every template it uses is instantiated in our own
translation units with the same flags as rbdgen's C (``-O3 -march=native -DNDEBUG``).
The model is built *in Python* by the wheel (:func:`gen.pinref.pin_model`: Pinocchio's
own URDF loader, free-flyer root, ``buildReducedModel`` for panda's fingers), serialised
with ``pin.Model.saveToString()`` (a Boost text archive: a byte string, no Eigen object
crosses the boundary; doubles are printed with 17 significant digits, so the round trip
is exact) and deserialised in the shim by the same Pinocchio version's header code
(``Model::loadFromString``).  Only ``libboost_serialization`` (archive primitives, no
Eigen types) is linked.  Loading through serialisation rather than re-assembling the
model joint by joint keeps every detail Pinocchio's loader produced (joint types, axes,
armature, frames) without a conversion table that could drift.

**Library mode, for the tests.**  ``$RBDGEN_PINSHIM_MODE=library`` (tests/conftest.py sets
it; the default ``header-only`` is what the benchmarks and reports time) builds the shim
the way the wheel's CMake target ``pinocchio::pinocchio_default`` is meant to be used:
with ``PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION``, linking ``libpinocchio_default.so``, whose
explicit instantiations for ``double`` (``Model``/``Data``, rnea, crba, aba,
constraintDynamics, contactABA, impulseDynamics, the first-order derivatives of rnea, aba
and constraintDynamics) the headers then declare ``extern`` instead of instantiating; in
this mode ``pin_shim.cpp`` passes its arguments in the instantiations' types
(``Eigen::Ref``, ``VectorXd``, ``std::vector`` constraint lists), else g++ instantiates the
algorithm again.  Hazard 1 is avoided by dropping the machine options (``-m...``, e.g.
``-march=native``) from the shim's flags: all its objects then have the wheel's baseline
x86-64 Eigen ABI (16-byte alignment; the library's code has no AVX instruction), and the
benchmark programs reach the shim through its C interface only (an opaque handle and
``double`` arrays), so their ``-march=native`` never meets a Pinocchio or Eigen object.
Hazard 2 is what the tests accept: they check the shim's values (model loading, argument
and output handling), not its speed, and pin's Python, their reference, calls the same
library.  g++ 12 at -O0 then takes 6-9 s of CPU on the parts rnea, crba, aba, impulse and
derivatives (28-134 s header-only), 17 s on core (25 s), 27 s on constrained (45 s);
contact, constrained_derivatives and second_order cost the same in both modes (lcaba, the
damped Delassus inverse, the impulse-dynamics and second-order derivatives are not in
the library).

**Build.**  ``pin_shim.cpp`` is compiled once per *part* (``-DPINSHIM_PART_<P>``; the
instantiations are slow -- about 30-170 s of CPU per part with g++ 12 -- so parts build
in parallel and only the ones needed are built) into objects cached under
``$RBDGEN_CACHE/pinshim/<key>/`` (default ``~/.cache/rbdgen``), ``key`` hashing the
source (comments stripped), the mode, the flags, the compiler's version, the prefix and
the Pinocchio version.  The objects
are linked into the C benchmark programs of :mod:`gen.bench.harness`.

**Why no in-process Python binding.**  Loading the shim into a Python process that has
imported ``pinocchio`` corrupts memory: Boost.Serialization keeps process-wide type
registries in ``libboost_serialization.so``, and the wheel's Python module registers
Pinocchio's types there with its own (baseline-ABI) serialisers, which the shim's
``loadFromString`` then picks up (observed: a correct model, then ``free()`` of a bad
pointer in ``~Model``).  The benchmark programs never load the wheel's libraries, so
they are immune; tests compare the shim with pin's Python through the harness's output
dump (:func:`gen.bench.harness.benchmark` with ``keep_outputs=True``).

Requires the ``pin`` wheel and ``cmeel-eigen`` (Eigen headers; ``pip install
cmeel-eigen``); ``$RBDGEN_PIN_PREFIX`` overrides the cmeel prefix (a folder holding
``include/pinocchio``, ``include/eigen3`` and ``lib/libboost_serialization.so``).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import RbdgenError, run_tool
from ..buildcache import file_lock
from ..pinref import pin_model as _pm

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "pin_shim.cpp"

#: the benchmarks' flags unless ``$RBDGEN_BENCH_FLAGS`` names others
DEFAULT_BENCH_FLAGS = ("-O3", "-march=native", "-DNDEBUG")
#: flags shared by every piece of C/C++ the benchmarks compile (rbdgen's kernels, the
#: generic C, the harness and this shim): docs/DESIGN.md §5 "same compiler flags".
#: ``$RBDGEN_BENCH_FLAGS`` (read at import) replaces them, e.g. with ``-O0 -march=native
#: -DNDEBUG`` for the test suite, which checks the peers' values and not their times (gcc
#: compiles the generic C of each benchmark program in 0.36 s of CPU at -O0 against 3.6 s
#: at -O3; the shim's parts cost the same CPU at both, ~30 s each, all of it in the front
#: end); the reports record the flags they ran with (``settings.flags``, ``machine.flags``)
BENCH_FLAGS = tuple(os.environ.get("RBDGEN_BENCH_FLAGS", "").split()) or DEFAULT_BENCH_FLAGS
CXX_EXTRA = ("-std=c++17", "-fPIC", "-g0", "-w")
#: Pinocchio's interface definitions (from its CMake config), minus the template
#: instantiation switch (see the module docstring).
PIN_DEFINES = ("-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
               "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12")

#: how the shim gets Pinocchio's algorithms (``$RBDGEN_PINSHIM_MODE``; module docstring):
#: instantiated in its own objects with the benchmark flags, or taken from the wheel's
#: ``libpinocchio_default.so`` (the tests)
MODES = ("header-only", "library")
MODE_ENV = "RBDGEN_PINSHIM_MODE"
#: what library mode adds: the library's interface definition (the wheel's CMake config
#: of ``pinocchio::pinocchio_default``; its ``PINOCCHIO_WITH_COLLISION`` only adds the
#: geometry code, which the shim does not use) and the library
LIBRARY_DEFINES = ("-DPINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION",)
LIBRARY_LINK = ("-lpinocchio_default",)
#: the parts whose algorithms the library holds, so that library mode compiles them in
#: seconds (module docstring); contact, constrained_derivatives and second_order call
#: algorithms it lacks and cost the same in both modes
LIBRARY_PARTS = frozenset({"core", "rnea", "crba", "aba", "constrained", "impulse", "derivatives"})

PARTS = ("core", "rnea", "crba", "aba", "constrained", "contact", "impulse", "derivatives",
         "constrained_derivatives", "second_order")
#: shim function -> the part that defines it
FUNCTION_PART = {"rnea": "rnea", "nle": "rnea", "crba": "crba", "crba_solve": "crba", "aba": "aba", "minv": "aba",
                 "constraint_dynamics": "constrained", "contact_aba": "contact",
                 "lcaba": "contact", "delassus_inv": "contact", "impulse_dynamics": "impulse",
                 "rnea_derivatives": "derivatives", "aba_derivatives": "derivatives",
                 "constraint_dynamics_derivatives": "constrained_derivatives",
                 "impulse_dynamics_derivatives": "constrained_derivatives",
                 "rnea_second_order": "second_order"}
#: constrained shim functions and their family index (``pinshim_last_iterations``)
CONSTRAINED_FAMILY = {"constraint_dynamics": 0, "contact_aba": 1, "lcaba": 2, "delassus_inv": 3,
                      "impulse_dynamics": 4, "constraint_dynamics_derivatives": 5,
                      "impulse_dynamics_derivatives": 6}



# --- locating the wheel -------------------------------------------------------------------

def pin_prefix() -> Path:
    """The cmeel prefix holding Pinocchio's headers (``include/pinocchio``), Eigen's
    (``include/eigen3``, from cmeel-eigen) and ``lib/libboost_serialization.so``."""
    override = os.environ.get("RBDGEN_PIN_PREFIX")
    if override:
        prefix = Path(override)
    else:
        prefix = None
        for dist_name in ("libpinocchio", "pin"):
            try:
                dist = importlib.metadata.distribution(dist_name)
            except importlib.metadata.PackageNotFoundError:
                continue
            cand = Path(dist.locate_file("cmeel.prefix"))
            if (cand / "include" / "pinocchio").is_dir():
                prefix = cand
                break
        if prefix is None:
            raise RbdgenError("the Pinocchio shim needs the pin wheel with its headers "
                              "(pip install pin), or set RBDGEN_PIN_PREFIX")
    if not (prefix / "include" / "pinocchio").is_dir():
        raise RbdgenError(f"{prefix}: no include/pinocchio (RBDGEN_PIN_PREFIX must be a cmeel prefix)")
    if not (prefix / "include" / "eigen3" / "Eigen").is_dir():
        raise RbdgenError(f"{prefix}: no Eigen headers (include/eigen3); pip install cmeel-eigen")
    if not list((prefix / "lib").glob("libboost_serialization.so*")):
        raise RbdgenError(f"{prefix}: no lib/libboost_serialization.so; pip install cmeel-boost")
    return prefix


def pin_version() -> str:
    import pinocchio

    return pinocchio.__version__


def cxx() -> str:
    return os.environ.get("CXX", "g++")


def compiler_version(compiler: str) -> str:
    """First line of ``compiler --version``."""
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RbdgenError(f"compiler '{compiler}' not usable: {e}") from None
    return out.splitlines()[0].strip() if out else compiler


def include_flags(prefix: Path | None = None) -> list[str]:
    prefix = prefix or pin_prefix()
    return [f"-I{prefix / 'include'}", f"-I{prefix / 'include' / 'eigen3'}"]


def link_flags(prefix: Path | None = None, mode: str = "header-only") -> list[str]:
    """What a program linking the shim's objects (built in ``mode``) needs after them."""
    prefix = prefix or pin_prefix()
    lib = prefix / "lib"
    pin_lib = list(LIBRARY_LINK) if mode == "library" else []
    return [f"-L{lib}", *pin_lib, "-lboost_serialization", f"-Wl,-rpath,{lib}", "-lstdc++", "-lm"]


def shim_mode(mode: str | None = None) -> str:
    """``mode``, else ``$RBDGEN_PINSHIM_MODE``, else ``header-only``; one of :data:`MODES`."""
    mode = mode or os.environ.get(MODE_ENV) or "header-only"
    if mode not in MODES:
        raise RbdgenError(f"{MODE_ENV}={mode!r} is not a shim mode (choose from {', '.join(MODES)})")
    return mode


def shim_flags(flags=None, mode: str | None = None) -> tuple:
    """The flags the shim's parts compile with: ``flags`` (default :data:`BENCH_FLAGS`),
    and in library mode without the machine options (``-m...``: the wheel's library is
    built for baseline x86-64, and Eigen's ABI follows the instruction set) and with
    :data:`LIBRARY_DEFINES`."""
    flags = tuple(BENCH_FLAGS if flags is None else flags)
    if shim_mode(mode) == "header-only":
        return flags
    return (*(f for f in flags if not f.startswith("-m")), *LIBRARY_DEFINES)


def cache_root() -> Path:
    root = Path(os.environ.get("RBDGEN_CACHE") or Path.home() / ".cache" / "rbdgen")
    return root / "pinshim"


# --- building -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShimBuild:
    """Compiled shim objects: ``objects`` (part -> .o), the ``flags`` they were built with,
    ``compile_seconds`` (part -> wall seconds of the build that produced the object, as
    recorded when it was built), ``folder`` (the cache folder), ``mode`` (:data:`MODES`)."""

    folder: Path
    objects: dict
    flags: tuple
    compiler: str
    compile_seconds: dict
    mode: str = "header-only"

    def link_args(self, parts=None) -> list[str]:
        parts = self.objects if parts is None else parts
        return [str(self.objects[p]) for p in parts] + link_flags(mode=self.mode)


def _code_only(text: str) -> bytes:
    """The shim's source without comments and blank runs, so that editing a comment does
    not invalidate minutes of cached compilation (the source has no comment markers in
    string literals)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return " ".join(text.split()).encode()


def _key(mode: str, flags, compiler_id: str, prefix: Path) -> str:
    """The cache folder's name."""
    h = hashlib.sha256()
    for part in (_code_only(SOURCE.read_text()), mode.encode(), json.dumps(list(flags)).encode(),
                 compiler_id.encode(), str(prefix).encode(), pin_version().encode()):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def shim_folder(flags=None, mode: str | None = None) -> Path:
    """The cache folder of the shim's objects for these flags and mode (may not exist yet)."""
    mode = shim_mode(mode)
    return cache_root() / _key(mode, shim_flags(flags, mode), compiler_version(cxx()), pin_prefix())


def is_built(parts, flags=None, mode: str | None = None) -> bool:
    """Whether the objects of ``parts`` (and the core) are already compiled and cached."""
    folder = shim_folder(flags, mode)
    return all((folder / f"{p}.o").exists() for p in ("core", *parts))


def _compile_part(base: list, part: str, folder: Path, target: Path, say) -> float:
    """Compile the shim's ``part`` with the command ``base`` into ``target`` (through a
    private temporary object renamed into place); returns the wall seconds."""
    fd, tmp = tempfile.mkstemp(suffix=".o", prefix=f".{part}.", dir=folder)
    os.close(fd)
    cmd = [*base, f"-DPINSHIM_PART_{part.upper()}", str(SOURCE), "-o", tmp]
    t0 = time.perf_counter()
    try:
        run_tool(cmd, f"compiling the Pinocchio shim part '{part}'")
    except RbdgenError:
        os.unlink(tmp)
        raise
    dt = time.perf_counter() - t0
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    say(f"  shim part {part}: {dt:.1f} s")
    return dt


def _record_seconds(times_path: Path, done: dict, jobs: int) -> None:
    """Add the compile seconds of the parts in ``done`` to ``times_path`` (under its lock:
    two processes finishing parts at once both keep theirs)."""
    with _part_lock(times_path.parent, "times"):
        old = json.loads(times_path.read_text()) if times_path.exists() else {}
        old.update({p: round(t, 2) for p, t in done.items()})
        old["_jobs"] = jobs
        fd, tmp = tempfile.mkstemp(suffix=".json", prefix=".times.", dir=times_path.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(old, indent=1))
        os.replace(tmp, times_path)


def _part_lock(folder: Path, part: str):
    """Held while one process compiles the shim's ``part`` into ``folder``
    (:func:`gen.buildcache.file_lock` on ``<folder>/.<part>.lock``), so that processes
    needing the same missing part at once (a parallel test run's workers, two benchmarks)
    compile it once and the later ones find its object."""
    return file_lock(folder / f".{part}.lock")


def build_shim(parts=PARTS, *, flags=None, mode: str | None = None, jobs: int | None = None,
               progress=None) -> ShimBuild:
    """Compile the requested parts of the shim (cached; missing parts in parallel, at most
    ``jobs`` at a time, default the CPU count).  ``flags`` default to :data:`BENCH_FLAGS`,
    ``mode`` to ``$RBDGEN_PINSHIM_MODE`` (:func:`shim_mode`, :func:`shim_flags`)."""
    parts = tuple(dict.fromkeys(("core", *parts)))
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise RbdgenError(f"unknown shim part(s) {', '.join(bad)} (choose from {', '.join(PARTS)})")
    mode = shim_mode(mode)
    flags = shim_flags(flags, mode)
    prefix = pin_prefix()
    compiler = cxx()
    cid = compiler_version(compiler)
    folder = cache_root() / _key(mode, flags, cid, prefix)
    folder.mkdir(parents=True, exist_ok=True)
    times_path = folder / "compile_seconds.json"
    objects = {p: folder / f"{p}.o" for p in parts}
    missing = [p for p in parts if not objects[p].exists()]
    if missing:
        say = progress or (lambda s: None)
        say(f"compiling the Pinocchio shim ({', '.join(missing)}; {mode}) with {compiler} "
            f"{' '.join(flags)}; this takes minutes once, then it is cached in {folder}")
        base = [compiler, "-c", *flags, *CXX_EXTRA, *PIN_DEFINES, *include_flags(prefix)]

        n = max(1, min(len(missing), jobs or os.cpu_count() or 1))

        def one(part):
            # another process compiling it: wait, then take its object; the seconds are
            # recorded before the lock is let go, so the waiter reads them too
            with _part_lock(folder, part):
                if not objects[part].exists():
                    _record_seconds(times_path, {part: _compile_part(base, part, folder, objects[part], say)}, n)

        with ThreadPoolExecutor(n) as pool:
            list(pool.map(one, missing))
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    secs = {p: times.get(p) for p in parts}
    secs["_jobs"] = times.get("_jobs")
    return ShimBuild(folder, objects, flags, cid, secs, mode)


# --- models and constraints --------------------------------------------------------------------

def pin_model(robot):
    """The ``pinocchio.Model`` of an rbdgen robot (:func:`gen.pinref.pin_model`)."""

    return _pm(robot)


def model_archive(pmodel) -> bytes:
    """``pmodel`` as the Boost text archive the shim loads."""
    return pmodel.saveToString().encode("utf-8")


def _se3_flat(M) -> np.ndarray:
    return np.concatenate([np.asarray(M.R, dtype=float).reshape(9), np.asarray(M.p, dtype=float).reshape(3)])


def constraint_rows(cset) -> list[tuple]:
    """``(type, joint1, M1[12], joint2, M2[12])`` per constraint of an rbdgen
    :class:`~gen.constraints.ConstraintSet`: Pinocchio joint ids are body index + 1
    (0 = the world), placements are the frames in their bodies (docs/DESIGN.md §4 conventions:
    ``RigidConstraintModel(type, model, joint1, M1, joint2, M2, LOCAL)``)."""
    rows = []
    for c in cset.constraints:
        rows.append((c.size, c.body1 + 1, _se3_flat(c.placement1), c.body2 + 1, _se3_flat(c.placement2)))
    return rows
