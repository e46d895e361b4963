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

    def rnea_derivatives(self, q, v, a) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(dtau/dq, dtau/dv, M, tau)`` at ``(q, v, a)``, dtau/dq in the tangent space
        (Carpentier & Mansard RSS 2018 Alg. 1), tau = rnea(q, v, a) (1-D)."""
        return self._derivatives("rnea_derivatives", q, v, a, "a")

    def aba_derivatives(self, q, v, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(dddq/dq, dddq/dv, M^-1, ddq)`` at ``(q, v, tau)``: ``-M^-1 dtau/d(q, v)`` at
        ``a = ddq = aba(q, v, tau)`` (RSS 2018 §IV), ddq 1-D."""
        return self._derivatives("aba_derivatives", q, v, tau, "tau")

    def _derivatives(self, algo: str, q, v, x, xname: str):
        outs = [self._out(self.nv, self.nv) for _ in range(3)] + [self._out(self.nv)]
        fn = getattr(self.lib, ALGORITHMS[algo].generic.entry)
        self._check(algo, fn(self.c_model, self._in(algo, "q", q, self.nq), self._in(algo, "v", v, self.nv),
                             self._in(algo, xname, x, self.nv), *(p for _, p in outs), self._w))
        return tuple(o for o, _ in outs)

    # --- proximal constrained solvers -----------------------------------------------------
    def prox_ltl(self, q, v, tau, **options):
        """(ddq, lam, iterations, residual) by the sparse KKT factorisation (Carpentier
        2021 Alg. 1)."""
        return self._proximal("prox_ltl", q, v, tau, **options)

    def prox_ltls(self, q, v, tau, **options):
        """(ddq, lam, iterations, residual) by the augmented Lagrangian on M + J^T J / rho
        (Sathya 2024 eq. 16, 24)."""
        return self._proximal("prox_ltls", q, v, tau, **options)

    def constrained_aba(self, q, v, tau, **options):
        """(ddq, lam, iterations, residual) by constrainedABA (Sathya 2024 Alg. 1-3)."""
        return self._proximal("constrained_aba", q, v, tau, **options)

    def prox_pv(self, q, v, tau, **options):
        """(ddq, lam, iterations, residual) by proxPV (Sathya 2024 Alg. 4)."""
        return self._proximal("prox_pv", q, v, tau, **options)

    def prox_options(self, iterations=None, mu=None, tol=None, max_iter=None):
        """``rbg_prox_options`` for gen.run's options: ``max_iter`` (if given) replaces
        ``iterations`` as the cap; ``tol`` None means no early exit."""

        cap = (DEFAULT_ITERATIONS if iterations is None else iterations) if max_iter is None else max_iter
        if int(cap) != cap or cap < 1:
            raise RbdgenError(f"the number of proximal iterations must be a positive integer, got {cap}")
        if tol is not None and not tol >= 0:
            raise RbdgenError(f"tolerance tol={tol} must be non-negative")
        mu = DEFAULT_MU if mu is None else float(mu)
        if not (mu > 0 and np.isfinite(mu)):
            raise RbdgenError(f"proximal parameter mu={mu} must be positive and finite (Pinocchio's damping, "
                              f"e.g. 1e-6; Sathya's penalty is 1/mu)")
        return self.ffi.new("rbg_prox_options *", {"mu": mu, "max_iter": int(cap),
                                                    "tol": -1.0 if tol is None else float(tol)})

    def prox_lcp(self, q, v, tau, **options):
        """(ddq, lam, iterations, residual) with the unilateral rows (``3D+``, ``6D+``) held
        by projected Gauss-Seidel on the sparse KKT factorisation (Tedrake 2012 §3.1)."""
        return self._proximal("prox_lcp", q, v, tau, **options)

    def impulse(self, q, v_minus, restitution=0.0, **options):
        """(v_plus, impulse, iterations, residual): the impact map ``M (v+ - v-) = J^T
        impulse``, ``J v+ = -e J v-`` (Tedrake 2012 §3.2) by constrainedABA's sweeps;
        constraints relative to the world only."""
        if not 0.0 <= restitution <= 1.0:
            raise RbdgenError(f"restitution coefficient {restitution} must lie in [0, 1] "
                              f"(0: plastic impact, 1: elastic)")
        self._anchored("impulse")
        self._bilateral("impulse")
        opts = self.prox_options(**options)
        v_plus, vp = self._out(self.nv)
        imp, lp = self._out(self.m)
        its, ip = self._out(1)
        res, rp = self._out(1)
        self._check("impulse", self.lib.rbg_impulse(
            self.c_model, self.c_constraints, opts, float(restitution), self._in("impulse", "q", q, self.nq),
            self._in("impulse", "v_minus", v_minus, self.nv), vp, lp if self.m else self.ffi.NULL, ip, rp, self._w))
        return v_plus, imp, its, res

    def _bilateral(self, algo: str) -> None:
        one_sided = [str(c) for c in self.cset.constraints if c.unilateral]
        if one_sided:
            raise RbdgenError(f"{algo} solves bilateral constraints only; {', '.join(one_sided)} "
                              f"has a unilateral row (+): use prox_lcp")

    def _proximal(self, algo: str, q, v, tau, **options):
        self._anchored(algo)
        if algo != "prox_lcp":
            self._bilateral(algo)
        opts = self.prox_options(**options)
        ddq, dp = self._out(self.nv)
        lam, lp = self._out(self.m)
        its, ip = self._out(1)
        res, rp = self._out(1)
        fn = getattr(self.lib, f"rbg_{algo}")
        self._check(algo, fn(self.c_model, self.c_constraints, opts, self._in(algo, "q", q, self.nq),
                             self._in(algo, "v", v, self.nv), self._in(algo, "tau", tau, self.nv),
                             dp, lp if self.m else self.ffi.NULL, ip, rp, self._w))
        return ddq, lam, its, res

    # --- Delassus matrix and damped Delassus inverses --------------------------------------
    def delassus(self, q) -> np.ndarray:
        """``J M^-1 J^T`` (m x m) by CRBA, LTDL and sparse back-substitution (Featherstone
        2005 §5)."""
        return self._delassus("delassus", q)

    def ltl_osim(self, q, mu=None) -> np.ndarray:
        """``Lambda_mu = (J M^-1 J^T + R)^-1`` by LTL-OSIM (Sathya 2024 §VIII-C)."""
        return self._delassus("ltl_osim", q, mu)

    def caba_osim(self, q, mu=None) -> np.ndarray:
        """``Lambda_mu`` by cABA-OSIM (Sathya 2024 Alg. 5, eq. 40); constraints relative
        to the world only."""
        return self._delassus("caba_osim", q, mu)

    def caba_osimf(self, q, mu=None) -> np.ndarray:
        """``Lambda_mu`` split at the floating base (Sathya 2024 eq. 41): the generic
        cABA-OSIM, which carries every supporting body in constraint space."""
        return self._delassus("caba_osimf", q, mu)

    def kkt_osim(self, q, mu=None) -> np.ndarray:
        """``Lambda_mu`` from the sparse LDL^T of the KKT matrix (Carpentier 2021 §IV-E)."""
        return self._delassus("kkt_osim", q, mu)

    def _delassus(self, algo: str, q, mu=None) -> np.ndarray:
        delassus_set(self.model, self.cset, algo)
        self._anchored(algo)
        if algo == "caba_osimf":
            for b in self.model.bodies:
                if b.parent == -1 and b.kind != "free":
                    raise RbdgenError(f"caba_osimf splits the Delassus matrix at a floating base (Sathya 2024 "
                                      f"eq. 41), but joint '{b.name}' at the root of the constrained tree is "
                                      f"'{b.kind}'; use caba_osim")
        out, op = self._out(self.m, self.m)
        qp = self._in(algo, "q", q, self.nq)
        fn = getattr(self.lib, ALGORITHMS[algo].generic.entry)
        if algo == "delassus":
            self._check(algo, fn(self.c_model, self.c_constraints, qp, op, self._w))
            return out
        mu = DEFAULT_MU if mu is None else float(mu)
        if not (mu > 0 and np.isfinite(mu)):
            raise RbdgenError(f"proximal parameter mu={mu} must be positive and finite (Pinocchio's damping, "
                              f"e.g. 1e-6; Sathya's penalty is 1/mu)")
        self._check(algo, fn(self.c_model, self.c_constraints, mu, qp, op, self._w))
        return out

    def call(self, algorithm: str, *inputs, **options):
        """Run ``algorithm`` (a registry name, see :data:`gen.algorithms.ALGORITHMS`) on
        ``inputs`` (and, for the proximal solvers, gen.run's options); outputs as
        :func:`gen.run` returns them."""
        if algorithm not in self.ALGORITHMS:
            raise RbdgenError(f"generic C has no algorithm '{algorithm}' "
                              f"(choose from {', '.join(self.ALGORITHMS)})")
        return getattr(self, algorithm)(*inputs, **options)

    def _anchored(self, algo: str) -> None:
        """One-line refusal of a loop between two moving bodies where the row's generic C
        is ``anchored_only``."""
        if ALGORITHMS[algo].generic.anchored_only:
            self.cset.require_anchored(algo)

    def __repr__(self) -> str:
        extra = f", constraints={self.cset.spec!r}" if self.m else ""
        return f"GenericModel({self.model.name!r}{extra}, nq={self.nq}, nv={self.nv})"


def sources() -> dict:
    """Paths a C build needs: ``{"header", "sources", "include_dir"}``."""
    return {"header": str(HEADER), "sources": [str(s) for s in SOURCES], "include_dir": str(INCLUDE_DIR)}
