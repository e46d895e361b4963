"""Building: a build folder compiled with cffi into an importable extension (docs/DESIGN.md §1, §4).

``gen.build(robot, algorithm)`` traces, emits (:mod:`gen.emit`) and compiles, and returns
a :class:`Kernel`: callable on NumPy arrays with the same inputs and outputs as
``gen.run`` (vectors 1-D, matrices 2-D, a tuple for several outputs), with
``.manifest``, ``.header_path`` and ``.sources``.  With a tolerance (``gen.build(robot,
"prox_ltl", spec, tol=1e-10, max_iter=50)``) the kernel is the early-exit C driver of
:mod:`gen.emit` and its call returns ``(ddq, lam, iterations, residual)`` like
``gen.run(..., tol=1e-10, max_iter=50)``, iteration count included.  With ``batch=N``
(N = 2, 4, 8, 16) the C evaluates N states per call, lanes innermost (:mod:`gen.emit`,
"batched kernels"), and the kernel takes stacked states: each input a ``(k, n)`` array
or a list of k vectors, any k >= 1 (run N at a time, the last call padded with copies of
the last state), and returns each output with a leading axis of k.

A build is found before it is traced: :func:`build` computes the key of the request
(:func:`gen.buildcache.request_key`: the model's content, the algorithm, constraints,
options, code-generation options, compiler flags and the generator's version and source
digest) and, when ``<cache>/keys/<key>.json`` exists and its folder is intact, imports the
cached extension and returns the :class:`Kernel` without tracing or emitting.  Otherwise
it traces, emits into a private staging folder that is renamed into
``<cache>/build/<prefix>-<digest>`` (concurrent builders of one kernel agree), compiles,
and writes the key file last.  With ``out_dir`` the build folder's files are also written
into ``out_dir`` (files of the same names replaced, others left alone), hit or miss, and
the Kernel's folder is ``out_dir``.

Compiled extensions are cached by a content hash of the sources, header and cdef, the
compiler flags and the Python/cffi ABI, in ``$RBDGEN_CACHE`` or ``~/.cache/rbdgen``, so a
folder compiled twice (:func:`compile_folder`) imports the first extension.
Flags default to ``-O3 -march=native`` (``flags=`` or ``$RBDGEN_CFLAGS``); ``-g0`` is
appended because the debug info distutils asks for costs ~70 % of the compile time of a
large kernel.  Progress (trace / codegen / compile, with elapsed times; a cached build:
one line) goes to the ``progress`` callback, or the ``rbdgen`` logger at INFO.

Outputs ``iterations`` and ``residual`` (the iterative solvers) are Python numbers, an
``int`` and a ``float``, as from ``gen.run``; a batched kernel returns them as arrays of
shape ``(k,)``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import cffi

from . import buildcache
from .buildcache import cache_dir
from .api import get_algorithm
from .choose import is_auto, resolve
from .codegen.config import CodegenConfig
from .emit import BuildFolder, emit_trace, log, timed, trace_for, write
from .errors import RbdgenError, run_tool
from .kernel import Kernel  # noqa: F401  (gen.build.Kernel)
from .model import Model
from .robots import load_robot

DEFAULT_FLAGS = ("-O3", "-march=native")


def compile_flags(flags=None) -> list[str]:
    """``flags`` (a shell-quoted string or a list), else ``$RBDGEN_CFLAGS``, else
    :data:`DEFAULT_FLAGS`."""
    if flags is None:
        flags = os.environ.get("RBDGEN_CFLAGS") or list(DEFAULT_FLAGS)
    if not isinstance(flags, str):
        return list(flags)
    try:
        return shlex.split(flags)
    except ValueError as e:
        raise RbdgenError(f"compiler flags '{flags}': {e}") from None


def _folder_files(folder: Path, manifest: dict) -> dict[str, bytes]:
    names = [manifest["header"], manifest["cdef"], *manifest["sources"]]
    return {n: (folder / n).read_bytes() for n in names}


def content_key(files: dict[str, bytes], flags: Sequence[str]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    abi = [sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX") or "",
           cffi.__version__, os.environ.get("CC", "")]
    h.update(json.dumps([buildcache.flag_identity(flags), abi]).encode())
    return h.hexdigest()


def extension_path(root: Path, modname: str) -> Path:
    """Where :func:`compile_cached` keeps the extension ``modname`` in the cache ``root``."""
    return root / f"{modname}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"


def compile_cached(name: str, files: dict[str, bytes], cdef: str, header: str, sources: Sequence[str],
                   flags: Sequence[str], *, cache=None, what: str, progress=None):
    """The one cffi compile-and-cache routine (kernels, the simulation loop, the generic
    library): ``sources`` (names in ``files``) compiled with the declarations ``cdef``
    and ``#include "header"`` into the extension ``<name>_<hash>``, where the hash is
    :func:`content_key` of ``files``, ``cdef`` and ``flags``.  The files are compiled
    from a private snapshot (never the live folder) and the result moved into the cache
    atomically, so concurrent builders agree; a cached module is imported, not rebuilt
    (and not reported to ``progress``).
    A compiler failure is an :class:`RbdgenError` saying ``what`` failed."""
    flags = list(flags)
    modname = f"{name}_{content_key({**files, '<cdef>': cdef.encode()}, flags)[:16]}"
    root = cache_dir(cache)
    target = extension_path(root, modname)
    if target.exists():            # a hit is silent: the caller says what it found
        return _import(modname, target)
    with timed(progress, f"compile {name} ({' '.join(flags)})", announce=True):
        work = Path(tempfile.mkdtemp(prefix=f".{modname}.", dir=root))
        try:
            for fname, data in files.items():
                (work / fname).write_bytes(data)
            ffi = cffi.FFI()
            ffi.cdef(cdef)
            ffi.set_source(modname, f'#include "{header}"', sources=[str(work / s) for s in sources],
                           include_dirs=[str(work)], extra_compile_args=[*flags, "-g0"], libraries=["m"])
            built = Path(ffi.compile(tmpdir=str(work), verbose=False))
            os.replace(built, target)
        except Exception as e:                     # distutils' CompileError and friends
            raise RbdgenError(f"{what} failed: {e}") from e
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _import(modname, target)


def compile_shared(name: str, files: dict[str, bytes], sources: Sequence[str], flags: Sequence[str], *,
                   cache=None, what: str, progress=None) -> Path:
    """A plain shared library (no Python in it) ``lib<name>-<hash>.so`` of ``sources``
    (names in ``files``), compiled by ``$CC`` (default ``cc``) with ``flags`` plus
    ``-shared -fPIC -g0`` and linked with libm, kept in ``<cache>/lib``; the
    hash is :func:`content_key` of ``files`` and ``flags``, so an unchanged request loads
    the first library.  Compiled in a private folder and moved into place atomically
    (concurrent builders agree).  What :mod:`gen.casadi_api` hands to
    ``casadi.external`` and what a C program links against.  The compiler's default
    dialect, as the cffi extension's: ``-std=c99`` would turn off the contraction into
    FMAs that gnu dialects allow (measured: solo12 aba 0.89 -> ... us)."""
    flags = list(flags)
    root = cache_dir(cache) / "lib"
    root.mkdir(exist_ok=True)
    target = root / f"lib{name}-{content_key({**files, '<shared>': b''}, flags)[:16]}.so"
    if target.exists():
        return target
    cc = shlex.split(os.environ.get("CC") or "cc")
    with timed(progress, f"compile lib{name}.so ({' '.join(flags)})", announce=True):
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
        try:
            for fname, data in files.items():
                (work / fname).write_bytes(data)
            out = work / target.name
            run_tool([*cc, *flags, "-g0", "-shared", "-fPIC", "-I", str(work),
                      *(str(work / s) for s in sources), "-o", str(out), "-lm"], what)
            os.replace(out, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def compile_folder(folder, *, flags=None, cache=None, progress=None):
    """Compile the build folder ``folder`` (cached); returns the imported module
    (``.ffi``, ``.lib``)."""
    folder = Path(folder).resolve()
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    files = _folder_files(folder, manifest)
    return compile_cached(f"_rbdgen_{manifest['functions'][0]['symbol']}", files,
                          files[manifest["cdef"]].decode("utf-8"), manifest["header"], manifest["sources"],
                          compile_flags(flags), cache=cache, what=f"compiling {folder}", progress=progress)


def _import(modname: str, path: Path):
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[modname] = mod
    return mod


#: seconds after which a build's default progress starts printing (a quick build stays silent)
PATIENCE = 2.0


class Patient:
    """The default progress of :func:`build`: messages are held for the first
    :data:`PATIENCE` seconds of the build, then printed to stderr (``rbdgen: ...``), the
    held ones first, so that only a build a user waits for speaks."""

    def __init__(self, t0: float):
        self.t0, self.held = t0, []

    def __call__(self, msg: str) -> None:
        if time.perf_counter() - self.t0 < PATIENCE:
            self.held.append(msg)
            return
        for m in self.held + [msg]:
            print(f"rbdgen: {m}", file=sys.stderr, flush=True)
        self.held = []


def build(robot, algorithm: str, constraints=None, *, out_dir=None, flags=None, cache=None,
          progress: Callable[[str], None] | None = None, prefix: str | None = None,
          avoid_stack: bool | None = None, batch: int | None = None, batch_trig: str | None = None,
          scalar_trig: str | None = None, lanes: bool | None = None, quiet: bool = False,
          config: CodegenConfig | None = None, **options) -> Kernel:
    """Trace, emit and compile ``algorithm`` on ``robot``, or find it in the cache before
    tracing (module docstring); returns a :class:`Kernel`.

    ``out_dir``: a folder that receives the build folder's files too (the kernel's
    folder; default: the cache's ``<cache>/build/<prefix>-<digest>``);
    ``flags``: compiler flags (default ``-O3 -march=native`` or ``$RBDGEN_CFLAGS``);
    ``cache``: the cache directory; ``progress``: a ``str -> None`` callback (default: a
    build that takes more than :data:`PATIENCE` seconds prints its progress to stderr,
    as the CLI does, unless ``quiet``); ``prefix`` / ``avoid_stack``: emission options (:mod:`gen.emit`); ``batch``: N states
    per call (a batched kernel, see the module docstring), ``batch_trig`` its sin and cos
    ("vector" or "libm", :data:`gen.codegen.config.BATCH_TRIG`), ``scalar_trig`` the scalar kernel's
    (:data:`gen.codegen.config.SCALAR_TRIG`: "hoisted", default, the joint angles' through the
    batched kernels' routine 4 at a time; "vector", every one through it, so that with
    ``-ffp-contract=off`` the lanes of a batched kernel are bit for bit the scalar one's;
    "libm", glibc's);
    ``lanes``: write the robot's isomorphic limbs as vector lanes where that pays
    (:mod:`gen.lanes`; False: every statement on doubles); ``config``: a
    :class:`gen.codegen.config.CodegenConfig` (its thresholds too; those not at their
    defaults are part of the cache key), whose fields the keywords above replace when
    given;
    other keyword
    ``options`` go to the algorithm (``iterations``, ``mu``; ``tol`` and ``max_iter``
    build the early-exit driver).  ``algorithm`` ``auto`` (constrained forward dynamics)
    or ``auto_osim`` (damped Delassus inverse): the row :func:`gen.choose.choose` picks for
    these constraints and options; the manifest's ``"choice"`` records it and every
    alternative's estimate or exclusion."""

    t0 = time.perf_counter()
    given = {"prefix": prefix, "avoid_stack": avoid_stack, "batch": batch, "batch_trig": batch_trig,
             "scalar_trig": scalar_trig, "lanes": lanes}
    # refused here, before tracing
    config = (config or CodegenConfig()).with_(**{k: v for k, v in given.items() if v is not None})
    model = robot if isinstance(robot, Model) else load_robot(robot)
    flags = compile_flags(flags)
    root = cache_dir(cache)
    key = _request_key(model, algorithm, constraints, options, config.request())
    entry = _lookup(root, key)
    if entry is None:
        with buildcache.building(root, key):         # another process may be building it: wait, look again
            entry = _lookup(root, key)
            if entry is None:
                return _new_kernel(model, algorithm, constraints, options, config, key, flags=flags, root=root,
                                   out_dir=out_dir, progress=progress or (None if quiet else Patient(t0)))
    kernel = _cached_kernel(entry, model, constraints, options, out_dir=out_dir, flags=flags, root=root,
                            progress=progress)
    (progress or log.info)(f"build {model.name}/{kernel.algorithm.name} (cached: {entry.folder}): "
                           f"{time.perf_counter() - t0:.2f} s")
    return kernel


def _lookup(root: Path, key: str | None):
    """The cache entry of ``key`` (None: none, or an uncacheable request)."""
    return None if key is None else buildcache.lookup(root, key)


def _new_kernel(model: Model, algorithm: str, constraints, options: dict, config: CodegenConfig, key: str | None, *,
                flags, root: Path, out_dir, progress) -> Kernel:
    """Trace, emit, compile and record a kernel the cache does not hold."""
    folder, files, tr = _trace_and_emit(model, algorithm, constraints, options, config, root, progress)
    cached = folder
    if out_dir is not None:            # written before compiling: a compiler error leaves the files to look at
        folder = _write_to(folder, out_dir)
    module = compile_folder(cached.path, flags=flags, cache=root, progress=progress)
    if key is not None:
        buildcache.record(root, key, cached.path, files, cached.prefix)
    return Kernel(folder, module, tr.model, get_algorithm(tr.algorithm.name), tr.cset, tr.options)


def build_folder(robot, algorithm: str, constraints=None, *, cache=None,
                 progress: Callable[[str], None] | None = None, quiet: bool = False, **options) -> BuildFolder:
    """The build folder :func:`build` would compile (default code generation), found in
    the cache or traced and emitted into it, but not compiled: for a library that
    compiles folders its own way (:func:`gen.casadi_api.casadi_library`, one shared
    library of two kernels).  The request is keyed as :func:`build` keys it, so a
    folder either made is the other's too."""
    t0 = time.perf_counter()
    model = robot if isinstance(robot, Model) else load_robot(robot)
    config = CodegenConfig()
    root = cache_dir(cache)
    key = _request_key(model, algorithm, constraints, options, config.request())
    entry = _lookup(root, key)
    if entry is None:
        with buildcache.building(root, key):         # another process may be emitting it: wait, look again
            entry = _lookup(root, key)
            if entry is None:
                folder, files, _ = _trace_and_emit(model, algorithm, constraints, options, config, root,
                                                   progress or (None if quiet else Patient(t0)))
                if key is not None:
                    buildcache.record(root, key, folder.path, files, folder.prefix)
                return folder
    files = {n: b.decode("utf-8") for n, b in entry.files.items()}
    return BuildFolder(entry.folder, entry.prefix, json.loads(files["manifest.json"]), files)


def _request_key(model: Model, algorithm: str, constraints, options: dict, codegen: dict) -> str | None:
    """:func:`gen.buildcache.request_key` of a build: a registry row's constraint set and
    options as it resolves and checks them (errors raised here, before tracing); an
    automatic choice's as requested."""
    if is_auto(algorithm):
        return buildcache.request_key(model, algorithm, constraints, options, codegen)
    algo = get_algorithm(algorithm)
    return buildcache.request_key(model, algo.name, algo.constraint_set(model, constraints),
                                  algo.check_options(options), codegen)


def _say_choice(progress, record: dict) -> None:
    """Report an automatic choice (:meth:`gen.choose.Choice.record`) to ``progress``."""
    if progress is not None:
        costs = [f"{c['algorithm']} " + ("excluded" if c["cost"] is None else f"cost {c['cost']:.0f}")
                 for c in record["candidates"]]
        progress(f"{record['auto']}: chose {record['chosen']} ({', '.join(costs)})")


def _trace_and_emit(model: Model, algorithm: str, constraints, options: dict, config: CodegenConfig, root: Path,
                    progress) -> tuple[BuildFolder, dict[str, bytes], object]:
    """Trace and emit a build folder into ``<root>/build`` (staged, then renamed into
    place by :func:`gen.buildcache.install`); returns it, its files and the trace."""
    model, name, choice = resolve(model, algorithm, constraints, options)
    record = None if choice is None else choice.record()
    if record is not None:
        _say_choice(progress, record)
    tr = trace_for(model, name, constraints, progress=progress, config=config, **options)
    build_root = root / "build"
    build_root.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=build_root))
    try:
        emitted = emit_trace(tr, None, under=staging, progress=progress, choice=record, config=config)
        files = {n: t.encode("utf-8") for n, t in emitted.files.items()}
        path = buildcache.install(emitted.path, build_root, files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildFolder(path, emitted.prefix, emitted.manifest, emitted.files), files, tr


def _write_to(folder: BuildFolder, out_dir) -> BuildFolder:
    """``folder``'s files written into ``out_dir`` (:func:`gen.emit.write`: same-named
    files replaced atomically, other files left alone)."""
    return BuildFolder(write(folder.files, out_dir), folder.prefix, folder.manifest, folder.files)


def _cached_kernel(entry: buildcache.Entry, model: Model, constraints, options: dict, *, out_dir, flags,
                   root: Path, progress) -> Kernel:
    """The :class:`Kernel` of a cache hit: the algorithm from the cached manifest (an
    automatic choice's chosen row), the constraint set and options resolved as a build
    resolves them, the extension for ``flags`` imported (compiled from the cached folder
    when there is none)."""
    files = {n: b.decode("utf-8") for n, b in entry.files.items()}
    manifest = json.loads(files["manifest.json"])
    algo = get_algorithm(manifest["algorithm"])
    if manifest.get("choice"):
        _say_choice(progress, manifest["choice"])
    cset, opts = algo.constraint_set(model, constraints), algo.check_options(options)
    folder = BuildFolder(entry.folder, entry.prefix, manifest, files)
    if out_dir is not None:
        folder = _write_to(folder, out_dir)
    module = compile_folder(entry.folder, flags=flags, cache=root, progress=progress)
    return Kernel(folder, module, model, algo, cset, opts)
