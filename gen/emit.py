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
traced function's SX instruction tape written by :func:`_batch_code` as one GCC
vector-extension statement per instruction over values of N doubles (``P_b<N>_kernel.c``,
``kernel_batch.c.j2``), so gcc emits AVX2 / AVX-512 arithmetic directly; sin and cos are
vectorised (:func:`_batch_trig_code`, within 2.3e-16 of glibc) or, with
``batch_trig="libm"``, glibc per lane; ``scalar_trig="vector"`` gives the scalar kernel
the same routine (:func:`_one_lane_trig`), so that with ``-ffp-contract=off`` on both
every lane is bit for bit the scalar kernel.  The wrapper (``wrapper_batch.c.j2``) voids only
the lanes whose inputs are not finite, and gives each lane its own code: ``P_status(...,
work, int *status)`` writes them to ``status[lane]``; ``P`` returns -1 if any lane has
-1, else -2 if any has -2 (one code for N lanes cannot say more).  Fixed iteration counts only (no early-exit
driver), locals only (no ``avoid_stack``).  Measured on talos (gen.bench.batch,
``bench/reports/2026-11-25-batched-kernels.md``): aba 4.6x (N = 4) and 8.1x (N = 8) the
scalar kernel's throughput per state.

Codegen options
---------------
Measured on talos (nv = 50; CasADi 3.8.2, gcc 12.2, ``-march=native``, 2-core x86-64 VM
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
  ``gen.cwriter.SPLIT_ABOVE`` instructions becomes ``static`` parts of ``PART_SIZE``
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

import hashlib
import json
import logging
import math
import os
import re
import struct
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

import casadi as ca
import jinja2

from opcount import CLASSES, count_trace

from .algorithms import in_report
from .algorithms.proximal import DEFAULT_MU, default_mu
from .api import GAIN_NAMES, get_algorithm
from .choose import resolve
from .cwriter import LIBM_OPS, TRIG_LANES, VECTOR_OPS, c_double, o0_temporaries, op_name, stack_bytes, write_functions
from .errors import RbdgenError
from .model import Model
from .lanes import manifest as lanes_manifest, plan as lane_plan, trace_plan
from .products import checked_outputs, deferred, manifest as products_manifest, write_kernel as write_products
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
CODEGEN_DEFAULTS = {"avoid_stack": False}
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

DRIVER_PARTS = (("setup", "once per call"), ("step", "per iteration"),
                ("finish", "once, for the returned iterate"))


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


def _kernel_function(name: str, tr: Trace) -> ca.Function:
    return ca.Function(name, [s for _, s in tr.inputs],
                       [ca.densify(ca.SX(e)) for _, e in tr.outputs],
                       [n for n, _ in tr.inputs], [n for n, _ in tr.outputs])


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


def _driver(prefix: str, dt: DriverTrace) -> tuple[list[ca.Function], dict]:
    """The CasADi functions of a driver and the template's view of its loop."""
    funcs = [_kernel_function(f"{prefix}_{name}", getattr(dt, name)) for name, _ in DRIVER_PARTS]
    nc, ns = dt.const_size, dt.state_size
    return funcs, {"setup": funcs[0].name(), "step": funcs[1].name(), "finish": funcs[2].name(),
                   "const_size": nc, "state_size": ns, "next_offset": nc + ns, "w_offset": nc + 2 * ns,
                   "tol": repr(float(dt.tol)), "max_iter": int(dt.max_iter)}


_UNSET = object()


def context(tr: Trace, *, prefix: str | None = None, avoid_stack: bool = False, opcount=_UNSET,
            batch: int | None = None, batch_trig: str = "vector", scalar_trig: str = "hoisted",
            choice: dict | None = None, split_above: int | None = None, order: str = "auto",
            lanes: bool = True) -> dict:
    """The one context dict every template of a build folder renders from.  ``opcount``:
    precomputed :func:`_opcount` of ``tr`` (computed here when not given); ``batch``: N
    states per call (a batched kernel, symbol ``..._b<N>``, ``..._b<N>_libm`` with
    ``batch_trig="libm"``), None for the scalar kernel; ``scalar_trig``: the scalar
    kernel's sin and cos (:data:`SCALAR_TRIG`); ``choice``: the record of
    an automatic choice (:meth:`gen.choose.Choice.record`), kept in the manifest;
    ``split_above``: the tape length above which a scalar kernel is split into parts
    (default :data:`gen.cwriter.SPLIT_ABOVE`; ``sys.maxsize``: never, as
    :mod:`gen.bench.compile_time` compares); ``order``: the scalar kernel's instruction
    order (:func:`gen.cwriter.write_function`: ``auto``, ``schedule`` or ``tape``, as
    :mod:`gen.bench.emission_order` compares); ``lanes``: with ``order="auto"`` and not
    ``avoid_stack``, write the robot's isomorphic limbs as vector lanes where that removes
    at least :data:`gen.lanes.MIN_GAIN` of a function's statements (:mod:`gen.lanes`;
    the manifest's ``codegen.lanes``)."""
    model, algo = tr.model, tr.algorithm
    spec, m = constraint_info(tr.cset)
    batch = check_batch(batch)
    runtime = runtime_parameters(tr)
    _refuse_codegen(tr, batch, avoid_stack, batch_trig, scalar_trig, runtime)
    tag = (f"_b{batch}" + ("_libm" if batch_trig == "libm" else "")) if batch else \
        {"vector": "_vtrig", "libm": "_libmtrig"}.get(scalar_trig, "")
    if scalar_trig == "hoisted" and (avoid_stack or not lanes):
        scalar_trig = "libm"       # hoisting keeps vectors in locals; --no-lanes: plain C99
    # avoid_stack changes the ABI (the work size): its own symbol, so both builds link together
    prefix = prefix or symbol_prefix(model.name, algo.name, spec,
                                     {**variant(tr), **({"avoid_stack": True} if avoid_stack else {})}) + tag
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix):
        raise RbdgenError(f"kernel prefix '{prefix}' is not a C identifier")
    options = _jsonable(tr.options)
    if isinstance(tr, DriverTrace):
        funcs, driver = _driver(prefix, tr)
        loop = {"iterations": None, "tolerance": float(tr.tol), "max_iter": int(tr.max_iter)}
    else:
        if options.get("tol") is not None:
            raise RbdgenError("a traced kernel runs a fixed number of iterations: trace a tolerance with "
                              "gen.trace.trace_driver (gen.emit.trace_for does for tol=...)")
        funcs, driver = [_kernel_function(f"{prefix}_kernel", tr)], None
        loop = {"iterations": _traced_iterations(tr), "tolerance": None}
    oc = _opcount(tr) if opcount is _UNSET else opcount
    loops = deferred(tr)
    kernel_code, written, plans = _kernel_code(tr, funcs, driver, prefix, batch, batch_trig, scalar_trig,
                                               avoid_stack, split_above, order,
                                               lanes and order == "auto" and not avoid_stack and not batch)
    fn = _public_function(prefix, tr, funcs, avoid_stack, oc, driver, written, batch)
    files = {"header": f"{prefix}.h", "wrapper": f"{prefix}.c", "kernel": f"{prefix}_kernel.c",
             "cdef": f"{prefix}.cdef", "manifest": "manifest.json", "makefile": "Makefile",
             "cmake": "CMakeLists.txt", "pkgconfig": f"{prefix}.pc.in"}
    if not batch:
        files["casadi"] = f"{casadi_name(prefix)}.c"
    sources = [files["wrapper"], files["kernel"]] + ([files["casadi"]] if not batch else [])
    codegen = {"avoid_stack": bool(avoid_stack), "parts": fn["parts"], "scheduled": fn["scheduled"],
               **({"lanes": lanes_manifest(model, plans)} if any(plans) else {}),
               **({"products": products_manifest(tr)} if loops and not batch else {})}
    manifest = _manifest(tr, prefix, fn, files, sources, loop, options, runtime, driver is not None, batch,
                         batch_trig, scalar_trig, codegen, choice)
    return {
        "stamp": STAMP, "prefix": prefix, "PREFIX": prefix.upper(), "guard": f"{prefix.upper()}_H",
        "robot": {"name": inert_text(model.name), "nq": model.nq, "nv": model.nv, "nbodies": model.nbodies,
                  "floating": any(b.kind == "free" for b in model.bodies)},
        "algorithm": {"name": algo.name, "summary": algo.summary, "source": algo.source},
        "route": getattr(tr, "route", None),
        "constraints": inert_text(spec), "m": m, "iterations": manifest["iterations"],
        "tolerance": manifest["tolerance"], "max_iter": loop.get("max_iter"),
        "versions": {"rbdgen": __version__, "casadi": ca.__version__},
        "codegen": {"prefix": f"{prefix}_cg", "avoid_stack": bool(avoid_stack)},
        "functions": [fn], "files": files, "sources": sources, "manifest": manifest,
        "pkgconfig": f"{prefix}.pc", "batch": batch, "runtime": runtime,
        "vector_uses": (["batched states"] if batch else []) + (["product loops"] if loops and not batch else [])
        + (["isomorphic limbs as lanes, which rbdgen build --no-lanes turns off"] if any(plans) else [])
        + (["the joint angles' sines and cosines four at a time, which --no-lanes turns off"]
           if f"typedef double {prefix}_cg_v " in kernel_code else []),
        "kernel_code": kernel_code,
        "cas": None if batch else casadi_context(casadi_name(prefix), manifest["functions"][0], files["header"],
                                                 driver is not None),
    }


def _public_function(prefix: str, tr: Trace, funcs, avoid_stack: bool, oc, driver, written, batch) -> dict:
    """The public function's template context (:func:`_function_context`), its kernel's
    return type and checked outputs, and its stack bounds."""
    fn = _function_context(prefix, tr, funcs, avoid_stack, oc, driver, written)
    loops = bool(deferred(tr)) and not batch
    # a kernel with products returns whether the outputs its loops form hold an inf or NaN
    fn.update({"kernel_type": "int" if loops else "void",
               "checked": [tr.outputs[o][0] for o in checked_outputs(tr)] if loops else []})
    if batch:
        fn.update({"batch": batch, "stack_doubles": fn["stack_doubles"] * batch})
    # the stack bounds: a batched kernel's every statement is a vector of `batch` doubles
    # (at most one per instruction), plus its sin/cos routine's few dozen
    o0 = o0_temporaries(batch, funcs[0].n_instructions() + 64) if batch else max(w.o0_doubles for w in written)
    fn["stack_bytes"], fn["stack_bytes_o0"] = stack_bytes(fn["stack_doubles"], o0)
    return fn


def _refuse_codegen(tr: Trace, batch, avoid_stack: bool, batch_trig: str, scalar_trig: str, runtime) -> None:
    """One-line refusals of code-generation options that do not go together."""
    if batch and isinstance(tr, DriverTrace):
        raise RbdgenError("a batched kernel runs a fixed number of iterations in every lane: build it with "
                          "iterations=K, not a tolerance")
    if batch and avoid_stack:
        raise RbdgenError("a batched kernel keeps its intermediates in vector locals: avoid_stack does not apply")
    for name, value, choices in (("batch_trig", batch_trig, BATCH_TRIG), ("scalar_trig", scalar_trig, SCALAR_TRIG)):
        if value not in choices:
            raise RbdgenError(f"{name}={value!r}: choose from {', '.join(choices)}")
    if batch and scalar_trig != SCALAR_TRIG[0]:
        raise RbdgenError("scalar_trig sets the scalar kernel's sin and cos; a batched kernel's are batch_trig")
    if batch and runtime:
        raise RbdgenError("a batched kernel takes no run-time parameters: build it with mu, the gains and the "
                          "weights built in (runtime_params off)")


def _kernel_code(tr: Trace, funcs, driver, prefix: str, batch, batch_trig: str, scalar_trig: str,
                 avoid_stack: bool, split_above, order: str, with_lanes: bool) -> tuple[str, list | None, list]:
    """``(kernel file text, the writer's records, lane plans)``: the batched writer, the
    product-loop writer (an SX head and C loops), or the scalar writer with its lane plans."""
    if batch:
        return _batch_code(funcs[0], f"{prefix}_cg", batch, funcs[0].name(), batch_trig), None, []
    trig = {"hoisted": _hoisted_trig, "vector": _one_lane_trig}.get(scalar_trig, lambda p: {})(f"{prefix}_cg")
    if deferred(tr):
        code, one, plans = write_products(funcs[0].name(), tr, avoid_stack=avoid_stack, split_above=split_above,
                                          order=order, lanes=with_lanes, **trig)
        return code, [one], plans
    if not with_lanes:
        plans = [None] * len(funcs)
    elif driver is None:            # one kernel: planned on its lane trace where the model has one
        plans = [trace_plan(tr, lambda t: (_kernel_function(funcs[0].name(), t), None))[2]]
    else:
        plans = [lane_plan(f, tr.model) for f in funcs]
    code, written = write_functions(funcs, avoid_stack=avoid_stack, split_above=split_above, order=order,
                                    lanes=plans, **trig)
    return code, written, plans


def _manifest(tr: Trace, prefix: str, fn: dict, files: dict, sources: list, loop: dict, options: dict, runtime,
              driver: bool, batch, batch_trig: str, scalar_trig: str, codegen: dict, choice) -> dict:
    """``manifest.json``: what was built, from what, with which options and code shape."""
    model, algo = tr.model, tr.algorithm
    spec, m = constraint_info(tr.cset)
    return {
        "stamp": STAMP, "generator": f"rbdgen {__version__}", "casadi": ca.__version__,
        "robot": model.name, "algorithm": algo.name, "constraints": spec,
        "nq": model.nq, "nv": model.nv, "m": m, **loop,
        **({} if tr.cset is None else {"constraint_gains": _gains(tr.cset)}),
        **({} if not algo.runtime else {"parameters": _parameters(algo, runtime, driver)}),
        **({} if runtime is None else {"runtime_params": _runtime_manifest(runtime)}),
        "options": options,
        **({} if getattr(tr, "route", None) is None else {"route": _jsonable(tr.route)}),
        "layout": "column-major", "header": files["header"], "sources": sources,
        "cdef": files["cdef"], "library": f"lib{prefix}.a",
        "return_codes": _return_codes(batch, driver, runtime),
        **({"batch": batch, "lanes": "innermost: element i of state l at [i*batch + l]",
            "batch_trig": batch_trig} if batch else {}),
        **({"scalar_trig": scalar_trig} if scalar_trig != SCALAR_TRIG[0] and not batch else {}),
        "codegen": codegen,
        **({} if choice is None else {"choice": _jsonable(choice)}),
        "functions": [{"symbol": fn["symbol"],
                       "inputs": [{"name": x["name"], "size": x["size"]} for x in fn["inputs"]],
                       "outputs": [{"name": y["name"], "size": y["size"], "rows": y["rows"], "cols": y["cols"]}
                                   for y in fn["outputs"]],
                       "work_size": fn["work_size"], "stack_doubles": fn["stack_doubles"],
                       "stack_bytes": fn["stack_bytes"], "stack_bytes_o0": fn["stack_bytes_o0"],
                       **({"lane_status": f"{fn['symbol']}_status"} if batch else
                          {"casadi_external": casadi_name(prefix)}),
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


# --- batched kernels ---------------------------------------------------------------------
#
# ``batch=N`` (issue 15 §1): one call evaluates N states, lanes innermost (element i of an
# input or output of state l at ``x[i*N + l]``).  The kernel is not CasADi's C: the SX
# instruction tape of the traced function (``instruction_id/input/output/constant``, the
# tape CasADi's own code generator walks) is written out as straight-line code over GCC
# vector-extension values of N doubles (``vector_size``; GCC manual, "Using Vector
# Instructions through Built-in Functions"), one vector statement per instruction.  The
# compiler maps them to AVX2 (N = 4) or AVX-512 (N = 8) registers as ``-march`` allows,
# without relying on the auto-vectoriser; CasADi's register allocation (its work slots)
# is kept, so a slot is one vector local.  +, -, *, / and sqrt are IEEE operations lane by
# lane, so a lane rounds as the scalar kernel does (up to where gcc contracts a*b+c into
# an FMA, which it may decide differently for the two).  sin and cos are
# :func:`_batch_trig_code`'s vectorised routine (libm per lane beyond its range); the other
# libm functions and the comparisons run per lane in scalar C, as CasADi writes them.

#: lanes per call a batched kernel accepts: GCC vector types hold a power of two elements
BATCH_SIZES = (2, 4, 8, 16)
#: how a batched kernel evaluates sin and cos: "vector" (default; within 2.3e-16 of glibc,
#: see _batch_trig_code) or "libm" (glibc per lane: with -ffp-contract=off on both, every
#: lane is then bit for bit the scalar kernel, which the augmented-Lagrangian solvers need
#: for agreement beyond their rounding floor eps / (mu lambda_min(M)))
BATCH_TRIG = ("vector", "libm")
#: how a scalar kernel evaluates sin and cos (:func:`context`): "hoisted" (default) the
#: joint angles' through the batched kernels' routine, gen.cwriter.TRIG_LANES at a time
#: (gen.cwriter.hoist_trig; glibc's with avoid_stack or without lanes: plain C99); "vector"
#: every one through that routine on one lane (symbol ..._vtrig: with -ffp-contract=off on
#: both, the lanes of a batched kernel are bit for bit this kernel); "libm" glibc's
#: (..._libmtrig).  glibc's sincos was 26-58 % of a small arm's instructions; hoisted, ur5
#: crba went from 1079 to 638 instructions (75 -> 63 ns) and talos crba from 1520 to 917 ns,
#: within 4e-14 of glibc's values (bench/reports/2026-11-28-speed.md)
SCALAR_TRIG = ("hoisted", "vector", "libm")
_TRIG_OPS = {ca.OP_SIN: "sin", ca.OP_COS: "cos"}
#: |x| above which the vectorised sin/cos hand a lane to libm: the reduction's products
#: k*C1, k*C2 are exact while |k| < 2^21 (k = round(2x/pi), C1, C2 of 32 bits)
TRIG_LIMIT = 1e6


def check_batch(batch) -> int | None:
    """``batch`` as lanes per call (None: the scalar kernel); a clear error otherwise."""
    if batch is None:
        return None
    if isinstance(batch, bool) or not isinstance(batch, int) or batch not in BATCH_SIZES:
        raise RbdgenError(f"batch={batch!r}: a batched kernel evaluates 2, 4, 8 or 16 states per call "
                          f"(batch=None builds the scalar kernel)")
    return batch


def _pi_over_2_parts() -> tuple[float, float, float]:
    """pi/2 = C1 + C2 + C3 (+ O(2^-118)): C1 and C2 with 32 significant bits (so k*C1 and
    k*C2 are exact for |k| < 2^21), C3 the rounded rest (Cody & Waite, "Software Manual for
    the Elementary Functions", 1980, ch. 8).  pi to 50 digits, exact rational arithmetic."""
    half_pi = Fraction("1.5707963267948966192313216916397514420985846996875529")

    def chop(x: Fraction, bits: int) -> float:
        e = math.floor(math.log2(x)) if x > 0 else 0
        scale = Fraction(2) ** (bits - 1 - e)
        return float(Fraction(math.floor(x * scale)) / scale)

    c1 = chop(half_pi, 32)
    c2 = chop(half_pi - Fraction(c1), 32)
    c3 = float(half_pi - Fraction(c1) - Fraction(c2))
    return c1, c2, c3


def _batch_trig_code(p: str, lanes: int) -> str:
    """``static`` C of ``void <p>_trig(const <p>_v *x, <p>_v *y, int cosine)``: ``*y`` =
    sin or cos of each of the ``lanes`` doubles of ``*x`` (which ``y`` may be).

    x = k pi/2 + r with k = round(2x/pi) as an integer (``__builtin_convertvector`` of
    2x/pi +- 1/2, truncated; its low bits are k mod 4) and r = ((x - k C1) - k C2) - k C3
    (:func:`_pi_over_2_parts`; x - k C1 is exact by Sterbenz' lemma), |r| <= pi/4; sin r
    and cos r by their Taylor series to r^17 and r^18 (the first term left out is below
    1e-19 on |r| <= pi/4), Horner's scheme; the quadrant k mod 4 picks +-sin r or +-cos r
    by bit masks (cos x = sin(x + pi/2): quadrant k + 1).  Measured against glibc's sin
    and cos (tests/test_batch.py): within 2.3e-16 absolute on |x| <= 1e6.  Lanes with
    |x| > :data:`TRIG_LIMIT`, inf or NaN (a test on the bits) take libm's value; the
    reduction sees 0 there, so the conversion is always in range.

    Immune to ``-ffast-math``: k is an integer conversion, where rounding by adding and
    subtracting 1.5 * 2^52 is folded away by ``-fassociative-math`` (then sin(0.3) = 0),
    and the range test is on the bits, which ``-ffinite-math-only`` cannot assume away;
    reassociating the reduction there costs a few ulps of r.  Vectors pass by pointer:
    no function takes or returns one (:func:`gen.cwriter.vector_types`)."""
    c1, c2, c3 = _pi_over_2_parts()
    sin_c = [(-1) ** (j // 2) / math.factorial(j) for j in range(3, 18, 2)]     # r^3 .. r^17
    cos_c = [(-1) ** (j // 2) / math.factorial(j) for j in range(4, 19, 2)]     # r^4 .. r^18

    def horner(coeffs):
        expr = c_double(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            expr = f"{c_double(c)} + r2 * ({expr})"
        return expr

    def splat(c):
        return "{" + ", ".join([c] * lanes) + "}"

    v, u, i32, i64 = f"{p}_v", f"{p}_u64", f"{p}_i32", f"{p}_i64"
    limit_bits = f"0x{struct.unpack('<Q', struct.pack('<d', TRIG_LIMIT))[0]:016x}ULL"
    return f"""/* sin and cos of each lane (see rbdgen's gen/emit.py, _batch_trig_code): Cody-Waite
 * reduction by pi/2 in three parts with k = round(2x/pi) an integer conversion, Taylor
 * series on |r| <= pi/4, quadrant by bit masks; |x| > {TRIG_LIMIT:g}, inf and NaN lanes through
 * libm.  No rounding trick and no test that -ffast-math folds away. */
static void {p}_trig(const {v} *xp, {v} *yp, int cosine)
{{
    const {u} sign = {splat("0x8000000000000000ULL")}, limit = {splat(limit_bits)};
    const {u} half = {splat("0x3fe0000000000000ULL")};     /* the bits of 0.5 */
    const {v} x = *xp;
    {u} near = ({u})((({u})x & ~sign) <= limit);  /* all ones where |x| <= limit (NaN: no) */
    {v} xr = ({v})(({u})x & near);               /* 0 in the lanes libm takes */
    {v} kd = xr * {c_double(2 / math.pi)};
    {i32} ki = __builtin_convertvector(kd + ({v})((({u})kd & sign) | half), {i32});
    {v} k = __builtin_convertvector(ki, {v});
    {v} r = ((xr - k * {c_double(c1)}) - k * {c_double(c2)}) - k * {c_double(c3)};
    {v} r2 = r * r;
    {v} s = r + (r * r2) * ({horner(sin_c)});
    {v} c = (1.0 - 0.5 * r2) + (r2 * r2) * ({horner(cos_c)});
    {u} q = ({u})__builtin_convertvector(ki, {i64}) + ({u}){splat("(unsigned long long)cosine")};
    {u} odd = -(q & 1);                         /* all ones in odd quadrants: +-cos r */
    {u} y = (({u})s & ~odd) | (({u})c & odd);
    {v} out;
    int l, any = 0;
    y ^= (q & 2) << 62;                         /* quadrants 2, 3: -sin r, -cos r */
    out = ({v})y;
    for (l = 0; l < {lanes}; ++l) any |= near[l] == 0;
    if (any)
        for (l = 0; l < {lanes}; ++l)
            if (near[l] == 0) out[l] = cosine ? cos(x[l]) : sin(x[l]);
    *yp = out;
}}
"""


def _vector_types(p: str, lanes: int) -> list[str]:
    """C typedefs of ``<p>_v`` (``lanes`` doubles), ``<p>_u64``, ``<p>_i64`` and
    ``<p>_i32`` (as many 64- and 32-bit integers, for :func:`_batch_trig_code`'s bit masks
    and its integer k)."""
    return [f"typedef double {p}_v __attribute__((vector_size({8 * lanes})));",
            f"typedef unsigned long long {p}_u64 __attribute__((vector_size({8 * lanes})));",
            f"typedef long long {p}_i64 __attribute__((vector_size({8 * lanes})));",
            f"typedef int {p}_i32 __attribute__((vector_size({4 * lanes})));"]


def _hoisted_trig(p: str) -> dict:
    """``write_functions``' ``preamble`` and ``trig_vector`` for :func:`gen.cwriter.hoist_trig`:
    the joint angles' sin and cos through :func:`_batch_trig_code`'s routine,
    :data:`gen.cwriter.TRIG_LANES` at a time."""
    preamble = "\n".join([*_vector_types(p, TRIG_LANES), "", _batch_trig_code(p, TRIG_LANES)])
    return {"preamble": preamble, "trig_vector": p}


def _one_lane_trig(p: str) -> dict:
    """``write_functions``' ``calls`` and ``preamble`` for a scalar kernel whose sin and
    cos are :func:`_batch_trig_code`'s routine on a vector of one double: the same IEEE
    operations in the same order as every lane of a batched kernel."""
    routine = "\n".join([*_vector_types(p, 1), "", _batch_trig_code(p, 1),
                         f"static double {p}_trig1(double x, int cosine) {{ {p}_v v = {{x}}; {p}_trig(&v, &v, cosine); "
                         "return v[0]; }"])
    return {"calls": {ca.OP_SIN: f"{p}_trig1({{0}}, 0)", ca.OP_COS: f"{p}_trig1({{0}}, 1)"}, "preamble": routine}


def _batch_code(f: ca.Function, p: str, lanes: int, symbol: str, trig: str = "vector") -> str:
    """C of ``int <symbol>(const double **arg, double **res)``: the SX function ``f``
    evaluated on ``lanes`` states at once (see the section comment above).  ``trig``:
    "vector" (:func:`_batch_trig_code`) or "libm" (sin and cos per lane, bit for bit the
    scalar kernel's)."""
    if trig not in BATCH_TRIG:
        raise RbdgenError(f"batch_trig={trig!r}: choose from {', '.join(BATCH_TRIG)}")
    if not f.is_a("SXFunction"):
        raise RbdgenError("a batched kernel is emitted from an SX function")
    v = f"{p}_v"
    const: dict[int, str] = {}                 # work slot -> the literal it holds
    used: set[int] = set()
    body: list[str] = []
    uses_trig = False

    def vec(r):
        return const.get(r, f"w{r}")

    def splat(c):
        return f"(({v}){{" + ", ".join([c] * lanes) + "})"

    for k in range(f.n_instructions()):
        op, ins, out = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_CONST:
            const[out[0]] = c_double(f.instruction_constant(k))
            continue
        if op == ca.OP_OUTPUT:
            src = vec(ins[0]) if ins[0] not in const else splat(const[ins[0]])
            body.append(f"if (res[{out[0]}]) {p}_store(res[{out[0]}] + {out[1] * lanes}, {src});")
            continue
        r = out[0]
        if op == ca.OP_INPUT:
            line = f"w{r} = {p}_load(arg[{ins[0]}] + {ins[1] * lanes});"
        elif op in VECTOR_OPS or op in _TRIG_OPS:
            args = [vec(a) for a in ins]
            if all(a in const for a in ins):  # an operation of constants only: one vector operand
                args[0] = splat(args[0])
            if op in _TRIG_OPS and trig == "libm":
                arg = const[ins[0]] if ins[0] in const else f"w{ins[0]}[l]"
                line = f"for (l = 0; l < {lanes}; ++l) w{r}[l] = {_TRIG_OPS[op]}({arg});"
            elif op in _TRIG_OPS:
                uses_trig = True
                line = f"{p}_trig(&{args[0]}, &w{r}, {int(op == ca.OP_COS)});"
            else:
                line = f"w{r} = {VECTOR_OPS[op].format(*args)};"
        elif op in LIBM_OPS:
            args = [const[a] if a in const else f"w{a}[l]" for a in ins]
            line = f"for (l = 0; l < {lanes}; ++l) w{r}[l] = {LIBM_OPS[op].format(*args)};"
        else:
            raise RbdgenError(f"a batched kernel cannot evaluate CasADi operation {op_name(op)}")
        const.pop(r, None)
        used.add(r)
        body.append(line)
    decl = ", ".join(f"w{r}" for r in sorted(used))
    head = [*_vector_types(p, lanes),
            "/* the same at any double-aligned address, for loads and stores (macros: no vector crosses",
            "   a function boundary, see gen/cwriter.py, vector_types) */",
            f"typedef double {p}_m __attribute__((vector_size({8 * lanes}), aligned(8), may_alias));",
            f"#define {p}_load(x) (*(const {p}_m *)(x))",
            f"#define {p}_store(x, y) (*({p}_m *)(x) = (y))",
            ""]
    if uses_trig:
        head += _batch_trig_code(p, lanes).splitlines() + [""]
    lines = [*head,
             f"int {symbol}(const double **arg, double **res)",
             "{",
             *([f"    {v} {decl};"] if decl else []),
             "    int l;",
             "    (void)l;",
             *(f"    {b}" for b in body),
             "    return 0;",
             "}"]
    return "\n".join(lines)


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


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["json"] = lambda x: json.dumps(x, indent=2, ensure_ascii=False)
    return env


#: a batched kernel's own wrapper and kernel file
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


def emit_trace(tr: Trace, out_dir, *, prefix: str | None = None, avoid_stack: bool = False,
               progress: Callable[[str], None] | None = None, under=None, batch: int | None = None,
               batch_trig: str = "vector", scalar_trig: str = "hoisted", choice: dict | None = None,
               split_above: int | None = None, order: str = "auto", lanes: bool = True) -> BuildFolder:
    """Write the build folder of a traced kernel into ``out_dir``; with ``out_dir`` None,
    into ``under/<prefix>-<digest of the files>``, so that kernels differing only in
    options the name does not show (iterations, mu, gains, anchors) never share a folder.
    ``batch``: N states per call, ``batch_trig`` its sin and cos (see "batched kernels"
    below), ``scalar_trig`` the scalar kernel's (:func:`context`); ``choice``: an automatic choice's record for the manifest (:mod:`gen.choose`);
    ``split_above``, ``order``, ``lanes``: see :func:`context`."""
    label = f"{tr.model.name}/{tr.algorithm.name}"
    with timed(progress, f"opcount {label}"):
        oc = _opcount(tr)
    with timed(progress, f"codegen {label}") as info:
        ctx = context(tr, prefix=prefix, avoid_stack=avoid_stack, opcount=oc, batch=batch, batch_trig=batch_trig,
                      scalar_trig=scalar_trig, choice=choice, split_above=split_above, order=order, lanes=lanes)
        files = render(ctx)
        if out_dir is None:
            digest = hashlib.sha256("".join(f"{n}\0{t}\0" for n, t in sorted(files.items())).encode())
            out_dir = Path(under) / f"{ctx['prefix']}-{digest.hexdigest()[:10]}"
        path = write(files, out_dir)
        info["detail"] = f"{sum(len(t) for t in files.values()) // 1000} kB of C"
    return BuildFolder(path, ctx["prefix"], ctx["manifest"], files)


def trace_for(robot, algorithm: str, constraints=None, *, progress=None, **options) -> Trace | DriverTrace:
    """Load ``robot``, resolve ``constraints``, check ``options`` and trace ``algorithm``,
    reporting the time: with a tolerance (``tol=...``) as an early-exit driver
    (:func:`gen.trace.trace_driver`)."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    options = algo.check_options(options)
    driver = options.get("tol") is not None
    with timed(progress, f"trace {model.name}/{algo.name}" + (" (early-exit driver)" if driver else "")):
        return (trace_driver if driver else trace)(model, algo, cset, **options)


def emit(robot, algorithm: str, constraints=None, *, out_dir, prefix: str | None = None,
         avoid_stack: bool = False, progress=None, batch: int | None = None, batch_trig: str = "vector",
         split_above: int | None = None, **options) -> BuildFolder:
    """Trace ``algorithm`` on ``robot`` and write its build folder into ``out_dir``
    (``batch=N``: the batched kernel, N states per call; ``algorithm`` ``auto`` or
    ``auto_osim``: the one :func:`gen.choose.choose` picks, recorded in the manifest;
    ``split_above``: see :func:`context`)."""
    check_batch(batch)
    robot, algorithm, choice = resolve(robot, algorithm, constraints, options)
    tr = trace_for(robot, algorithm, constraints, progress=progress, **options)
    return emit_trace(tr, out_dir, prefix=prefix, avoid_stack=avoid_stack, progress=progress, batch=batch,
                      batch_trig=batch_trig, choice=None if choice is None else choice.record(),
                      split_above=split_above)


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
