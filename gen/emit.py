"""Emission: a traced kernel becomes a self-contained C build folder (docs/DESIGN.md §3.6-3.9, §4).

``emit(robot, algorithm, out_dir=...)`` (or :func:`emit_trace` on a
:class:`gen.trace.Trace`) writes, for a kernel prefix ``P`` such as ``rbd_talos_aba``:

==================  =====================================================================
``P.h``             the documented public API: conventions, sizes as macros, return
                    codes, op counts in a comment (from :func:`opcount.count_trace`)
``P.c``             the wrapper(s): ``int P(const double *in0, ..., double *out0, ...,
                    double *work)`` -- input checks, workspace mapping, output checks
                    (and, for a tolerance, the early-exit driver loop)
``P_kernel.c``      the math: the traced SX graph(s)' instruction tape written as C by
                    :mod:`gen.cwriter` (long tapes split into ``static`` parts)
``P.cdef``          the cffi ``cdef`` text (what :mod:`gen.build` compiles against)
``manifest.json``   robot, algorithm, constraints, sizes, functions, work sizes, op counts
``Makefile``        ``make`` -> ``libP.a`` (C99, no other dependency than libm);
                    ``make install PREFIX=DIR``: header, library, ``P.pc``
``CMakeLists.txt``  the same as a CMake target ``rbdgen::P``; ``cmake --install``: header,
                    library, the package ``PConfig.cmake`` (+ ``ConfigVersion``), ``P.pc``
``P.pc.in``         the pkg-config file both installs fill in (relocatable)
``P_casadi.c``      the same function through CasADi's external-function C API (value
                    only; scalar kernels; see "CasADi's external-function API" below)
==================  =====================================================================

Every text file except the math is rendered by jinja2 (``gen/templates/``,
StrictUndefined, layout only) from ONE context dict (:func:`context`), so the header, the
wrapper, the cdef, the manifest and the build files cannot disagree on a signature.
Output is deterministic: no timestamps, no absolute paths; emitting twice gives identical
bytes (the CasADi and rbdgen versions are recorded, so upgrading either may change them).

Symbols: every exported symbol of a folder starts with ``P``: the public functions
(``P``, ``P_opts`` for a driver, ``P_status`` for a batched kernel, ``P_casadi`` and its
CasADi API functions :data:`CASADI_API`) and the math's entry
points (``P_kernel``, or ``P_setup``, ``P_step``, ``P_finish`` for a driver; ``void
f(const double **arg, double **res)``, plus ``double *w`` with ``avoid_stack``);
everything else is ``static`` (a product kernel's head, the parts of a split function,
the sin/cos routines, the loops) or a macro (vector loads, stores, tests).  So kernels of
different robots and algorithms link together into one program, and no helper of a code
generator is exported (issue 12 §6: CasADi's ``CodeGenerator`` added ~17 global
functions per kernel, ``_checkout``, ``_n_in``, ``_sparsity_in``, ``_work``...).  Options
that change the ABI change the symbol: the variant hash (:func:`symbol_prefix`) covers
the traced options, the gains and ``avoid_stack`` (another work size), so a default and
an ``avoid_stack`` build of one kernel link together (issue 32 §7).

Compilers and flags (issue 32 §6, §7): the C compiles without a warning under ``-Wall
-Wextra -pedantic`` with gcc and clang, with or without ``-march``: no function takes or
returns a GCC vector (loads, stores and tests are macros, sin/cos take pointers), since a
vector of 4 doubles crossing a function boundary draws ``-Wpsabi`` ("AVX vector return
without AVX enabled changes the ABI") at the folder's own flags.  Under ``-ffast-math``
the results are the plain build's up to rounding: every test of inf and NaN (inputs,
outputs, run-time parameters, ``tol``, a batch's lanes) reads the bits, which
``-ffinite-math-only`` cannot fold away as it folds ``isfinite`` and ``!(x >= 0)``, and
the vectorised sin/cos rounds 2x/pi by an integer conversion, where
``-fassociative-math`` folds ``(t + 1.5*2^52) - 1.5*2^52`` to ``t``.

Stack: the header states ``P_STACK_DOUBLES`` (the locals as written) and two bounds of
what a call takes, ``P_STACK_BYTES`` for optimised builds and ``P_STACK_BYTES_O0`` at
-O0 (:func:`gen.cwriter.stack_bytes`, tested against ``-fstack-usage`` and a painted
thread stack in tests/test_stack.py).

Early-exit driver
-----------------
With a tolerance (``tol=T``, ``max_iter=K``; CLI ``--tol T --max-iter K``) a proximal
solver is traced by :func:`gen.trace.trace_driver` as ``setup`` (inputs -> ``const``,
loop state), ``step`` (``const``, state -> next state, residual) and ``finish``
(``const``, state -> ``ddq``, ``lam``).  The public function keeps the fixed-K ABI
(``q, v, tau -> ddq, lam, iterations, residual``) and loops in C::

    setup(q, v, tau -> const, s)
    for k = 1, 2, ...:  step(const, s -> s', test)
                        if test <= T or k == K:
                            finish(const, s -> ddq, lam, r)      (iterate k, true residual)
                            stop if r <= T or k == K or r >= the last finished r
                        s <-> s'
    iterations = k

``finish`` returns the true constraint residual ``|J ddq - a_c*|_inf`` of the returned
``ddq`` (the reported ``residual``); the step's test value may be another expression of
it (proxLTL and proxPV test the dual difference ``rho (lam_{k-1} - lam_k)``, equal in
exact arithmetic), which can pass while the true residual is still above ``T`` (issue
32 §7: solo12 proxLTL at ``T`` = 1e-13).  The iteration then goes on while the true
residual falls, so the call returns the first finished iterate with ``r <= T``, else the
one where ``r`` stopped falling, else iterate K.  It returns ``RBDGEN_OK`` when that
residual is ``<= T``, else ``RBDGEN_ERR_NOT_CONVERGED`` (-4) with every output written.
(``gen.run(..., tol=T)`` stops at the first passing test.)  ``P_opts(..., work, tol,
max_iter, int *n_iter)`` is the same loop with ``tol`` and ``max_iter`` given at run time
(``P`` calls it with ``P_TOL``, ``P_MAX_ITER``; out of range: ``RBDGEN_ERR_INVALID_ARGUMENT``,
-3) and the iteration count as an int; ``mu`` stays compile-time (it is folded into the
traced factorisation) unless the kernel is built with ``runtime_params``, which makes
``mu``, the Baumgarte gains and the weights inputs of both functions
(:func:`runtime_parameters`).  The ``iterations`` output stays a double so that every
output of every kernel is a double array (manifest, cffi cdef, ``Kernel``, the generic binding, the
bench harness and the simulator read them uniformly); it is an exact integer.
``const`` and both loop states live in the caller's ``work`` (``P_WORK_SIZE`` doubles,
independent of ``max_iter``).  Op counts are per
sub-function; a call with k iterations costs ``setup + k step + finish`` and the
manifest's ``total`` is the worst case, k = K.  The manifest has ``"iterations": null``,
``"tolerance": T`` and ``"max_iter": K``.

Batched kernels
---------------
``batch=N`` (``gen.build(..., batch=N)``, ``rbdgen build --batch N``; N = 2, 4, 8, 16)
emits ``P_b<N>``: one call evaluates N states, every input and output lane-innermost
(element i of state l at ``x[i*N + l]``).  Its kernel file, like the scalar one, is the
traced function's SX instruction tape written by :func:`gen.codegen.batched.write` as one GCC
vector-extension statement per instruction over values of N doubles (``P_b<N>_kernel.c``,
``kernel_batch.c.j2``), so gcc emits AVX2 / AVX-512 arithmetic directly; sin and cos are
vectorised (:func:`gen.codegen.trig.routine`, within 2.3e-16 of glibc) or, with
``batch_trig="libm"``, glibc per lane; ``scalar_trig="vector"`` gives the scalar kernel
the same routine (:func:`gen.codegen.trig.one_lane`), so that with ``-ffp-contract=off`` on both
every lane is bit for bit the scalar kernel.  The wrapper (``wrapper_batch.c.j2``) voids only
the lanes whose inputs are not finite, and gives each lane its own code: ``P_status(...,
work, int *status)`` writes them to ``status[lane]``; ``P`` returns -1 if any lane has
-1, else -2 if any has -2 (one code for N lanes cannot say more).  Fixed iteration counts only (no early-exit
driver), locals only (no ``avoid_stack``).  Measured on talos (gen.bench.batch,
``bench/reports/2026-11-25-batched-kernels.md``): aba 4.6x (N = 4) and 8.1x (N = 8) the
scalar kernel's throughput per state.

Codegen options
---------------
Every option and tuned threshold is a field of :class:`gen.codegen.config.CodegenConfig`
(validated once; the passes of :mod:`gen.codegen` read it).  The options' costs were
measured on talos (nv = 50; CasADi 3.8.2, gcc 12.2, ``-march=native``, 2-core x86-64 VM
shared with other jobs).  All variants linked into one program and interleaved: 201
rounds x 500 calls cycling 64 random states; µs per call, min / median over rounds;
compile = gcc time for the kernel file alone (noisy: the machine was loaded):

========================  ===============  ===============  ===============  =========
variant                    aba              rnea             crba             compile
                                                                              aba
========================  ===============  ===============  ===============  =========
locals, -O1                3.11 / 3.53      1.76 / 1.82      3.23 / 3.31      2.8 s
locals, -O2                2.81 / 3.02      1.64 / 1.68      2.35 / 2.41      5.0 s
locals, -O3 (default)      2.83 / 3.10      1.63 / 1.69      2.35 / 2.40      5.7 s
work array, -O2            3.52 / 4.65      1.94 / 2.01      2.97 / 3.04      12.0 s
work array, -O3            3.54 / 3.75      1.96 / 2.03      2.97 / 3.06      13.6 s
========================  ===============  ===============  ===============  =========

(For scale, docs/DESIGN.md §5 quotes Pinocchio at 10.2 / 5.2 / 3.0 µs on this machine kind;
that is a different run, the real comparison belongs to ``gen.bench``.)

(Measured with CasADi's code generator, which wrote the same statements as
:mod:`gen.cwriter` does now, one per instruction over CasADi's work slots.)

* ``avoid_stack``: the writer either declares the intermediates as local variables
  (``avoid_stack`` off) or keeps them in a ``w`` work array.  Locals are 17-26 %
  faster and compile 2x faster: gcc allocates registers instead of storing every
  intermediate to memory it must assume aliases the outputs.  The price is stack:
  ``-fstack-usage`` gives 7.7 kB for talos aba with locals, 1.2 kB with the work array
  (plus the 6.5 kB work buffer).  Default: locals; ``work_size`` is then 0 and the
  header states ``P_STACK_DOUBLES`` (the locals as written: the work slots; for a split
  kernel the deepest part's locals plus the boundary array; a product kernel's scratch
  and loop accumulators) and the bounds ``P_STACK_BYTES`` / ``P_STACK_BYTES_O0`` of the
  real use (see "Stack" above).  ``avoid_stack=True`` is kept for small-stack targets:
  ``work_size`` is then exactly ``sz_w`` and the kernel uses the caller's buffer; it has
  its own symbol (the variant hash).
* Splitting (issue 15 §3, :mod:`gen.cwriter`): a tape longer than
  ``CodegenConfig.split_above`` instructions becomes ``static`` parts of ``part_size``
  instructions, so gcc's time and memory grow linearly with the kernel; the manifest's
  ``codegen.parts`` gives the parts per function.  Measured in
  ``bench/reports/2026-11-26-compile-time.md`` (:mod:`gen.bench.compile_time`).
* Instruction order (issue 15 §2, :mod:`gen.cwriter`, "Scheduling"): the tape is
  reordered by a greedy list scheduler where that lowers the values live at once (the
  manifest's ``codegen.scheduled`` per function); measured in
  ``bench/reports/2026-11-26-emission-order.md`` (:mod:`gen.bench.emission_order`).
* ``cse``: the trace already applies ``casadi.cse``; the Function option ``cse=True`` on
  top finds nothing more (talos aba: 16360 instructions with and without).
* ``-O2`` vs ``-O3``: equal within 1 %; ``-O1`` is 5-37 % slower.  ``-O3 -march=native``
  is the default of :mod:`gen.build` (``-O2`` would compile ~10 % faster for the same
  speed), the Makefile uses ``-O3``.  The ``-g`` that cffi/distutils adds costs +70 %
  compile time (5.4 -> 9.1 s), so :mod:`gen.build` appends ``-g0``.
* Constants are hexadecimal literals inlined at their uses: exact, and the same bytes on
  every machine.
* Outputs are densified before codegen, so matrices are written in full, column-major.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import casadi as ca
import jinja2

from opcount import CLASSES, count_trace

from .algorithms import in_report
from .algorithms.proximal import DEFAULT_MU, default_mu
from .api import GAIN_NAMES, get_algorithm
from .choose import resolve
from .codegen.config import SCALAR_TRIG, CodegenConfig
from .codegen import output_check
from .codegen.functions import DRIVER_PARTS
from .codegen.pipeline import plan_kernel
from .codegen.plan import KernelPlan
from .cwriter import c_double, o0_temporaries, stack_bytes
from .errors import RbdgenError
from .model import Model
from .robots import load_robot
from .trace import DriverTrace, Trace, trace, trace_driver
from .version import __version__

STAMP = "generated by rbdgen — do not edit"
ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
GENERATED_DIR = ROOT / "generated"
#: the committed reference build folders of generated/ (the golden test): these robots
#: times the rows in the "golden" report
GOLDEN_ROBOTS = ("ur5", "solo12", "talos")
REFERENCE_SET = tuple((r, a) for r in GOLDEN_ROBOTS for a in in_report("golden"))
MAX_TAG = 48

log = logging.getLogger("rbdgen")


# --- progress ----------------------------------------------------------------------------

@contextmanager
def timed(progress: Callable[[str], None] | None, label: str, announce: bool = False):
    """Report ``label: <elapsed> s`` to ``progress`` (default: the ``rbdgen`` logger at
    INFO) when the block ends; ``announce`` also reports ``label ...`` when it starts.
    The block may add a detail with ``info["detail"] = ...``."""
    say = progress or log.info
    if announce:
        say(f"{label} ...")
    info: dict = {}
    t0 = time.perf_counter()
    yield info
    detail = f" ({info['detail']})" if info.get("detail") else ""
    say(f"{label}{detail}: {time.perf_counter() - t0:.2f} s")


# --- names -------------------------------------------------------------------------------

def sanitize(name: str) -> str:
    """A C-identifier fragment: lower case, ``:`` dropped, other non-alphanumerics
    collapsed to ``_`` (``chain:12`` -> ``chain12``, ``6D:left_sole`` -> ``6d_left_sole``)."""
    s = re.sub(r"[^a-z0-9]+", "_", str(name).lower().replace(":", "")).strip("_")
    return s or "x"


def inert_text(text):
    """Text from an input file (a robot name, frame names in a constraint spec) as it may
    appear in C comments, CMake, Makefile and pkg-config: characters outside
    ``A-Z a-z 0-9 space _ . : , ~ + - ( ) = [ ]`` become ``?``, so no comment can be closed
    (``*/``), no line broken, no variable expanded.  The manifest (JSON) keeps the
    original.  ``None`` stays ``None``."""
    return None if text is None else re.sub(r"[^A-Za-z0-9 _.:,~+\-()=\[\]]", "?", str(text))


def symbol_prefix(robot_name: str, algorithm: str, constraints: str | None = None,
                  variant: dict | None = None) -> str:
    """``rbd_<robot>_<algorithm>[_<constraints>][_v<hash>]``, e.g. ``rbd_talos_aba`` or
    ``rbd_talos_prox_ltl_6d_left_sole_link_6d_right_sole_link``; a constraint tag
    longer than ``MAX_TAG`` characters becomes ``c<10 hex digits of its hash>``.
    ``variant`` (:func:`variant`: the options and constraint gains that differ from the
    defaults) adds ``_v`` and 6 hex digits of its hash, so a fixed-K kernel and a driver,
    or two Baumgarte gains, of one robot, algorithm and set link together; default builds
    keep the short name."""
    out = f"rbd_{sanitize(robot_name)}_{sanitize(algorithm)}"
    if constraints:
        tag = sanitize(str(constraints).replace(":", "_"))
        if len(tag) > MAX_TAG:
            tag = "c" + hashlib.sha256(str(constraints).encode()).hexdigest()[:10]
        out += f"_{tag}"
    if variant:
        out += "_v" + hashlib.sha256(json.dumps(variant, sort_keys=True).encode()).hexdigest()[:6]
    return out


def variant(tr: Trace) -> dict:
    """What makes this kernel differ from the default build of its robot, algorithm and
    constraint set: options other than the row's defaults, and the constraint gains,
    weights and world anchors when any is not the default (Kp = Kd = 0, weight 1, the
    world origin)."""
    defaults = {o.name: o.default for o in tr.algorithm.options}
    out = {k: v for k, v in _jsonable(tr.options).items() if v is not None and v != defaults.get(k)}
    if tr.cset is not None:
        gains = _gains(tr.cset)
        identity = {"R": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "p": [0.0, 0.0, 0.0]}
        if any(g["Kp"] or g["Kd"] or g["weight"] != 1.0 or g.get("anchor", identity) != identity for g in gains):
            out["gains"] = gains
    return out


def constraint_info(cset) -> tuple[str | None, int]:
    """(spec string, constraint dimension m) of a constraint set or None."""
    if cset is None:
        return None, 0
    spec = cset if isinstance(cset, str) else getattr(cset, "spec", None) or str(cset)
    m = getattr(cset, "m", 0)
    return spec, int(m) if isinstance(m, int) else 0


# --- the context -------------------------------------------------------------------------

def _opcount(tr: Trace | DriverTrace) -> dict | None:
    """Op counts for the header and manifest, ``None`` when the op counter is missing.
    For a driver: the counts of setup, step and finish, and as ``total``/``classes`` the
    worst case ``setup + max_iter step + finish``."""
    if isinstance(tr, DriverTrace):
        parts = {name: _opcount(getattr(tr, name)) for name, _ in DRIVER_PARTS}
        k = tr.max_iter
        worst = {c: parts["setup"]["classes"][c] + k * parts["step"]["classes"][c] + parts["finish"]["classes"][c]
                 for c in CLASSES}
        return {"total": sum(worst.values()), "classes": worst,
                "worst_case": f"setup + {k} step + finish", **parts}
    c = count_trace(tr)
    return {"total": c["total"]["total"], "classes": {k: c["total"][k] for k in CLASSES},
            "phases": [{"name": p["name"], "total": p["total"], **{k: p[k] for k in CLASSES}}
                       for p in c["phases"]]}


def _opcount_layout(oc: dict | None, titles: list[tuple[str, str | None]]) -> dict | None:
    """The op counts as lists for the templates (zero classes left out): ``parts``, one
    per (title, key) of ``titles`` (key None: ``oc`` itself, else ``oc[key]``)."""
    if oc is None:
        return None

    def classes(d):
        return [{"name": k, "count": d[k]} for k in oc["classes"] if d[k]]

    def part(title, d):
        return {"title": title, "total": d["total"], "classes": classes(d["classes"]),
                "phases": [{"name": p["name"], "total": p["total"], "classes": classes(p)} for p in d["phases"]]}

    return {"total": oc["total"], "classes": classes(oc["classes"]),
            "parts": [part(title, oc if key is None else oc[key]) for title, key in titles]}


def _jsonable(x):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(x[k]) for k in sorted(x)}
    return repr(x)


def _traced_iterations(tr: Trace) -> int | None:
    """The fixed iteration count of an iterative kernel: its ``iterations`` output, which
    the trace makes a constant (``be.converged`` is False for SX)."""
    for name, e in tr.outputs:
        e = ca.SX(e)
        if name == "iterations" and e.numel() == 1 and e.is_constant():
            return int(float(ca.DM(e)))
    return None


def _function_context(symbol: str, tr: Trace | DriverTrace, funcs: list[ca.Function], avoid_stack: bool,
                      oc, driver: dict | None = None, written: list | None = None) -> dict:
    """The context of one public function calling the C functions ``funcs`` (one kernel,
    or setup/step/finish of a driver, whose ``const`` and loop states take the first
    ``driver["w_offset"]`` doubles of ``work``); ``written``: their
    :class:`gen.cwriter.Written` (None for a batched kernel: one frame of ``sz_w``
    vector locals)."""
    w_size = (max(f.sz_w() for f in funcs) if written is None else max(w.slots for w in written)) \
        if avoid_stack else 0
    w_offset = driver["w_offset"] if driver else 0
    stack = (0 if avoid_stack else max(int(f.sz_w()) for f in funcs)) if written is None else \
        max(w.stack_doubles for w in written)
    inputs = [{"name": n, "size": int(s.numel()), "rows": int(s.numel()), "cols": 1,
               "doc": tr.algorithm.doc(n)} for n, s in tr.inputs]
    outputs = []
    for n, rows, cols in tr.algorithm.outputs(tr.model, tr.cset):
        outputs.append({"name": n, "size": rows * cols, "rows": rows, "cols": cols,
                        "doc": tr.algorithm.doc(n)})
    titles = [(symbol, None)] if driver is None else \
        [(f"{f.name()} ({role})", key) for f, (key, role) in zip(funcs, DRIVER_PARTS)]
    return {"symbol": symbol, "SYMBOL": symbol.upper(), "kernel": funcs[0].name(),
            "kernels": [f.name() for f in funcs], "driver": driver,
            "summary": tr.algorithm.summary, "inputs": inputs, "outputs": outputs,
            "sz_arg": max(int(f.sz_arg()) for f in funcs), "sz_res": max(int(f.sz_res()) for f in funcs),
            "sz_w": int(w_size), "w_offset": int(w_offset), "work_size": int(w_offset + w_size),
            "uses_work": bool(w_offset + w_size), "stack_doubles": int(stack),
            "parts": [w.parts for w in written] if written else [1],
            "scheduled": [w.scheduled for w in written] if written else [False],
            "opcount_raw": oc, "opcount": _opcount_layout(oc, titles)}


_UNSET = object()


def context(tr: Trace, *, opcount=_UNSET, choice: dict | None = None, config: CodegenConfig | None = None,
            **codegen) -> dict:
    """The one context dict every template of a build folder renders from.  ``opcount``:
    precomputed :func:`_opcount` of ``tr`` (computed here when not given); ``choice``: the
    record of an automatic choice (:meth:`gen.choose.Choice.record`), kept in the
    manifest; ``config`` (:class:`gen.codegen.config.CodegenConfig`, default: its
    defaults) with ``codegen`` keywords replacing its fields: ``prefix``, ``avoid_stack``,
    ``batch`` (N states per call: a batched kernel, symbol ``..._b<N>``, ``..._b<N>_libm``
    with ``batch_trig="libm"``), ``batch_trig``, ``scalar_trig`` (:data:`SCALAR_TRIG`),
    ``lanes``, ``order`` and ``split_above`` (``sys.maxsize``: never, as
    :mod:`gen.bench.compile_time` compares), and the thresholds.  The code is planned by
    the passes of :mod:`gen.codegen` (:func:`gen.codegen.pipeline.plan_kernel`)."""
    config = (config or CodegenConfig()).with_(**codegen) if codegen else (config or CodegenConfig())
    model, algo = tr.model, tr.algorithm
    spec, m = constraint_info(tr.cset)
    runtime = runtime_parameters(tr)
    prefix = _prefix(tr, config)
    plan = plan_kernel(tr, config, prefix, runtime)
    oc = _opcount(tr) if opcount is _UNSET else opcount
    fn = _public_function(plan, oc)
    files = {"header": f"{prefix}.h", "wrapper": f"{prefix}.c", "kernel": f"{prefix}_kernel.c",
             "cdef": f"{prefix}.cdef", "manifest": "manifest.json", "makefile": "Makefile",
             "cmake": "CMakeLists.txt", "pkgconfig": f"{prefix}.pc.in"}
    batch = plan.batch
    if not batch:
        files["casadi"] = f"{casadi_name(prefix)}.c"
    sources = [files["wrapper"], files["kernel"]] + ([files["casadi"]] if not batch else [])
    manifest = _manifest(plan, fn, files, sources, choice)
    return {
        "stamp": STAMP, "prefix": prefix, "PREFIX": prefix.upper(), "guard": f"{prefix.upper()}_H",
        "robot": {"name": inert_text(model.name), "nq": model.nq, "nv": model.nv, "nbodies": model.nbodies,
                  "floating": any(b.kind == "free" for b in model.bodies)},
        "algorithm": {"name": algo.name, "summary": algo.summary, "source": algo.source},
        "route": getattr(tr, "route", None),
        "constraints": inert_text(spec), "m": m, "iterations": manifest["iterations"],
        "tolerance": manifest["tolerance"], "max_iter": manifest.get("max_iter"),
        "versions": {"rbdgen": __version__, "casadi": ca.__version__},
        "codegen": {"prefix": f"{prefix}_cg", "avoid_stack": bool(config.avoid_stack)},
        "functions": [fn], "files": files, "sources": sources, "manifest": manifest,
        "pkgconfig": f"{prefix}.pc", "batch": batch, "runtime": runtime,
        "vector_uses": _vector_uses(plan),
        "kernel_code": plan.code,
        "cas": None if batch else casadi_context(casadi_name(prefix), manifest["functions"][0], files["header"],
                                                 plan.driver is not None),
    }


def _prefix(tr: Trace, config: CodegenConfig) -> str:
    """The kernel's symbol prefix: ``config.prefix``, else :func:`symbol_prefix` with the
    variant (``avoid_stack`` changes the ABI, the work size: its own symbol, so both builds
    link together) and the batch or trig tag; refused unless a C identifier."""
    tag = (f"_b{config.batch}" + ("_libm" if config.batch_trig == "libm" else "")) if config.batch else \
        {"vector": "_vtrig", "libm": "_libmtrig"}.get(config.scalar_trig, "")
    spec, _ = constraint_info(tr.cset)
    prefix = config.prefix or symbol_prefix(tr.model.name, tr.algorithm.name, spec,
                                            {**variant(tr), **({"avoid_stack": True} if config.avoid_stack else {})}) + tag
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix):
        raise RbdgenError(f"kernel prefix '{prefix}' is not a C identifier")
    return prefix


def _vector_uses(plan: KernelPlan) -> list[str]:
    """What the kernel file uses GCC vectors for (the header says so)."""
    return (["batched states"] if plan.batch else []) + (["product loops"] if plan.loops else []) \
        + (["isomorphic limbs as lanes, which rbdgen build --no-lanes turns off"] if any(plan.lane_plans) else []) \
        + (["the joint angles' sines and cosines four at a time, which --no-lanes turns off"]
           if any(w.hoisted_trig for w in plan.written or ()) else []) \
        + (["every sine and cosine through the vector routine on one lane (scalar_trig='vector')"]
           if plan.trig == "vector" and _has_trig(plan.written_funcs) else [])


def _has_trig(funcs) -> bool:
    """Whether any of ``funcs`` computes a sine or cosine."""
    return any(f.instruction_id(k) in (ca.OP_SIN, ca.OP_COS) for f in funcs for k in range(f.n_instructions()))


def _public_function(plan: KernelPlan, oc) -> dict:
    """The public function's template context (:func:`_function_context`), its kernel's
    return type and checked outputs, and its stack bounds."""
    tr, funcs, batch = plan.trace, plan.funcs, plan.batch
    fn = _function_context(plan.prefix, tr, funcs, plan.config.avoid_stack, oc, plan.driver, plan.written)
    # a kernel with products returns whether the outputs its loops form hold an inf or NaN
    fn.update({"kernel_type": "int" if plan.loops else "void",
               "checked": [tr.outputs[p.output][0] for p in plan.loops if p.output is not None]})
    # the entries of each output the wrapper checks for inf / NaN (gen.codegen.output_check)
    checks = plan.output_checks or [None] * len(fn["outputs"])
    for y, runs in zip(fn["outputs"], checks, strict=True):
        y["check_runs"] = None if runs is None else [list(r) for r in runs]
        y["check_table"] = output_check.tabled(runs, plan.config.check_max_runs)
    fn["check_tables"] = any(y["check_table"] for y in fn["outputs"])
    # the kernel's fills and constants apart: <symbol>_zero_outputs and <symbol>_update
    fn["zero"] = None if batch or plan.driver is not None else plan.written[0].zero
    if batch:
        fn.update({"batch": batch, "stack_doubles": fn["stack_doubles"] * batch})
    # the stack bounds: a batched kernel's every statement is a vector of `batch` doubles
    # (at most one per instruction), plus its sin/cos routine's few dozen
    o0 = o0_temporaries(batch, funcs[0].n_instructions() + 64) if batch else max(w.o0_doubles for w in plan.written)
    fn["stack_bytes"], fn["stack_bytes_o0"] = stack_bytes(fn["stack_doubles"], o0)
    return fn


def _loop(tr) -> dict:
    """The manifest's iteration fields: a driver's tolerance and bound, else the traced
    fixed count (None for a kernel without iterations)."""
    if isinstance(tr, DriverTrace):
        return {"iterations": None, "tolerance": float(tr.tol), "max_iter": int(tr.max_iter)}
    return {"iterations": _traced_iterations(tr), "tolerance": None}


def _manifest(plan: KernelPlan, fn: dict, files: dict, sources: list, choice) -> dict:
    """``manifest.json``: what was built, from what, with which options and code shape
    (``codegen``: the plan's, :meth:`gen.codegen.plan.KernelPlan.manifest`)."""
    tr, prefix, runtime, batch = plan.trace, plan.prefix, plan.runtime, plan.batch
    driver, scalar_trig = plan.driver is not None, plan.trig
    model, algo = tr.model, tr.algorithm
    spec, m = constraint_info(tr.cset)
    return {
        "stamp": STAMP, "generator": f"rbdgen {__version__}", "casadi": ca.__version__,
        "robot": model.name, "algorithm": algo.name, "constraints": spec,
        "nq": model.nq, "nv": model.nv, "m": m, **_loop(tr),
        **({} if tr.cset is None else {"constraint_gains": _gains(tr.cset)}),
        **({} if not algo.runtime else {"parameters": _parameters(algo, runtime, driver)}),
        **({} if runtime is None else {"runtime_params": _runtime_manifest(runtime)}),
        "options": _jsonable(tr.options),
        **({} if getattr(tr, "route", None) is None else {"route": _jsonable(tr.route)}),
        "layout": "column-major", "header": files["header"], "sources": sources,
        "cdef": files["cdef"], "library": f"lib{prefix}.a",
        "return_codes": _return_codes(batch, driver, runtime),
        **({"batch": batch, "lanes": "innermost: element i of state l at [i*batch + l]",
            "batch_trig": plan.config.batch_trig} if batch else {}),
        **({"scalar_trig": scalar_trig} if scalar_trig != SCALAR_TRIG[0] and not batch else {}),
        "codegen": plan.manifest(),
        **({} if choice is None else {"choice": _jsonable(choice)}),
        "functions": [{"symbol": fn["symbol"],
                       "inputs": [{"name": x["name"], "size": x["size"]} for x in fn["inputs"]],
                       "outputs": [{"name": y["name"], "size": y["size"], "rows": y["rows"], "cols": y["cols"]}
                                   for y in fn["outputs"]],
                       "work_size": fn["work_size"], "stack_doubles": fn["stack_doubles"],
                       "stack_bytes": fn["stack_bytes"], "stack_bytes_o0": fn["stack_bytes_o0"],
                       **({"lane_status": f"{fn['symbol']}_status"} if batch else
                          {"casadi_external": casadi_name(prefix)}),
                       **({"zero_outputs": f"{fn['symbol']}_zero_outputs", "update": f"{fn['symbol']}_update"}
                          if fn["zero"] else {}),
                       "opcount": fn["opcount_raw"]}],
    }


def _return_codes(batch, driver: bool, runtime) -> dict:
    return {"0": "ok", "-1": "non-finite input (outputs set to NaN)" if not batch else
            "non-finite input (the outputs of the lanes concerned set to NaN)",
            "-2": "non-finite output",
            **({"-3": "invalid run-time option (tol < 0, max_iter < 1; outputs set to NaN)"}
               if driver and not runtime else {}),
            **({"-3": "invalid run-time option or parameter (" + ("tol < 0, max_iter < 1, " if driver else "")
                + "mu, a gain or a weight out of range; outputs set to NaN)"} if runtime else {}),
            **({"-4": "not converged: max_iter reached with residual > tol (outputs written)"}
               if driver else {})}


def runtime_parameters(tr: Trace | DriverTrace) -> dict | None:
    """The run-time parameters of a kernel built with ``runtime_params`` (issue 14 §5),
    for the header, the wrapper's checks and the manifest; None for other kernels.
    ``mu``: its default (the built value: the ``mu`` option, else the solver's default,
    :func:`gen.algorithms.proximal.default_mu`) and valid range (the row's ``mu`` option:
    ``> 0``, or ``>=`` the augmented-Lagrangian accuracy floor); ``gains``: [Kp, Kd, Kv]
    and their defaults, the constraint set's; ``weights``: the constraints' (every row
    with run-time parameters takes them)."""
    algo = tr.algorithm
    if not tr.options.get("runtime_params"):
        return None
    option = next(o for o in algo.options if o.name == "mu")
    mu = default_mu(tr.options.get("mu"), tr.options.get("tol"), getattr(algo.fn, "converged_mu", DEFAULT_MU))
    out = {"inputs": list(algo.runtime),
           "mu": {"default": mu, "c_default": repr(mu), "min": option.low, "c_min": c_double(option.low),
                  "open": option.open_low, "floor": option.floor},
           "gains": None}
    if "gains" in algo.runtime:
        g = [float(tr.cset.Kp), float(tr.cset.Kd), float(tr.cset.Kv)]
        out["gains"] = {"names": list(GAIN_NAMES), "default": g,
                        "c_default": "{" + ", ".join(repr(x) for x in g) + "}"}
    w = [float(c.weight) for c in tr.cset.constraints]
    out["weights"] = {"default": w, "c_default": "{" + ", ".join(repr(x) for x in w) + "}", "count": len(w)}
    return out


def _runtime_manifest(runtime: dict) -> dict:
    mu = runtime["mu"]
    out = {"mu": {"default": mu["default"], "valid": ("(" if mu["open"] else "[") + f"{mu['min']:g}, inf)",
                  **({"floor": mu["floor"]} if mu["floor"] else {})}}
    if runtime["gains"]:
        out["gains"] = {"order": runtime["gains"]["names"], "default": runtime["gains"]["default"],
                        "valid": "[0, inf) each"}
    out["weights"] = {"order": "the constraints'", "default": runtime["weights"]["default"], "valid": "(0, inf) each"}
    return out


def _parameters(algo, runtime: dict | None, driver: bool) -> dict:
    """Which values of a constrained solver's kernel are taken at run time and which are
    constants of the traced graph (rebuild to change them)."""
    loop = ["tol", "max_iter"] if driver else []
    fixed = ["iterations"] if algo.iterative and not driver else []
    given = [] if runtime is None else runtime["inputs"]
    built = ["constraint set", "anchors"] + [p for p in algo.runtime if p not in given] + fixed
    return {"run_time": given + loop, "built_in": built}


def _gains(cset) -> list[dict]:
    """Per constraint: its token, Baumgarte (Kp, Kd) as used (``(0, Kv)`` for a velocity
    constraint), weight and the world anchor of a constraint held by the world (which
    ``reference_q`` sets), so the manifest says which constraint model the C solves."""
    out = []
    for c, con in enumerate(cset.constraints):
        kp, kd = cset.gains(c)
        row = {"constraint": str(con), "Kp": kp, "Kd": kd, "weight": con.weight}
        if con.body2 < 0:
            row["anchor"] = {"R": [[float(x) for x in r] for r in con.placement2.R],
                             "p": [float(x) for x in con.placement2.p]}
        out.append(row)
    return out




# --- CasADi's external-function API ------------------------------------------------------
#
# Every scalar build folder also has ``P_casadi.c`` (``casadi.c.j2``): the public function
# behind CasADi's external-function C API (the entry ``P_casadi(arg, res, iw, w, mem)``
# and its ``_n_in``, ``_sparsity_in``, ``_work``, ``_checkout``, ...), so that
# ``casadi.external("P_casadi", lib)`` loads any library built from the folder (make,
# CMake) and CasADi's generated C links against it.  Every symbol carries the prefix.
# The Jacobian ``jac_P_casadi`` needs the derivative kernel's code as well: the library
# :func:`gen.casadi_api.casadi_library` builds renders the same template with
# ``jacobian`` (:func:`casadi_context`) over both kernels' folders.

#: what ``P_casadi.c`` exports besides the entry ``<name>`` itself: ``<name><suffix>``
#: (and, with a Jacobian, ``jac_<name>`` and ``jac_<name><suffix>``), CasADi's
#: external-function API
CASADI_API = ("_n_in", "_n_out", "_name_in", "_name_out", "_sparsity_in", "_sparsity_out", "_work",
              "_incref", "_decref", "_checkout", "_release", "_default_in")


def casadi_name(prefix: str) -> str:
    """The CasADi function name of a build folder's external entry."""
    return f"{prefix}_casadi"


def casadi_context(name: str, fn: dict, header: str, driver: bool, jacobian: dict | None = None) -> dict:
    """The ``cas`` context of ``casadi.c.j2``: the external function ``name`` calling the
    public function ``fn`` (a manifest ``functions`` entry) declared in ``header``.
    ``jacobian`` (None: no ``jac_<name>``): ``symbol``, ``header``, ``work_size``,
    ``inputs`` (the derivative kernel's inputs: ``name``, ``size``), ``outputs`` (its
    outputs: ``name``, ``size``), ``blocks`` (output name -> the kernel output holding its
    derivative with respect to each input, :class:`gen.algorithms.Jacobian`) and
    ``chart`` (None, or the raw-coordinate chart of q: ``fn``, ``code``, ``colind``,
    ``row``, ``nq``, ``nv``)."""
    patterns: dict[tuple, str] = {}

    def pattern(rows: int, cols: int, dense: bool = True, structure=None) -> str:
        """CasADi's compressed-column sparsity (its dense shorthand ``rows, cols, 1``;
        ``structure`` ``[colind, row]``; not dense: structurally zero)."""
        if structure is not None and structure[0][-1] < rows * cols:
            data = (rows, cols, *structure[0], *structure[1])
        else:
            data = (rows, cols, 1) if dense else (rows, cols, *[0] * (cols + 1))
        return patterns.setdefault(data, f"{name}_sp{len(patterns)}")

    ins = [{"name": x["name"], "size": x["size"], "sp": pattern(x["size"], 1)} for x in fn["inputs"]]
    outs, offset = [], 0
    for y in fn["outputs"]:
        outs.append({"name": y["name"], "size": y["size"], "offset": offset, "sp": pattern(y["rows"], y["cols"])})
        offset += y["size"]
    # with the Jacobian: another file name, so that it sits beside the folder's own P_casadi.c
    cas = {"name": name, "file": f"{name}.c" if jacobian is None else f"{name}_jacobian.c", "symbol": fn["symbol"], "header": header, "driver": driver,
           "inputs": ins, "outputs": outs, "work_size": fn["work_size"], "scratch": offset,
           "sz_w": fn["work_size"] + offset, "jacobian": None}
    zeros = max(x["size"] for x in fn["inputs"])
    if jacobian is not None:
        j = _casadi_jacobian(jacobian, ins, outs, pattern)
        zeros = max(zeros, j["extra"])
        cas["jacobian"] = j
    cas["zeros"] = zeros
    cas["patterns"] = [{"name": v, "data": list(k)} for k, v in patterns.items()]
    return cas


def _casadi_jacobian(jac: dict, ins: list[dict], outs: list[dict], pattern) -> dict:
    """The ``jacobian`` part of :func:`casadi_context` (CasADi's convention for
    ``jac_<name>``: inputs the nominal inputs then the nominal outputs ``out_<o>``,
    outputs ``jac_<o>_<i>``, numel(o) x numel(i), in that order)."""
    nominal = {x["name"]: k for k, x in enumerate(ins)}
    kernel_inputs = [{"name": x["name"], "size": x["size"], "nominal": nominal.get(x["name"])}
                     for x in jac["inputs"]]
    missing = [x["name"] for x in ins if x["name"] not in {k["name"] for k in kernel_inputs}]
    if missing:
        raise RbdgenError(f"{jac['symbol']} does not take {', '.join(missing)}: it cannot give the Jacobian")
    kernel_outputs, offset = [], 0
    for y in jac["outputs"]:
        kernel_outputs.append({"name": y["name"], "size": y["size"], "offset": offset})
        offset += y["size"]
    where = {y["name"]: y for y in kernel_outputs}
    chart = jac["chart"]
    structure = jac.get("structure") or {}
    blocks = []
    for y in outs:
        names = jac["blocks"].get(y["name"])
        for i, x in enumerate(ins):
            src = None if names is None else where[names[i]]
            use_chart = src is not None and chart is not None and x["name"] == "q"
            sp = structure.get(f"{y['name']}|{x['name']}") if src is not None else None
            sparse = sp is not None and sp[0][-1] < y["size"] * x["size"]
            # a sparse block: the kernel's dense block gathered at the pattern's nonzeros
            gather = [r + y["size"] * c for c in range(x["size"]) for r in sp[1][sp[0][c]:sp[0][c + 1]]] \
                if sparse else None
            blocks.append({"index": len(blocks), "name": f"jac_{y['name']}_{x['name']}", "rows": y["size"],
                           "cols": x["size"], "src": None if src is None else src["offset"],
                           "kernel_output": None if src is None else src["name"], "chart": use_chart,
                           "gather": gather, "sp": pattern(y["size"], x["size"], src is not None, sp)})
    if chart is not None:
        chart = {**chart, "nnz": chart["colind"][-1], "q": nominal["q"]}
    extra = max([x["size"] for x in kernel_inputs if x["nominal"] is None], default=1)
    j_ins = ins + [{"name": f"out_{y['name']}", "size": y["size"], "sp": y["sp"]} for y in outs]
    # scratch for a sparse chart block: D P formed densely, then gathered
    dense = max([b["rows"] * b["cols"] for b in blocks if b["chart"] and b["gather"]], default=0)
    work = offset + jac["work_size"] + (chart["nnz"] if chart else 0)
    return {"symbol": jac["symbol"], "header": jac["header"], "work_size": jac["work_size"],
            "kernel_inputs": kernel_inputs, "kernel_outputs": kernel_outputs, "buffer": offset,
            "inputs": j_ins, "outputs": [{"name": b["name"], "sp": b["sp"]} for b in blocks], "blocks": blocks,
            "chart": chart, "extra": extra, "dense_at": work, "sz_w": work + dense}


def render_casadi(cas: dict) -> str:
    """The text of ``casadi.c.j2`` for :func:`casadi_context`'s ``cas``."""
    return _environment().get_template("casadi.c.j2").render(stamp=STAMP, cas=cas)


# --- rendering ---------------------------------------------------------------------------

TEMPLATE_OF = {"header": "header.h.j2", "wrapper": "wrapper.c.j2", "kernel": "kernel.c.j2",
               "cdef": "cdef.j2", "manifest": "manifest.json.j2", "makefile": "Makefile.j2",
               "cmake": "CMakeLists.txt.j2", "pkgconfig": "pkgconfig.pc.in.j2", "casadi": "casadi.c.j2"}


@functools.cache
def _environment() -> jinja2.Environment:
    """The templates' environment, one per process: it keeps each template compiled (a
    new environment compiled all nine again for every kernel, 0.09 s of CPU; jinja2
    still reloads a template whose file changed)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["json"] = lambda x: json.dumps(x, indent=2, ensure_ascii=False)
    return env


#: a batched kernel's own wrapper and kernel file (lanes innermost: no CasADi entry)
BATCH_TEMPLATE_OF = {**{k: v for k, v in TEMPLATE_OF.items() if k != "casadi"},
                     "wrapper": "wrapper_batch.c.j2", "kernel": "kernel_batch.c.j2"}


def render(ctx: dict) -> dict[str, str]:
    """File name -> text for every file of the build folder."""
    env = _environment()
    templates = BATCH_TEMPLATE_OF if ctx.get("batch") else TEMPLATE_OF
    return {ctx["files"][key]: env.get_template(tpl).render(ctx) for key, tpl in templates.items()}


@dataclass
class BuildFolder:
    """An emitted build folder: ``path``, kernel ``prefix``, ``manifest`` (dict),
    ``files`` (name -> text as written)."""

    path: Path
    prefix: str
    manifest: dict
    files: dict[str, str] = field(repr=False)

    @property
    def header_path(self) -> Path:
        return self.path / self.manifest["header"]

    @property
    def sources(self) -> list[Path]:
        return [self.path / s for s in self.manifest["sources"]]

    @property
    def cdef(self) -> str:
        return self.files[self.manifest["cdef"]]


def _write_atomic(path: Path, text: str) -> None:
    data = text.encode("utf-8")
    if path.exists() and path.read_bytes() == data:
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write(files: dict[str, str], out_dir) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        _write_atomic(out / name, text)
    return out


def emit_trace(tr: Trace, out_dir, *, progress: Callable[[str], None] | None = None, under=None,
               choice: dict | None = None, config: CodegenConfig | None = None, **codegen) -> BuildFolder:
    """Write the build folder of a traced kernel into ``out_dir``; with ``out_dir`` None,
    into ``under/<prefix>-<digest of the files>``, so that kernels differing only in
    options the name does not show (iterations, mu, gains, anchors) never share a folder.
    ``choice``: an automatic choice's record for the manifest (:mod:`gen.choose`);
    ``config`` and ``codegen`` (``prefix``, ``avoid_stack``, ``batch``, ``batch_trig``,
    ``scalar_trig``, ``split_above``, ``order``, ``lanes``, thresholds): see :func:`context`."""
    label = f"{tr.model.name}/{tr.algorithm.name}"
    with timed(progress, f"opcount {label}"):
        oc = _opcount(tr)
    with timed(progress, f"codegen {label}") as info:
        ctx = context(tr, opcount=oc, choice=choice, config=config, **codegen)
        files = render(ctx)
        if out_dir is None:
            digest = hashlib.sha256("".join(f"{n}\0{t}\0" for n, t in sorted(files.items())).encode())
            out_dir = Path(under) / f"{ctx['prefix']}-{digest.hexdigest()[:10]}"
        path = write(files, out_dir)
        info["detail"] = f"{sum(len(t) for t in files.values()) // 1000} kB of C"
    return BuildFolder(path, ctx["prefix"], ctx["manifest"], files)


def trace_for(robot, algorithm: str, constraints=None, *, progress=None, config: CodegenConfig | None = None,
              **options) -> Trace | DriverTrace:
    """Load ``robot``, resolve ``constraints``, check ``options`` and trace ``algorithm``
    for ``config``'s products-as-loops thresholds, reporting the time: with a tolerance
    (``tol=...``) as an early-exit driver (:func:`gen.trace.trace_driver`)."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    options = algo.check_options(options)
    driver = options.get("tol") is not None
    with timed(progress, f"trace {model.name}/{algo.name}" + (" (early-exit driver)" if driver else "")):
        if driver:
            return trace_driver(model, algo, cset, config=config or CodegenConfig(), **options)
        return trace(model, algo, cset, config=config or CodegenConfig(), **options)


def emit(robot, algorithm: str, constraints=None, *, out_dir, progress=None, config: CodegenConfig | None = None,
         prefix: str | None = None, avoid_stack: bool | None = None, batch: int | None = None,
         batch_trig: str | None = None, split_above: int | None = None, **options) -> BuildFolder:
    """Trace ``algorithm`` on ``robot`` and write its build folder into ``out_dir``
    (``batch=N``: the batched kernel, N states per call; ``algorithm`` ``auto`` or
    ``auto_osim``: the one :func:`gen.choose.choose` picks, recorded in the manifest;
    ``config`` with ``prefix``, ``avoid_stack``, ``batch``, ``batch_trig``,
    ``split_above`` replacing its fields where given: see :func:`context`; other keywords
    go to the algorithm)."""
    given = {"prefix": prefix, "avoid_stack": avoid_stack, "batch": batch, "batch_trig": batch_trig,
             "split_above": split_above}
    config = (config or CodegenConfig()).with_(**{k: v for k, v in given.items() if v is not None})
    robot, algorithm, choice = resolve(robot, algorithm, constraints, options)
    tr = trace_for(robot, algorithm, constraints, progress=progress, config=config, **options)
    return emit_trace(tr, out_dir, progress=progress, config=config,
                      choice=None if choice is None else choice.record())


# --- the committed reference set (generated/) --------------------------------------------

def render_reference(robot: str, algorithm: str) -> tuple[str, dict[str, str]]:
    """(folder name, files) of one reference kernel, as committed under ``generated/``."""
    tr = trace_for(robot, algorithm)
    ctx = context(tr)
    return ctx["prefix"], render(ctx)


def update_generated(root=GENERATED_DIR, reference=REFERENCE_SET, progress=None) -> list[str]:
    """Regenerate ``generated/<prefix>/`` for the reference set; returns the folders
    whose content changed.  Stale files inside those folders are removed."""
    changed = []
    root = Path(root)
    for robot, algorithm in reference:
        with timed(progress, f"generated/{robot}/{algorithm}"):
            name, files = render_reference(robot, algorithm)
        folder = root / name
        old = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()} if folder.is_dir() else {}
        if old != files:
            changed.append(name)
            for stale in set(old) - set(files):
                (folder / stale).unlink()
            write(files, folder)
    return changed
