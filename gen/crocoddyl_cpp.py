"""``rbdgen build ... --crocoddyl``: a header-only C++ crocoddyl action model next to a
derivative kernel (template ``gen/templates/crocoddyl.hpp.j2``).

The kernel decides the class: ``aba_derivatives`` gives
``rbdgen::DifferentialActionModelFreeFwdDynamics``, ``constrained_derivatives`` on a set
of world-anchored contacts gives ``rbdgen::DifferentialActionModelContactFwdDynamics``;
both derive from crocoddyl's classes of the same names (same constructor arguments, data
and ``quasiStatic``) and call the kernel, which returns the value after the derivatives,
once per ``calc``.  crocoddyl's ``inv_damping`` ``eps`` is the kernel's ``iterations = 1,
mu = eps``, and ``eps = 0`` rbdgen's default ``iterations = 3, mu = 1e-6`` (the Python
models' rule, :mod:`gen.crocoddyl`); other options, a position gain ``Kp``, weights,
velocity or unilateral rows and batched kernels have no crocoddyl counterpart and are
refused in one line.  The header checks at construction that crocoddyl's model is the
kernel's (sizes, armature, contact frames in crocoddyl's order, LOCAL, gains, damping).

The same header, compiled into a boost.python extension (:func:`extension`, template
``gen/templates/crocoddyl_py.cpp.j2``: one C++ translation unit per kernel, the kernel's C
compiled beside it), is the Python class :mod:`gen.crocoddyl` returns: a subclass of
crocoddyl's class of the same name in Python too, whose calc and calcDiff crocoddyl's
integrators and solvers call in C++, with no Python in a solve.  It is compiled against the
crocoddyl wheel's headers and linked against its ``libboost_python3XX.so``,
``libcrocoddyl.so`` and ``libpinocchio_default.so`` (``<site-packages>/cmeel.prefix``),
with the compile definitions of the wheel's CMake configuration (they fix the layout of
Pinocchio's and crocoddyl's types), without ``-march=native`` (Eigen's alignment must be
the wheel's); the kernel's C with the kernels' flags.  The extension is cached in
``<cache>/crocoddyl`` by its files, both compilers' flags and identities and the wheels'
versions; concurrent builders take turns (:func:`gen.buildcache.file_lock`).

This module needs neither crocoddyl nor Pinocchio: it writes text and compiles it.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2

from . import buildcache
from .api import get_algorithm
from .build import _import, cache_dir, compile_flags
from .emit import STAMP, TEMPLATES_DIR, log
from .errors import RbdgenError, run_tool

CLASSES = {"aba_derivatives": ("DifferentialActionModelFreeFwdDynamics", "DifferentialActionDataFreeFwdDynamics"),
           "constrained_derivatives": ("DifferentialActionModelContactFwdDynamics",
                                       "DifferentialActionDataContactFwdDynamics")}
#: rbdgen's defaults, crocoddyl's inv_damping = 0
DEFAULT_ITERATIONS, DEFAULT_MU = 3, 1e-6


def header_name(kernel) -> str:
    return f"{kernel.symbol}_crocoddyl.hpp"


def inv_damping_of(options: dict) -> float:
    """crocoddyl's ``inv_damping`` equal to the kernel's options (module docstring)."""
    extra = sorted(set(options) - {"iterations", "mu", "route"})
    if extra:
        raise RbdgenError(f"--crocoddyl: option(s) {', '.join(extra)} have no crocoddyl counterpart")
    iterations, mu = int(options.get("iterations", DEFAULT_ITERATIONS)), float(options.get("mu", DEFAULT_MU))
    if iterations == 1:
        return mu
    if (iterations, mu) == (DEFAULT_ITERATIONS, DEFAULT_MU):
        return 0.0
    raise RbdgenError(f"--crocoddyl: iterations={iterations}, mu={mu:g} is no crocoddyl inv_damping (use "
                      f"--iterations 1 --mu EPS for inv_damping EPS, or the defaults for 0)")


def _contacts(kernel) -> dict:
    cset = kernel.cset
    if cset is None or not cset.constraints:
        raise RbdgenError("--crocoddyl with constrained_derivatives needs the contacts (-c 3D:FOOT,...)")
    if cset.Kp != 0.0 or cset.Kv != 0.0:
        raise RbdgenError(f"--crocoddyl: Baumgarte Kp={cset.Kp:g} (or Kv) is not supported; crocoddyl's contact gains "
                          f"are [0, Kd] here (--baumgarte 0,KD)")
    for c in cset.constraints:
        if c.weight != 1.0 or c.velocity or c.unilateral or c.body2 >= 0:
            raise RbdgenError(f"--crocoddyl: constraint '{c}' is not a crocoddyl contact (a frame held in the world, "
                              f"weight 1, bilateral position rows)")
    frames = [kernel.model.frame(c.frame1).name for c in cset.constraints]
    eps = inv_damping_of(kernel.options)
    return {"frames": [json.dumps(f) for f in frames], "sizes": [c.size for c in cset.constraints],
            "nc": cset.m, "kd": f"{cset.Kd:g}", "kd_literal": repr(float(cset.Kd)),
            "eps": f"{eps:g}", "eps_literal": repr(float(eps)),
            "spec": _comment(",".join(str(c) for c in cset.constraints))}


def _comment(text: str) -> str:
    """``text`` safe inside a C++ comment or string literal (names come from input files)."""
    return json.dumps(text)[1:-1].replace("*/", "*\\/")


def _context(kernel) -> dict:
    algorithm = kernel.algorithm.name
    if algorithm not in CLASSES:
        raise RbdgenError(f"--crocoddyl needs -a aba_derivatives (free dynamics) or -a constrained_derivatives "
                          f"(contacts); got -a {algorithm}")
    if kernel.batch:
        raise RbdgenError("--crocoddyl needs a scalar kernel (no --batch)")
    contact = algorithm == "constrained_derivatives"
    cls, data_cls = CLASSES[algorithm]
    ctx = {"stamp": STAMP, "symbol": kernel.symbol, "prefix": kernel.symbol, "cls": cls, "data_cls": data_cls,
           "algorithm": algorithm, "robot": _comment(kernel.model.name), "contact": contact,
           "header": header_name(kernel), "c_header": kernel.header_path.name,
           "guard": f"{kernel.symbol.upper()}_CROCODDYL_HPP", "nq": kernel.model.nq, "nv": kernel.model.nv,
           "work_size": kernel.work_size, **(_contacts(kernel) if contact else {})}
    return ctx


def _template(name: str):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env.get_template(name)


def render(kernel) -> str:
    """The header-only C++ action model of ``kernel`` (module docstring)."""
    return _header_text(_context(kernel))


def _header_text(ctx: dict) -> str:
    return _template("crocoddyl.hpp.j2").render(ctx)


def write_header(kernel, out_dir) -> Path:
    """Write the C++ action model of ``kernel`` into ``out_dir`` (module docstring)."""
    path = Path(out_dir) / header_name(kernel)
    path.write_text(render(kernel))
    return path


# --- the Python extension -------------------------------------------------------------------

#: the C++ translation unit's flags: no -march=native (Eigen's alignment must be the wheel's)
CXX_FLAGS = ("-O3", "-DNDEBUG", "-std=gnu++17", "-fopenmp", "-fPIC", "-g0")
#: the wheel's libraries the extension links (lib<name>.so in cmeel.prefix/lib); libboost_python's name has
#: the Python version
LIBRARIES = ("crocoddyl", "pinocchio_default")
#: the wheels whose headers and libraries the extension is compiled against (part of its cache key)
WHEELS = ("crocoddyl", "libcrocoddyl", "pin", "libpinocchio", "eigenpy", "cmeel-boost", "cmeel-eigen", "coal")


class FolderKernel:
    """What :func:`render` and :func:`extension` read of a :class:`gen.kernel.Kernel`, for
    a build folder that cffi has not compiled (:func:`gen.build.build_folder`): the
    extension compiles the kernel's C itself, so the compiled models never compile it
    twice."""

    def __init__(self, folder, model, constraints=None, options=None):
        self.folder, self.model, self.manifest = folder, model, folder.manifest
        self.algorithm = get_algorithm(self.manifest["algorithm"])
        self.cset = self.algorithm.constraint_set(model, constraints)
        self.options = self.algorithm.check_options(dict(options or {}))
        function = self.manifest["functions"][0]
        self.symbol, self.work_size, self.batch = function["symbol"], function["work_size"], self.manifest.get("batch")
        self.path, self.header_path = folder.path, folder.header_path


def wheel_prefix() -> Path:
    """``<site-packages>/cmeel.prefix``, where the crocoddyl and Pinocchio wheels keep
    their headers, libraries and CMake configurations."""
    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix"


def boost_python_name() -> str:
    return f"boost_python{sys.version_info.major}{sys.version_info.minor}"


def _compiler(env: str, default: str) -> list[str]:
    return shlex.split(os.environ.get(env) or default)


@functools.lru_cache(maxsize=4)
def _version_line(cmd: tuple) -> str:
    """The first line of ``cmd --version`` (empty when it does not run)."""
    try:
        done = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout.strip().splitlines() or [""])[0] if done.returncode == 0 else ""


def unavailable() -> str:
    """Why the extension cannot be built here (a one-line reason), or ``""``."""
    cxx, cc = _compiler("CXX", "c++"), _compiler("CC", "cc")
    for cmd, var in ((cxx, "CXX"), (cc, "CC")):
        if shutil.which(cmd[0]) is None or not _version_line(tuple(cmd)):
            return f"no working compiler {cmd[0]!r} (${var})"
    prefix = wheel_prefix()
    needed = ["include/crocoddyl/multibody/actions/contact-fwddyn.hpp", "include/boost/python.hpp",
              "include/eigen3/Eigen/Core", "lib/cmake/crocoddyl/crocoddylConfig.cmake",
              *(f"lib/lib{n}.so" for n in (*LIBRARIES, boost_python_name()))]
    missing = [n for n in needed if not (prefix / n).exists()]
    if missing:
        return f"the crocoddyl wheel's {missing[0]} is not in {prefix}"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return f"Python.h is not in {sysconfig.get_paths()['include']} (install Python's development headers)"
    return ""


_INTERFACE = re.compile(r'INTERFACE_(COMPILE_DEFINITIONS|INCLUDE_DIRECTORIES) "([^"]*)"')
_ADD_DEFINITIONS = re.compile(r"^\s*ADD_DEFINITIONS\(([^)]*)\)", re.MULTILINE | re.IGNORECASE)


@functools.lru_cache(maxsize=2)
def wheel_flags(prefix: Path) -> tuple[str, ...]:
    """The ``-D`` and ``-isystem`` flags CMake gives a target linking
    ``crocoddyl::crocoddyl`` from the wheel: crocoddyl's ``ADD_DEFINITIONS`` and the
    ``INTERFACE_COMPILE_DEFINITIONS`` and ``INTERFACE_INCLUDE_DIRECTORIES`` of the crocoddyl,
    Pinocchio, coal and Eigen targets (generator expressions left out: they name other
    targets' properties, which are listed themselves).  The definitions decide the layout
    of Pinocchio's joint variants and of crocoddyl's classes."""
    cmake = prefix / "lib" / "cmake"
    defs: dict[str, None] = {}
    dirs: dict[str, None] = {}
    for pkg in ("crocoddyl", "pinocchio", "coal"):
        for f in sorted((cmake / pkg).glob("*.cmake")):
            text = f.read_text(errors="replace")
            for kind, group in _INTERFACE.findall(text):
                for item in (i for i in group.split(";") if i and "$<" not in i):
                    if kind == "COMPILE_DEFINITIONS":
                        defs[f"-D{item}"] = None
                    else:
                        dirs[item.replace("${_IMPORT_PREFIX}", str(prefix))] = None
            for group in _ADD_DEFINITIONS.findall(text):
                defs.update((d, None) for d in group.split() if d.startswith("-D"))
    dirs[str(prefix / "include" / "eigen3")] = None
    return (*defs, *(flag for d in dirs for flag in ("-isystem", d)))


def _wheel_versions() -> dict:
    versions = {}
    for name in WHEELS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _module_text(ctx: dict, module: str) -> str:
    return _template("crocoddyl_py.cpp.j2").render({**ctx, "module": module})


def extension(kernel, *, flags=None, cache=None, progress=None):
    """The imported boost.python extension of ``kernel``'s action model (module
    docstring), compiled on first use and cached; ``flags``: the kernel's C flags
    (default :func:`gen.build.compile_flags`).  Raises :class:`RbdgenError` when it
    cannot be built (:func:`unavailable`, or the compiler's error)."""
    why = unavailable()
    if why:
        raise RbdgenError(f"cannot build the crocoddyl extension: {why}")
    prefix = wheel_prefix()
    ctx = _context(kernel)
    files = {n: (Path(kernel.path) / n).read_bytes() for n in [kernel.manifest["header"], *kernel.manifest["sources"]]}
    files[header_name(kernel)] = _header_text(ctx).encode()
    cflags, defs = compile_flags(flags), list(wheel_flags(prefix))
    cxx, cc = _compiler("CXX", "c++"), _compiler("CC", "cc")
    identity = {"files": buildcache.files_digest({**files, "<module>": _module_text(ctx, "MODULE").encode()}),
                "cflags": buildcache.flag_identity(cflags), "cxxflags": [*CXX_FLAGS, *defs],
                "compilers": [cxx, _version_line(tuple(cxx)), cc, _version_line(tuple(cc))],
                "wheels": _wheel_versions(), "prefix": str(prefix),
                "python": [sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX") or ""]}
    module = f"_rbdgen_croc_{hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]}"
    root = cache_dir(cache) / "crocoddyl"
    root.mkdir(exist_ok=True)
    target = root / f"{module}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if not target.exists():
        with buildcache.file_lock(root / f"{module}.lock"):
            if not target.exists():
                files[f"{module}.cpp"] = _module_text(ctx, module).encode()
                _compile(files, kernel.manifest["sources"], f"{module}.cpp", target, cflags, defs, cxx, cc,
                         prefix, progress or log.info)
    return _import(module, target)


def _compile(files: dict, c_sources: list, cpp: str, target: Path, cflags: list, defs: list, cxx: list, cc: list,
             prefix: Path, say) -> None:
    """Compile the kernel's C (``cflags``) and the module's C++ (:data:`CXX_FLAGS`, the
    wheel's definitions) at once, link them against the wheel's libraries into ``target``
    (moved into place atomically)."""
    t0 = time.perf_counter()
    say(f"compile the crocoddyl extension {target.name} (C++ against crocoddyl's headers: 1-2 min) ...")
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            (work / name).write_bytes(data)
        include = sysconfig.get_paths()["include"]
        steps = [([*cc, *cflags, "-g0", "-fPIC", "-fvisibility=hidden", "-c", str(work / s),
                   "-o", str(work / f"{s}.o")], f"compiling {s}") for s in c_sources]
        steps.append(([*cxx, *CXX_FLAGS, *defs, "-I", str(work), "-isystem", include,
                       "-c", str(work / cpp), "-o", str(work / f"{cpp}.o")], f"compiling {cpp}"))
        with ThreadPoolExecutor(max_workers=2) as pool:
            for f in [pool.submit(run_tool, cmd, what) for cmd, what in steps]:
                f.result()
        lib = prefix / "lib"
        out = work / target.name
        run_tool([*cxx, "-shared", "-fopenmp", *(str(work / f"{s}.o") for s in [*c_sources, cpp]), "-o", str(out),
                  "-L", str(lib), f"-Wl,-rpath,{lib}", *(f"-l{n}" for n in (*LIBRARIES, boost_python_name())),
                  "-lm"], f"linking {target.name}")
        os.replace(out, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"compile the crocoddyl extension {target.name}: {time.perf_counter() - t0:.1f} s")
