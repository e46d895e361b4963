"""cffi binding of the generic C library (``rbg.h`` / ``rbg.c``) and
:class:`GenericModel`, the generic baseline callable on NumPy arrays.

The library is compiled once (cffi API mode) with ``-O3 -march=native`` by default and
cached under ``$RBDGEN_CACHE/generic`` (default ``~/.cache/rbdgen/generic``), keyed by a
hash of the C sources, the cdef, the flags and the Python/cffi versions::

    from gen.generic import GenericModel
    g = GenericModel(gen.load_robot("humanoid30"))
    ddq = g.aba(q, v, tau)              # same shapes as gen.run(model, "aba", q, v, tau)
    tau = g.call("rnea", q, v, a)       # dispatch by registry name

A C harness instead includes ``rbg.h``, compiles :data:`SOURCES` and embeds the model
with :func:`gen.generic.serialize.model_to_c`.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import RbdgenError
from ..model import Model
from .serialize import ALGO_IDS, ARRAY_FIELDS, serialize

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE
HEADER = HERE / "rbg.h"
SOURCES = [HERE / "rbg.c"]
DEFAULT_CFLAGS = ("-O3", "-march=native")

STATUS = {0: "ok", 1: "an input contains NaN or inf", 2: "singular inertia (non-positive pivot) at q",
          3: "unknown algorithm", 4: "inconsistent rbg_model"}

CDEF = """
typedef struct rbg_model {
    int nbodies;
    int nq;
    int nv;
    const int *parent;
    const int *jtype;
    const int *axis_k;
    const int *idx_q;
    const int *idx_v;
    const int *nvj;
    const int *dof_parent;
    const double *axis;
    const double *plc_R;
    const double *plc_p;
    const double *inertia;
    double gravity[3];
} rbg_model;
typedef enum rbg_algo {
    RBG_ALGO_RNEA = 0, RBG_ALGO_NLE = 1, RBG_ALGO_CRBA = 2, RBG_ALGO_LTDL = 3,
    RBG_ALGO_LTL = 4, RBG_ALGO_CRBA_SOLVE = 5, RBG_ALGO_ABA = 6
} rbg_algo;
size_t rbg_work_size(const rbg_model *m, rbg_algo algo);
int rbg_check_model(const rbg_model *m);
void rbg_inertia_params(double mass, const double *com, const double *I_c, double *out);
int rbg_rnea(const rbg_model *m, const double *q, const double *v, const double *a, double *tau, double *work);
int rbg_nle(const rbg_model *m, const double *q, const double *v, double *b, double *work);
int rbg_crba(const rbg_model *m, const double *q, double *M, double *work);
int rbg_ltdl(const rbg_model *m, const double *q, double *L, double *D, double *work);
int rbg_ltl(const rbg_model *m, const double *q, double *L, double *work);
int rbg_crba_solve(const rbg_model *m, const double *q, const double *b, double *x, double *work);
int rbg_aba(const rbg_model *m, const double *q, const double *v, const double *tau, double *ddq, double *work);
"""

_LOADED: dict[tuple, object] = {}


def cache_dir() -> Path:
    root = os.environ.get("RBDGEN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "rbdgen")
    return Path(root) / "generic"


def _key(cflags: tuple[str, ...]) -> str:
    import cffi

    h = hashlib.sha256()
    for part in (HEADER.read_bytes(), *(s.read_bytes() for s in SOURCES), CDEF.encode(),
                 " ".join(cflags).encode(), cffi.__version__.encode(), sys.version.encode(),
                 platform.machine().encode()):
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def load_library(cflags=None):
    """The compiled cffi module (``.ffi``, ``.lib``) for these flags, built on first use
    and cached on disk and in-process."""
    cflags = tuple(DEFAULT_CFLAGS if cflags is None else cflags)
    if cflags in _LOADED:
        return _LOADED[cflags]
    modname = f"_rbg_{_key(cflags)}"
    out_dir = cache_dir()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = out_dir / (modname + suffix)
    if not target.exists():
        _compile(modname, cflags, out_dir, target)
    spec = importlib.util.spec_from_file_location(modname, target)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _LOADED[cflags] = mod
    return mod


def _compile(modname: str, cflags: tuple[str, ...], out_dir: Path, target: Path) -> None:
    import cffi

    out_dir.mkdir(parents=True, exist_ok=True)
    ffib = cffi.FFI()
    ffib.cdef(CDEF)
    ffib.set_source(modname, '#include "rbg.h"', sources=[str(s) for s in SOURCES],
                    include_dirs=[str(INCLUDE_DIR)], extra_compile_args=list(cflags))
    tmp = tempfile.mkdtemp(prefix=modname + ".", dir=out_dir)
    try:
        try:
            built = ffib.compile(tmpdir=tmp, verbose=False)
        except Exception as e:  # distutils/setuptools CompileError and friends
            raise RbdgenError(f"building the generic C library failed (flags {' '.join(cflags)}): {e}") from e
        os.replace(built, target)       # atomic: concurrent builders race harmlessly
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class GenericModel:
    """The generic C implementation bound to one model.  Methods take and return NumPy
    arrays shaped like :func:`gen.run` (vectors 1-D, matrices 2-D).  An instance reuses
    one workspace, so it is not thread-safe; use one instance per thread."""

    ALGORITHMS = tuple(ALGO_IDS)

    def __init__(self, model: Model, *, cflags=None):
        self.model = model
        self.arrays = serialize(model)
        self._mod = load_library(cflags)
        self.ffi, self.lib = self._mod.ffi, self._mod.lib
        ffi, a = self.ffi, self.arrays
        self._keep = []
        init = {"nbodies": a.nbodies, "nq": a.nq, "nv": a.nv, "gravity": list(map(float, a.gravity))}
        for field in ARRAY_FIELDS:
            arr = getattr(a, field)
            ctype = "int[]" if arr.dtype == np.intc else "double[]"
            buf = ffi.from_buffer(ctype, arr) if arr.size else ffi.NULL
            self._keep.append(buf)
            init[field] = buf
        self.c_model = ffi.new("rbg_model *", init)
        rc = self.lib.rbg_check_model(self.c_model)
        if rc:
            raise RbdgenError(f"{model.name}: generic C rejects the model ({STATUS.get(rc, rc)})")
        self.work_sizes = {name: int(self.lib.rbg_work_size(self.c_model, i)) for name, i in ALGO_IDS.items()}
        self._work = np.zeros(max(self.work_sizes.values(), default=0) + 1)
        self.nq, self.nv = a.nq, a.nv

    # --- plumbing ------------------------------------------------------------------------
    def work_size(self, algorithm: str) -> int:
        """Doubles of workspace ``algorithm`` needs (``rbg_work_size``)."""
        try:
            return self.work_sizes[algorithm]
        except KeyError:
            raise RbdgenError(f"generic C has no algorithm '{algorithm}' "
                              f"(choose from {', '.join(self.ALGORITHMS)})") from None

    def _in(self, algo: str, name: str, x, n: int):
        a = np.ascontiguousarray(x, dtype=np.float64)
        if a.size != n or a.ndim > 2 or (a.ndim == 2 and 1 not in a.shape):
            raise RbdgenError(f"{algo} on {self.model.name}: input '{name}' must have {n} entries, got shape {a.shape}")
        return self.ffi.from_buffer("double[]", a.reshape(n))

    def _out(self, *shape):
        a = np.empty(shape)
        return a, self.ffi.from_buffer("double[]", a)

    def _check(self, algo: str, rc: int) -> None:
        if rc:
            raise RbdgenError(f"generic {algo} on {self.model.name} returned {rc}: {STATUS.get(rc, 'error')}")

    @property
    def _w(self):
        return self.ffi.from_buffer("double[]", self._work)

    # --- algorithms ------------------------------------------------------------------------
    def rnea(self, q, v, a) -> np.ndarray:
        """``tau = M(q) a + b(q, v)``."""
        tau, t = self._out(self.nv)
        self._check("rnea", self.lib.rbg_rnea(self.c_model, self._in("rnea", "q", q, self.nq),
                                              self._in("rnea", "v", v, self.nv),
                                              self._in("rnea", "a", a, self.nv), t, self._w))
        return tau

    def nle(self, q, v) -> np.ndarray:
        """``b(q, v)``: Coriolis, centrifugal and gravity terms."""
        b, bp = self._out(self.nv)
        self._check("nle", self.lib.rbg_nle(self.c_model, self._in("nle", "q", q, self.nq),
                                            self._in("nle", "v", v, self.nv), bp, self._w))
        return b

    def crba(self, q) -> np.ndarray:
        """Full symmetric ``M(q)``."""
        M, Mp = self._out(self.nv, self.nv)
        self._check("crba", self.lib.rbg_crba(self.c_model, self._in("crba", "q", q, self.nq), Mp, self._w))
        return M

    def ltdl(self, q) -> tuple[np.ndarray, np.ndarray]:
        """``M(q) = L^T D L``: (L unit lower triangular, D 1-D)."""
        L, Lp = self._out(self.nv, self.nv)
        D, Dp = self._out(self.nv)
        self._check("ltdl", self.lib.rbg_ltdl(self.c_model, self._in("ltdl", "q", q, self.nq), Lp, Dp, self._w))
        return L, D

    def ltl(self, q) -> np.ndarray:
        """``M(q) = L^T L``: L lower triangular."""
        L, Lp = self._out(self.nv, self.nv)
        self._check("ltl", self.lib.rbg_ltl(self.c_model, self._in("ltl", "q", q, self.nq), Lp, self._w))
        return L

    def crba_solve(self, q, b) -> np.ndarray:
        """``x = M(q)^-1 b``."""
        x, xp = self._out(self.nv)
        self._check("crba_solve", self.lib.rbg_crba_solve(
            self.c_model, self._in("crba_solve", "q", q, self.nq), self._in("crba_solve", "b", b, self.nv),
            xp, self._w))
        return x

    def aba(self, q, v, tau) -> np.ndarray:
        """``ddq = M(q)^-1 (tau - b(q, v))``."""
        ddq, dp = self._out(self.nv)
        self._check("aba", self.lib.rbg_aba(self.c_model, self._in("aba", "q", q, self.nq),
                                            self._in("aba", "v", v, self.nv),
                                            self._in("aba", "tau", tau, self.nv), dp, self._w))
        return ddq

    def call(self, algorithm: str, *inputs):
        """Run ``algorithm`` (a registry name, see :data:`gen.algorithms.ALGORITHMS`) on
        ``inputs``; outputs as :func:`gen.run` returns them."""
        if algorithm not in self.ALGORITHMS:
            raise RbdgenError(f"generic C has no algorithm '{algorithm}' "
                              f"(choose from {', '.join(self.ALGORITHMS)})")
        return getattr(self, algorithm)(*inputs)

    def __repr__(self) -> str:
        return f"GenericModel({self.model.name!r}, nq={self.nq}, nv={self.nv})"


def sources() -> dict:
    """Paths a C build needs: ``{"header", "sources", "include_dir"}``."""
    return {"header": str(HEADER), "sources": [str(s) for s in SOURCES], "include_dir": str(INCLUDE_DIR)}
