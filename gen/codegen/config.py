"""Every option and tuned threshold of code generation, in one frozen, validated object.

A :class:`CodegenConfig` is built once per kernel (:meth:`CodegenConfig.checked` raises
the refusals of options that do not go together, each a one-line
:class:`~gen.errors.RbdgenError`) and read by the passes of :mod:`gen.codegen`; no pass
reads a module constant for a decision.  A threshold's comment names the report that
measured it.  The defaults are the build every golden file under ``generated/`` is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace

from ..errors import RbdgenError

#: lanes per call a batched kernel accepts: GCC vector types hold a power of two elements
BATCH_SIZES = (2, 4, 8, 16)
#: how a batched kernel evaluates sin and cos: "vector" (default; within 2.3e-16 of glibc,
#: see gen.codegen.trig.routine) or "libm" (glibc per lane: with -ffp-contract=off on both,
#: every lane is then bit for bit the scalar kernel, which the augmented-Lagrangian solvers
#: need for agreement beyond their rounding floor eps / (mu lambda_min(M)))
BATCH_TRIG = ("vector", "libm")
#: how a scalar kernel evaluates sin and cos: "hoisted" (default) the joint angles' through
#: the batched kernels' routine, gen.cwriter.TRIG_LANES at a time (gen.cwriter.hoist_trig;
#: glibc's with avoid_stack or without lanes: plain C99); "vector" every one through that
#: routine on one lane (symbol ..._vtrig: with -ffp-contract=off on both, the lanes of a
#: batched kernel are bit for bit this kernel); "libm" glibc's (..._libmtrig).  glibc's
#: sincos was 26-58 % of a small arm's instructions; hoisted, ur5 crba went from 1079 to 638
#: instructions (75 -> 63 ns) and talos crba from 1520 to 917 ns, within 4e-14 of glibc's
#: values (bench/reports/2026-11-28-speed.md)
SCALAR_TRIG = ("hoisted", "vector", "libm")
#: the scalar kernel's instruction order: "auto" (the schedule where it pays, the
#: critical-path order below critical_below, lanes where they pay), "schedule" (always the
#: greedy scheduler, no lanes), "tape" (CasADi's order and work slots, no lanes),
#: "critical" (always gen.cwriter.critical_order, no lanes), as gen.bench.emission_order compares
ORDERS = ("auto", "schedule", "tape", "critical")
#: the environment variable whose value 0 makes ``canonical_frames`` off by default (to
#: compare kernels and op counts with and without it from the command line)
CANONICAL_FRAMES_ENV = "RBDGEN_CANONICAL_FRAMES"


def _canonical_default() -> bool:
    return os.environ.get(CANONICAL_FRAMES_ENV, "1").strip() != "0"


@dataclass(frozen=True)
class CodegenConfig:
    """What the back end is asked to write, and the thresholds its passes decide by.

    Options (the build request; part of the build cache key, :mod:`gen.buildcache`):
    ``prefix`` the kernel's symbol prefix (None: :func:`gen.emit.symbol_prefix`);
    ``avoid_stack`` intermediates in the caller's ``work`` instead of locals; ``batch`` N
    states per call (None: the scalar kernel); ``batch_trig`` / ``scalar_trig`` the sin and
    cos (:data:`BATCH_TRIG`, :data:`SCALAR_TRIG`); ``lanes`` isomorphic limbs as vector
    lanes where they pay; ``order`` (:data:`ORDERS`).  The other fields are thresholds, each
    with the measurement it rests on; a value other than its default enters the cache key
    (:meth:`request`).  The ``loop_*`` fields are read when tracing (:func:`gen.trace.trace`
    records the config on its :class:`~gen.trace.Trace`): the route choice of a derivative
    row weighs the products' loops before any code is written."""

    prefix: str | None = None
    avoid_stack: bool = False
    batch: int | None = None
    batch_trig: str = "vector"
    scalar_trig: str = "hoisted"
    lanes: bool = True
    order: str = "auto"
    #: trace in body frames that make the constant placement rotations sparse
    #: (gen.canonical_frames, the modified Denavit-Hartenberg choice: traced crba 10585 ->
    #: 5693 operations on icub, 2144 -> 1484 on anymal_c, 296 -> 234 on ur5); the model,
    #: its frames and every output are unchanged.  Default on, off with
    #: $RBDGEN_CANONICAL_FRAMES=0 (read when a config is made); off enters the cache key
    canonical_frames: bool = field(default_factory=_canonical_default)
    #: a tape longer than this many instructions is split into parts (gcc -O3 compiles
    #: talos aba, 16.5k instructions, in 4.8 s and 173 MB, and a split would cost run time
    #: for nothing; bench/reports/2026-11-26-compile-time.md)
    split_above: int = 20000
    #: instructions per part of a split tape: gcc's time per instruction is flat up to here
    #: and grows beyond; split kernels stay within 6 % of the unsplit run time (chain:300
    #: aba, parts of 2000 / 5000 / 10000 / 20000 compile in 15 / 15 / 27 / 38 s, 334 / 364 /
    #: 705 / 791 MB; bench/reports/2026-11-26-compile-time.md)
    part_size: int = 5000
    #: the greedy schedule replaces the tape order when the tape keeps at least this many
    #: values live on average ... (bench/reports/2026-11-26-emission-order.md: on the talos
    #: kernels, 450-490 live, it removes half the spills and runs 1.05-1.3x faster; on
    #: small ones, 60-210 live, the longer dependency chains cost what the spills saved:
    #: panda rnea 0.84x)
    schedule_above: float = 400
    #: ... and brings that below this fraction of it (a cut under 10 % changes little;
    #: the same report); lane plans are scheduled under the same fraction
    schedule_below: float = 0.9
    #: live values above which gen.cwriter.critical_order ends live ranges before it
    #: follows the longest chain (32 vector registers with AVX-512, 16 with AVX2; budgets
    #: of 16, 24 and 28 ran ur5 nle in 58.5, 58.4 and 58.4 ns, panda nle 20, 28, 36 in 88.8,
    #: 88.0, 87.8 ns; interleaved in one program, gcc 12 -O3 -march=native, Xeon with AVX-512)
    critical_budget: int = 28
    #: "auto" writes a function in gen.cwriter.critical_order when its tape keeps fewer
    #: than this many values live on average (measured, ns tape -> critical: ur5 and panda
    #: rnea, nle, crba, aba, 20-84 live, 0.91-1.01x; panda aba_derivatives' head, 282 live,
    #: 606 -> 1456; panda rnea_derivatives', 257 live, 452 -> 488)
    critical_below: float = 100
    #: a kernel whose one function is in the greedy schedule and one part asks GCC
    #: (with AVX) for its pressure-aware scheduling before register allocation
    #: (gen.codegen.pressure; interleaved A/B, -O3 -march=native: icub crba 537 -> 484 ns,
    #: icub nle 367 -> 315, g1 nle 326 -> 292, talos rnea 472 -> 445, 0-5 % on the small
    #: legged robots; tape-order icub aba 836 -> 1082 and split talos rnea_derivatives
    #: 7.0 -> 7.9 us, hence not those; bench/reports/2026-11-28-speed.md section 8)
    gcc_pressure: bool = True
    #: an output whose zero entries are at least this fraction of its entries is
    #: zero-filled by one loop first and only its other entries are stored (talos
    #: rnea_derivatives: 5466 of 51100 statements removed, 9.3 -> 9.2 us; solo12
    #: constrained_derivatives 7.0 -> 6.5 us; talos crba's 20 kB fill before its 1067
    #: non-zeros in bench/reports/2026-11-28-speed.md)
    zero_fill_fraction: float = 0.5
    #: a function gets lanes when they remove at least this fraction of its statements:
    #: below it the gathers and lane reads cost what the shared instructions save (the
    #: lanes' own loop on doubles: talos impulse_derivatives -14 % statements, 1.07x the
    #: time; solo12 -13 %, 0.94x; talos constrained_derivatives -23 %, 0.87x;
    #: aba_derivatives -28 %, 0.89x; not yet in a report)
    lanes_min_gain: float = 0.2
    #: a product (``be.product``, :class:`gen.trace.Product`) is formed by C loops after an
    #: SX head (:mod:`gen.products`) when its output has at least this many rows, or at
    #: least ``loop_min_rows`` rows and ``loop_madds`` multiply-adds (register-summed loops
    #: against straight-line code, measured on the talos and solo12 derivative kernels): 18
    #: rows: solo12 aba_derivatives 2.70 us straight-line, 2.15 as loops
    loop_rows: int = 16
    #: ... shorter columns than one vector of 8 hold too few independent sums: panda
    #: aba_derivatives (7 rows) 0.89 us straight-line, 0.94 as loops; solo12
    #: constrained_derivatives on two feet, a 6-row 1188 multiply-add output: 3.55 / 3.69 us
    loop_min_rows: int = 8
    #: ... and enough multiply-adds (straight-line, each is ~10 bytes of machine code read
    #: from L2 on every call): 12-row outputs as loops, solo12 impulse_derivatives (1104 and
    #: 1728 multiply-adds) 4.72 -> 4.42 us, solo12 constrained_derivatives on four feet
    #: (2160-2808) 5.75 -> 5.42 us, talos constrained_derivatives (7200 and more) 28.4 -> 27.0 us
    loop_madds: int = 1000
    #: the cost of an operation the products' loops run, relative to one of straight-line
    #: code, for the route choice (:func:`gen.trace.estimated_cost`; measured: talos
    #: aba_derivatives' loops run 228k operations in 4.0 us, 57 per ns, its head 67k in
    #: ~11.1 us, 6 per ns; talos impulse_derivatives on soles and hands, 583k operations
    #: mostly in loops, 36.8 us against the AD route's 514k straight-line ones, 117 us)
    loop_op_cost: float = 0.1
    #: the wrapper checks an output for inf / NaN only at the entries that can hold one
    #: (gen.codegen.output_check), run by run, each run one call gcc unrolls for its
    #: constant length; two runs at most this many entries apart are checked as one.
    #: The wrapper's own instructions per call (callgrind, x86-64-v3) at gaps 0 / 4 / 8 /
    #: 32: talos crba (40 / 32 / 30 / 7 runs) 1040 / 1212 / 1261 / 1267, anymal_c 313 /
    #: 347 / 361 / -, against 5109 and 721 checking every entry
    #: (bench/reports/2026-11-28-speed.md): merging does not pay once each run is unrolled
    check_gap: int = 0
    #: ... each by its own unrolled call up to this many runs per output, by one loop over
    #: a static table of its runs beyond (each unrolled run is ~40 bytes of the wrapper's
    #: machine code; talos crba has 40, g1 35, icub 33, anymal_c 18; rnea_second_order's
    #: tensors hundreds to thousands)
    check_max_runs: int = 64
    #: ... or when its runs skip fewer than this many entries per run: a run's own
    #: instructions cost what checking ~8 more entries in the whole-output loop does
    #: (panda crba, 27 of 49 entries in 6 runs: 141 instructions against 118 whole; ur5,
    #: 15 of 36 in 5: 98 against 94)
    check_run_entries: int = 8

    def __post_init__(self) -> None:
        self._refuse()

    def _refuse(self) -> None:
        """The refusals that need only the options (one line each, the same words as
        ``gen.emit.context`` and ``gen.build`` have always used)."""
        check_batch(self.batch)
        for name, value, choices in (("batch_trig", self.batch_trig, BATCH_TRIG),
                                     ("scalar_trig", self.scalar_trig, SCALAR_TRIG), ("order", self.order, ORDERS)):
            if value not in choices:
                raise RbdgenError(f"{name}={value!r}: choose from {', '.join(choices)}")
        if self.batch and self.avoid_stack:
            raise RbdgenError("a batched kernel keeps its intermediates in vector locals: avoid_stack does not apply")
        if self.batch and self.scalar_trig != SCALAR_TRIG[0]:
            raise RbdgenError("scalar_trig sets the scalar kernel's sin and cos; a batched kernel's are batch_trig")

    def check_kernel(self, driver: bool, runtime: bool) -> None:
        """The refusals that need the traced kernel: an early-exit ``driver`` or
        ``runtime`` parameters in a batched kernel."""
        if self.batch and driver:
            raise RbdgenError("a batched kernel runs a fixed number of iterations in every lane: build it with "
                              "iterations=K, not a tolerance")
        if self.batch and runtime:
            raise RbdgenError("a batched kernel takes no run-time parameters: build it with mu, the gains and the "
                              "weights built in (runtime_params off)")

    def with_(self, **changes) -> CodegenConfig:
        """A copy with ``changes`` (validated again)."""
        return replace(self, **changes)

    def request(self) -> dict:
        """The build request's ``codegen`` (the cache key's, :mod:`gen.buildcache`): the
        options, and under ``tuned`` the other fields that differ from their defaults (a
        default build keys as it always has)."""
        out = {"prefix": self.prefix, "avoid_stack": bool(self.avoid_stack), "batch": self.batch,
               "batch_trig": self.batch_trig, "scalar_trig": self.scalar_trig, "lanes": bool(self.lanes)}
        tuned = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name not in out and f.name != "canonical_frames" and getattr(self, f.name) != f.default}
        if not self.canonical_frames:
            tuned["canonical_frames"] = False
        return {**out, "tuned": tuned} if tuned else out

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def check_batch(batch) -> int | None:
    """``batch`` as lanes per call (None: the scalar kernel); a clear error otherwise."""
    if batch is None:
        return None
    if isinstance(batch, bool) or not isinstance(batch, int) or batch not in BATCH_SIZES:
        raise RbdgenError(f"batch={batch!r}: a batched kernel evaluates 2, 4, 8 or 16 states per call "
                          f"(batch=None builds the scalar kernel)")
    return batch
