"""cffi binding of the generic C library (``rbg.h`` / ``rbg.c``) and
:class:`GenericModel`, the generic baseline callable on NumPy arrays.

The library is compiled once (cffi API mode) with ``-O3 -march=native`` by default by
the one compile-and-cache routine :func:`gen.build.compile_cached`, in ``$RBDGEN_CACHE``
(default ``~/.cache/rbdgen``) as ``_rbg_<hash>`` of the C sources, the cdef, the flags
and the Python/cffi ABI::

    from gen.generic import GenericModel
    g = GenericModel(gen.load_robot("humanoid30"))
    ddq = g.aba(q, v, tau)              # same shapes as gen.run(model, "aba", q, v, tau)
    tau = g.call("rnea", q, v, a)       # dispatch by registry name

    g = GenericModel(gen.load_robot("solo12"), constraints="3D:FL_FOOT,3D:HR_FOOT")
    ddq, lam, iterations, residual = g.prox_ltl(q, v, tau, iterations=3, mu=1e-6)
    # = gen.run(model, "prox_ltl", q, v, tau, constraints=..., iterations=3, mu=1e-6)
    Lam = g.caba_osim(q, mu=1e-4)       # = gen.run(model, "caba_osim", q, constraints=..., mu=1e-4)
    v_plus, impulse, iterations, residual = g.impulse(q, v_minus, restitution=0.5, mu=1e-4)

    g = GenericModel(model, constraints="3D+:FL_FOOT,3D+:HR_FOOT")     # unilateral normals
    ddq, lam, iterations, residual = g.prox_lcp(q, v, tau, tol=1e-10, max_iter=100)

A C harness instead includes ``rbg.h``, compiles :data:`SOURCES` and embeds the model
with :func:`gen.generic.serialize.model_to_c` (and a constraint set with
:func:`~gen.generic.serialize.constraints_to_c`).

The cffi declarations are ``rbg.h`` itself: its ``#include`` lines dropped and the rest
run through the C preprocessor (:func:`cdef`), so the binding cannot drift from the
header.
"""
from __future__ import annotations

import functools

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np

from ..algorithms import ALGORITHMS
from ..algorithms.delassus import delassus_set
from ..algorithms.proximal import DEFAULT_ITERATIONS, DEFAULT_MU
from ..build import compile_cached
from ..constraint_spec import as_constraint_set
from ..errors import RbdgenError
from ..model import Model
from .serialize import (
    ALGO_IDS,
    ARRAY_FIELDS,
    CONSTRAINED_ALGO_IDS,
    CONSTRAINT_ARRAY_FIELDS,
    DELASSUS_ALGO_IDS,
    EVENT_ALGO_IDS,
    serialize,
    serialize_constraints,
)

HERE = Path(__file__).resolve().parent
INCLUDE_DIR = HERE
HEADER = HERE / "rbg.h"
HEADERS = [HEADER, HERE / "rbg_internal.h"]
SOURCES = [HERE / "rbg.c", HERE / "rbg_constrained.c", HERE / "rbg_delassus.c", HERE / "rbg_events.c"]
DEFAULT_CFLAGS = ("-O3", "-march=native")

STATUS = {0: "ok", 1: "an input contains NaN or inf (or an option is out of range)",
          2: "singular matrix (a pivot of the wrong sign) at q", 3: "unknown algorithm",
          4: "inconsistent rbg_model or rbg_constraints",
          5: "a loop closure between two moving bodies (this solver handles constraints relative to the world)",
          6: "a unilateral (+) row given to a solver of bilateral constraints (use prox_lcp)"}
#: rbg.h's RBG_EUNILATERAL
RBG_EUNILATERAL = 6
#: gen.run's options of the proximal rows, passed as rbg_prox_options
PROX_OPTIONS = ("iterations", "mu", "tol", "max_iter")


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RbdgenError("the generic C library needs a C compiler (cc or gcc, or set CC)")
    return shlex.split(cc)


def cdef() -> str:
    """The declarations of ``rbg.h`` for ``cffi.FFI.cdef``: the header without its
    ``#include`` lines, through ``cc -E -P`` (C branch of the ``__cplusplus`` guards,
    ``RBG_RESTRICT`` -> ``restrict``, function-like ``RBG_WORK_*`` macros dropped)."""
    text = "".join(line for line in HEADER.read_text().splitlines(keepends=True)
                   if not line.lstrip().startswith("#include"))
    res = subprocess.run([*_compiler(), "-E", "-P", "-x", "c", "-"], input=text, capture_output=True, text=True)
    if res.returncode != 0:
        raise RbdgenError(f"preprocessing rbg.h for cffi failed: {res.stderr.strip()[-500:]}")
    return res.stdout


_LOADED: dict[tuple, object] = {}


def load_library(cflags=None):
    """The compiled cffi module (``.ffi``, ``.lib``) for these flags: compiled once by
    :func:`gen.build.compile_cached` (cached on disk by content), then kept in-process."""
    cflags = tuple(DEFAULT_CFLAGS if cflags is None else cflags)
    if cflags not in _LOADED:
        files = {s.name: s.read_bytes() for s in (*HEADERS, *SOURCES)}
        _LOADED[cflags] = compile_cached("_rbg", files, cdef(), HEADER.name, [s.name for s in SOURCES], cflags,
                                         what=f"building the generic C library (flags {' '.join(cflags)})")
    return _LOADED[cflags]


def _checked_mu(mu) -> float:
    """The damping the generic C is given: ``mu`` (default :data:`DEFAULT_MU`), positive and finite."""
    mu = DEFAULT_MU if mu is None else float(mu)
    if not (mu > 0 and np.isfinite(mu)):
        raise RbdgenError(f"proximal parameter mu={mu} must be positive and finite (Pinocchio's damping, "
                          f"e.g. 1e-6; Sathya's penalty is 1/mu)")
    return mu


class GenericModel:
    """The generic C implementation bound to one model and one constraint set
    (``constraints``: a spec string, a :class:`~gen.constraints.ConstraintSet` or None
    for none; the proximal solvers then reduce to ABA).  Methods take and return NumPy
    arrays shaped like :func:`gen.run` (vectors 1-D, matrices 2-D); the proximal solvers
    take gen.run's options ``iterations``, ``mu``, ``tol``, ``max_iter`` (the impact map
    also ``restitution``), the damped Delassus inverses its ``mu``.  An instance
    reuses one workspace, so it is not thread-safe; use one instance per thread."""

    ALGORITHMS = tuple(n for n, a in ALGORITHMS.items() if a.generic is not None)

    def __init__(self, model: Model, constraints=None, *, cflags=None):
        self.model = model
        self.arrays = serialize(model)
        self.cset = as_constraint_set(model, constraints)
        self.constraint_arrays = serialize_constraints(model, self.cset)
        self._mod = load_library(cflags)
        self.ffi, self.lib = self._mod.ffi, self._mod.lib
        ffi, a = self.ffi, self.arrays
        self._keep = []
        init = {"nbodies": a.nbodies, "nq": a.nq, "nv": a.nv, "gravity": list(map(float, a.gravity))}
        init.update({f: self._buffer(getattr(a, f)) for f in ARRAY_FIELDS})
        self.c_model = ffi.new("rbg_model *", init)
        rc = self.lib.rbg_check_model(self.c_model)
        if rc:
            raise RbdgenError(f"{model.name}: generic C rejects the model ({STATUS.get(rc, rc)})")
        ca = self.constraint_arrays
        cinit = {"nc": ca.nc}
        cinit.update({f: self._buffer(getattr(ca, f)) for f in CONSTRAINT_ARRAY_FIELDS})
        self.c_constraints = ffi.new("rbg_constraints *", cinit)
        self.iwork = np.zeros(int(self.lib.rbg_constraints_iwork_size(self.c_model, self.c_constraints)),
                              dtype=np.intc)
        rc = self.lib.rbg_constraints_init(self.c_model, self.c_constraints, self._buffer(self.iwork))
        if rc:
            raise RbdgenError(f"{model.name}: generic C rejects the constraints '{self.cset}' "
                              f"({STATUS.get(rc, rc)})")
        self.work_sizes = {name: int(self.lib.rbg_work_size(self.c_model, i)) for name, i in ALGO_IDS.items()}
        self.work_sizes.update({name: int(self.lib.rbg_constrained_work_size(self.c_model, self.c_constraints, i))
                                for name, i in {**CONSTRAINED_ALGO_IDS, **DELASSUS_ALGO_IDS,
                                                **EVENT_ALGO_IDS}.items()})
        self._work = np.zeros(max(self.work_sizes.values(), default=0) + 1)
        self.nq, self.nv, self.m = a.nq, a.nv, ca.m

    def _buffer(self, arr: np.ndarray):
        """A C pointer to ``arr`` (NULL when empty), kept alive with the instance."""
        if not arr.size:
            return self.ffi.NULL
        buf = self.ffi.from_buffer("int[]" if arr.dtype == np.intc else "double[]", arr)
        self._keep.append(buf)
        return buf

    # --- plumbing ------------------------------------------------------------------------
    def work_size(self, algorithm: str) -> int:
        """Doubles of workspace ``algorithm`` needs (``rbg_work_size``, for the proximal
        solvers ``rbg_constrained_work_size`` with this constraint set)."""
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

    # --- algorithms: one table-driven call ---------------------------------------------------
    def call(self, algorithm: str, *inputs, **options):
        """Run ``algorithm`` (a registry name with generic C, :data:`ALGORITHMS`) on
        ``inputs``; outputs as :func:`gen.run` returns them (vectors 1-D, matrices 2-D), a
        solver's ``iterations`` and ``residual`` as 1-element arrays.  The C function is
        the row's ``generic.entry``, called with the convention of its family
        (``rbg.h``): ``(model, [constraints,] [options,] [scalar,] inputs..., outputs...,
        work)``, options for the proximal rows (:meth:`prox_options`: ``iterations``,
        ``mu``, ``tol``, ``max_iter``), the scalar the impact map's ``restitution`` or a
        damped Delassus inverse's ``mu``.  ``g.<algorithm>(...)`` is the same call."""
        if algorithm not in self.ALGORITHMS:
            raise RbdgenError(f"generic C has no algorithm '{algorithm}' "
                              f"(choose from {', '.join(self.ALGORITHMS)})")
        row = ALGORITHMS[algorithm]
        cset = self.cset if row.constrained else None
        self._refuse(row)
        spec = row.inputs(self.model, cset)
        if len(inputs) != len(spec):
            raise RbdgenError(f"{algorithm} takes {len(spec)} inputs ({', '.join(n for n, _ in spec)}), "
                              f"got {len(inputs)}")
        head = [self.c_model] + ([self.c_constraints] if row.constrained else [])
        if row.iterative:
            head.append(self.prox_options(**{k: options.pop(k) for k in PROX_OPTIONS if k in options}))
        head += self._scalar(row, options)
        if options:
            raise RbdgenError(f"generic {algorithm} takes no option {', '.join(sorted(options))}")
        ins = [self._in(algorithm, name, x, n) for (name, n), x in zip(spec, inputs)]
        outs = [np.empty(rows if cols == 1 else (rows, cols)) for _, rows, cols in row.outputs(self.model, cset)]
        ptrs = [self.ffi.from_buffer("double[]", o) if o.size else self.ffi.NULL for o in outs]
        rc = getattr(self.lib, row.generic.entry)(*head, *ins, *ptrs, self._w)
        if rc == RBG_EUNILATERAL:
            one_sided = ", ".join(str(c) for c in self.cset.constraints if c.unilateral)
            raise RbdgenError(f"{algorithm} solves bilateral constraints only; {one_sided} has a unilateral "
                              f"row (+): use prox_lcp")
        self._check(algorithm, rc)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __getattr__(self, name: str):
        """``g.rnea(q, v, a)`` etc.: :meth:`call` of the registry row ``name``."""
        if name in GenericModel.ALGORITHMS:
            return functools.partial(self.call, name)
        raise AttributeError(f"'GenericModel' object has no attribute '{name}'")

    def _refuse(self, row) -> None:
        """One-line refusals before the C call: a loop between two moving bodies where the
        row's generic C is ``anchored_only``; a constraint set the Delassus family does not
        take (:func:`~gen.algorithms.delassus.delassus_set`); what the row ``refuses``."""
        if row.generic.anchored_only:
            self.cset.require_anchored(row.name)
        if row.family == "delassus":
            delassus_set(self.model, self.cset, row.name)
        why = row.refuses(self.model, self.cset) if row.refuses else None
        if why:
            raise RbdgenError(why)

    @staticmethod
    def _scalar(row, options: dict) -> list[float]:
        """The row's scalar argument: the impact map's restitution in [0, 1], a damped
        Delassus inverse's mu (positive, finite; default :data:`DEFAULT_MU`)."""
        if row.scalar_option == "restitution":
            e = float(options.pop("restitution", 0.0))
            if not 0.0 <= e <= 1.0:
                raise RbdgenError(f"restitution coefficient {e} must lie in [0, 1] (0: plastic impact, 1: elastic)")
            return [e]
        if row.scalar_option == "mu":
            return [_checked_mu(options.pop("mu", None))]
        return []

    def prox_options(self, iterations=None, mu=None, tol=None, max_iter=None):
        """``rbg_prox_options`` for gen.run's options: ``max_iter`` (if given) replaces
        ``iterations`` as the cap; ``tol`` None means no early exit."""
        cap = (DEFAULT_ITERATIONS if iterations is None else iterations) if max_iter is None else max_iter
        if int(cap) != cap or cap < 1:
            raise RbdgenError(f"the number of proximal iterations must be a positive integer, got {cap}")
        if tol is not None and not tol >= 0:
            raise RbdgenError(f"tolerance tol={tol} must be non-negative")
        return self.ffi.new("rbg_prox_options *", {"mu": _checked_mu(mu), "max_iter": int(cap),
                                                    "tol": -1.0 if tol is None else float(tol)})

    def __repr__(self) -> str:
        extra = f", constraints={self.cset.spec!r}" if self.m else ""
        return f"GenericModel({self.model.name!r}{extra}, nq={self.nq}, nv={self.nv})"


def sources() -> dict:
    """Paths a C build needs: ``{"header", "sources", "include_dir"}``."""
    return {"header": str(HEADER), "sources": [str(s) for s in SOURCES], "include_dir": str(INCLUDE_DIR)}
