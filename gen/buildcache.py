"""The build cache: a kernel found by its request, before any tracing (issue 32 §4).

:func:`gen.build` computes :func:`request_key` from what the caller gives, before it
traces anything:

* the model, by :func:`canonical`: every field of the :class:`~gen.model.Model`
  dataclass and of the dataclasses inside it (bodies, joints, inertias, placements,
  frames, mimic couplings, gravity, name, source, locked joints), floats exactly
  (``float.hex``), so a change of one bit of one constant changes the key;
* the algorithm (a registry name, or ``auto`` / ``auto_osim`` as requested: the choice
  itself traces the candidates, so a cached automatic build is keyed on the request and
  its folder keeps the manifest's ``"choice"`` record);
* the constraint set (frames, types, placements, gains, weights, anchors, flags), the
  algorithm's options (as its option checker returns them; an automatic request's as
  given), the code-generation options (``prefix``, ``avoid_stack``, ``batch``,
  ``batch_trig``, ``scalar_trig``, ``lanes``; under ``tuned``, the thresholds of
  :class:`gen.codegen.config.CodegenConfig` that differ from their defaults);
* the generator (:func:`generator_identity`): rbdgen's version, a digest of its own
  source files (``gen/**/*.py``, ``gen/templates/*``, ``opcount/*.py``: a change to the
  generator in a development checkout rebuilds), and the versions of CasADi, NumPy,
  Jinja2, cffi and the Python ABI.

The compiler flags and ``$CC`` are not in the key: the build folder does not depend on
them.  The compiled extension is keyed by the folder's files, the flags and ``$CC``
(:func:`gen.build.compile_cached`), so a request at other flags compiles the cached
folder without tracing it again.

Where the key lives: ``<cache>/keys/<key>.json`` names the build folder
``<cache>/build/<prefix>-<digest of its files>`` (the folder :func:`gen.emit.emit_trace`
names) and a digest of its files.  A hit reads the folder, checks its digest (a modified
or damaged cached folder is a miss and is rebuilt) and imports the extension compiled from
it with the flags asked for (compiling it, without tracing, when there is none).

Concurrency: a builder emits into a private staging folder and renames it into place
(:func:`install`, atomic: the first of two builders of one kernel wins and the other
takes its folder), the extension is moved into place by :func:`gen.build.compile_cached`,
and the key file is written last, through a temporary file and ``os.replace``; a reader
therefore sees either no entry or a complete one.

A request holding something without a canonical form (a constraint set whose gains are
symbols) is not cached: :func:`request_key` returns None.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

import casadi
import cffi
import jinja2
import numpy as np

from .errors import RbdgenError
from .model import Model
from .version import __version__

try:
    import fcntl                                     # POSIX: the builders' lock (building)
except ImportError:                                  # pragma: no cover - not POSIX
    fcntl = None

#: the folders of rbdgen whose files make up :func:`source_digest`, relative to the
#: repository (or site-packages) root, with the glob of each
SOURCES = (("gen", "**/*.py"), ("gen/templates", "*"), ("opcount", "*.py"))


class Uncacheable(Exception):
    """A value in the request has no canonical form (the build goes uncached)."""


def cache_dir(path=None) -> Path:
    """``path``, else ``$RBDGEN_CACHE``, else ``~/.cache/rbdgen``."""
    p = Path(path or os.environ.get("RBDGEN_CACHE") or Path.home() / ".cache" / "rbdgen")
    p.mkdir(parents=True, exist_ok=True)
    return p


def canonical(x, model: Model | None = None):
    """``x`` as a JSON-ready value that two equal requests share and two different ones
    do not: floats as ``{"f": float.hex}`` (exact, -0.0 and 0.0 apart), arrays with their
    dtype and shape, dataclasses with their type name and every compared field, dicts
    with sorted string keys.  ``model``: the request's model, written as a reference
    where it reappears (a constraint set's ``model``).  Raises :class:`Uncacheable` for
    any other type."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return {"f": float(x).hex()}
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise Uncacheable(f"array of dtype {x.dtype}")
        return {"a": x.dtype.kind, "shape": list(x.shape), "v": [canonical(v) for v in x.ravel().tolist()]}
    if isinstance(x, (list, tuple)):
        return [canonical(v, model) for v in x]
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise Uncacheable("dict with keys that are not strings")
        return {"d": {k: canonical(x[k], model) for k in sorted(x)}}
    if model is not None and x is model:
        return {"model": "the request's model"}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"t": type(x).__qualname__,
                "fields": {f.name: canonical(getattr(x, f.name), model) for f in dataclasses.fields(x) if f.compare}}
    raise Uncacheable(f"a value of type {type(x).__name__}")


def digest(value) -> str:
    """sha256 of the canonical JSON text of ``value`` (already :func:`canonical`)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def model_digest(model: Model) -> str:
    """A stable content digest of ``model`` (:func:`canonical`): equal for two loads of
    one file, different when any constant, name or frame differs."""
    return digest(canonical(model))


def tree_digest(root: Path) -> str:
    """sha256 over the names (relative to ``root``) and contents of the files of
    :data:`SOURCES` under ``root``."""
    files = sorted({p.relative_to(root).as_posix(): p for folder, pattern in SOURCES
                    for p in (root / folder).glob(pattern) if p.is_file() and "__pycache__" not in p.parts}.items())
    h = hashlib.sha256()
    for name, path in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """:func:`tree_digest` of the folder holding rbdgen's ``gen`` and ``opcount``
    packages, computed once per process."""
    return tree_digest(Path(__file__).resolve().parent.parent)


@functools.lru_cache(maxsize=1)
def cpu_identity() -> str:
    """This machine's CPU as the compiler sees it for ``-march=native``: the model name
    and feature flags of the first processor in ``/proc/cpuinfo`` (Linux), else the
    platform's description."""
    try:
        text = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    keep = ("model name", "flags", "Features", "CPU implementer", "CPU part")
    return "; ".join(ln.strip() for ln in text.splitlines() if ln.split(":")[0].strip() in keep)


def flag_identity(flags) -> list[str]:
    """The compiler flags and, where one asks for the host's instruction set
    (``-march=native``, ``-mcpu=native``, ``-mtune=native``), the CPU: a cache shared by
    machines with different CPUs never hands one an extension built for another."""
    flags = list(flags)
    native = any(f.endswith("=native") for f in flags)
    return flags + ([f"cpu: {cpu_identity()}"] if native else [])


def generator_identity() -> dict:
    """What besides the request decides the emitted and compiled files: rbdgen's version
    and :func:`source_digest`, the versions of the libraries that write or compile them,
    the Python ABI."""
    return {"rbdgen": __version__, "sources": source_digest(), "casadi": casadi.__version__,
            "numpy": np.__version__, "jinja2": getattr(jinja2, "__version__", ""), "cffi": cffi.__version__,
            "python": [sys.implementation.cache_tag, sysconfig.get_config_var("EXT_SUFFIX") or ""]}


def request_key(model: Model, algorithm: str, constraints, options: dict, codegen: dict) -> str | None:
    """The cache key of a build request (module docstring), or None when a value in it
    has no canonical form."""
    try:
        request = {"model": canonical(model), "algorithm": algorithm,
                   "constraints": canonical(constraints, model), "options": canonical(options),
                   "codegen": canonical(codegen), "generator": generator_identity()}
    except Uncacheable:
        return None
    return digest(request)


# --- the store ------------------------------------------------------------------------------

def read_folder(folder: Path) -> dict[str, bytes] | None:
    """The files of a build folder (name -> bytes), None when it is missing."""
    try:
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    except OSError:
        return None


def files_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()


def key_path(root: Path, key: str) -> Path:
    return root / "keys" / f"{key}.json"


@dataclasses.dataclass
class Entry:
    """A cache hit: the build folder ``folder`` (in the cache), its ``files`` and the
    kernel ``prefix``."""

    folder: Path
    files: dict[str, bytes]
    prefix: str


def lookup(root: Path, key: str) -> Entry | None:
    """The entry of ``key`` in the cache ``root``, or None: no key file, a folder gone,
    or a folder whose files are no longer those recorded (modified or damaged)."""
    try:
        record = json.loads(key_path(root, key).read_text(encoding="utf-8"))
        folder = root / "build" / Path(record["folder"]).name
        recorded, prefix = record["files"], record["prefix"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    files = read_folder(folder)
    if not files or files_digest(files) != recorded:
        return None
    return Entry(folder, files, prefix)


@contextlib.contextmanager
def building(root: Path, key: str | None):
    """Held while one process builds ``key``: an exclusive ``flock`` on
    ``<root>/locks/<key>.lock``, so that processes asking for the same new kernel at once
    (a parallel test run's workers, several solvers started together) take turns, and the
    later ones find the first one's entry (:func:`lookup` again inside) instead of tracing
    and compiling it again.  Nothing for an uncacheable request or without ``fcntl``."""
    if key is None:
        yield
        return
    folder = root / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / f"{key}.lock"):
        yield


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive ``flock`` on the file ``path`` (created) while the block runs: one
    process at a time among those asking for the same path.  Nothing without ``fcntl``."""
    if fcntl is None:
        yield
        return
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_json_atomic(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, indent=1, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(root: Path, key: str, folder: Path, files: dict[str, bytes], prefix: str) -> None:
    """Write the key file of a finished build: ``folder`` (under ``<root>/build``) with
    ``files`` and the kernel ``prefix``."""
    _write_json_atomic(key_path(root, key), {
        "folder": folder.name, "files": files_digest(files), "prefix": prefix, "generator": f"rbdgen {__version__}"})


def install(staged: Path, build_root: Path, files: dict[str, bytes]) -> Path:
    """Move the emitted folder ``staged`` to ``build_root/<its name>`` by one rename and
    return that path.  When the name is taken (another builder of the same kernel came
    first, or a folder of an earlier rbdgen) the folder there is kept if it holds exactly
    ``files``, and replaced otherwise (a cached folder someone modified)."""
    target = build_root / staged.name
    try:
        os.rename(staged, target)
        return target
    except OSError:
        if not target.is_dir():
            raise
    if read_folder(target) == files:
        return target
    aside = Path(tempfile.mkdtemp(prefix=f".stale-{staged.name}.", dir=build_root))
    try:
        os.rename(target, aside / "old")
    except FileNotFoundError:          # another builder moved it aside first
        pass
    try:
        os.rename(staged, target)
    except OSError:
        if read_folder(target) != files:
            raise RbdgenError(f"cannot install the build folder {target}: it is being replaced by another "
                              f"process with different files") from None
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return target


# --- the route counts of derivative rows ----------------------------------------------------

def counts_path(root: Path, key: str) -> Path:
    return root / "routes" / f"{key}.json"


def read_counts(root: Path, key: str) -> dict | None:
    """The route counts recorded under ``key`` (:func:`gen.trace.trace`: ``{"ops": {route:
    n}, "cost": {route: n}}`` of both routes), or None: no record, or one that is not two
    routes' integer counts (damaged)."""
    try:
        value = json.loads(counts_path(root, key).read_text(encoding="utf-8"))
        ops, cost = value["ops"], value["cost"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(ops, dict) and isinstance(cost, dict) and set(ops) == set(cost) == {"analytical", "ad"}
            and all(type(v) is int for v in [*ops.values(), *cost.values()])):
        return None
    return {"ops": ops, "cost": cost}


def write_counts(root: Path, key: str, ops: dict, cost: dict) -> None:
    """Record both routes' counts under ``key`` (atomic, as the key files); a cache that
    cannot be written is left alone (the counts are an optimisation, never needed)."""
    try:
        _write_json_atomic(counts_path(root, key), {"ops": ops, "cost": cost, "generator": f"rbdgen {__version__}"})
    except OSError:
        pass
