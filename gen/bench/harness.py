"""The timing harness (docs/DESIGN.md §5): one C program per benchmark, all implementations in the
same process and the same run, interleaved.

:func:`benchmark` builds the specialised kernel (:func:`gen.build`), renders
``harness.c.j2`` into a C program that links

* the specialised C of the build folder (``int <symbol>(in..., out..., work)``),
* the generic C (``rbg.c``, ``rbg_constrained.c``, ``rbg_delassus.c``, ``rbg_events.c``,
  with the robot embedded by :func:`gen.generic.serialize.model_to_c` and, for the
  proximal solvers, the Delassus algorithms, ``prox_lcp`` and ``impulse``, the constraint
  set by :func:`~gen.generic.serialize.constraints_to_c`, initialised once in ``main``
  and called with the specialised kernel's options: mu, its iteration count or, with a
  tolerance, the same early exit and cap; the impact map's restitution),
* the Pinocchio shim's objects (:mod:`gen.bench.pinshim`; the model is handed over as
  the Boost text archive of the ``pin.Model`` built in Python),
* on URDF models, ADAM's dynamics (``adam-robotics``, CasADi backend) as C from CasADi's
  code generator, for the rows with an ``adam_peer`` (:mod:`gen.bench.adam_peer`),
* on MJCF models, MuJoCo's C library (``libmujoco`` of the ``mujoco`` wheel, the same
  file loaded by ``mj_loadXML``) for the rows with a ``mujoco_peer``
  (:mod:`gen.bench.mujoco_peer`: its call sequence, overhead and the coordinate
  conversion),

compiles everything with the same flags (:data:`gen.bench.pinshim.BENCH_FLAGS`,
``-O3 -march=native -DNDEBUG``), writes ``n_states`` random states (fixed seed; ``q`` from
:meth:`gen.model.Model.random_q`, other inputs uniform in [-1, 1]) and runs it once:

1. **verification** -- every implementation on every state; outputs compared element by
   element with the specialised C's (layouts: the specialised C writes matrices
   column-major, the generic C and the shim row-major); the maximal absolute difference
   per output is reported and, relative to ``max(1, max |reference|)``, must stay below
   ``tolerance`` or :func:`benchmark` raises (a benchmark never times wrong code).  The
   specialised C is also checked against the NumPy reference (:func:`gen.run`) on the
   first ``numpy_states`` states.
2. **timing** -- ``warmup`` calls per implementation, then ``rounds`` rounds; a round
   times one batch of ``batch`` consecutive calls of each implementation (states cycled
   in order, each implementation with its own cursor over the same sequence) with
   ``clock_gettime(CLOCK_MONOTONIC)``; the implementations' order rotates every round.
   A sample is batch time / ``batch``; the report gives median, p10 and p90 over the
   samples, and ratios of medians (plus the median of per-round paired ratios).
   ``overhead_ns`` is the same loop around an empty call.

Pinocchio is timed as its API call alone (results stay in ``pinocchio::Data``; its CRBA
fills the upper triangle); the specialised and generic C write their outputs to caller
memory (full symmetric ``M``).  That favours Pinocchio by at most one copy of the output.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2
import numpy as np

from opcount.counter import count_function

from .. import pinref
from ..algorithms.proximal import DEFAULT_ITERATIONS, DEFAULT_MU
from ..api import get_algorithm, run
from ..build import build
from ..errors import RbdgenError
from ..generic import INCLUDE_DIR as GENERIC_DIR
from ..generic import SOURCES as GENERIC_SOURCES
from ..generic.serialize import constraints_to_c, model_to_c
from ..model import Model
from ..robots import load_robot
from ..version import __version__
from . import adam_peer, mujoco_peer, pinshim

HERE = Path(__file__).resolve().parent
TEMPLATE = "harness.c.j2"

IMPLEMENTATIONS = ("specialized", "generic", "pinocchio", "mujoco", "adam")
#: Each registry row names the Pinocchio shim function timed against it (``pin_peer``;
#: ``--pin-peer`` overrides).  Constrained rows: Pinocchio 4.1's ``constrainedABA`` and ``pv`` do not
#: compile (see pin_shim.cpp), so every proximal solver is timed against
#: ``constraintDynamics``, whose iterates equal rbdgen's (checked: solo12 3D feet
#: 1.5e-14, ur5 6D tool0 5.8e-12 relative at 3 iterations).  ``--pin-peer lcaba`` /
#: ``contact_aba`` time Pinocchio's maximal-coordinate solvers, but their conventions
#: differ (lcaba: agrees to ~2e-6 on 3D contacts, not on 6D; contactABA: its ``mu`` and
#: force conventions do not reproduce rbdgen's), so the agreement check usually refuses
#: them unless ``check=False`` / ``--no-check``.  The damped Delassus inverses are timed
#: against ``computeDampedDelassusMatrixInverse`` (PV-OSIMr, the same inversion lemma as
#: cABA-OSIM in Pinocchio's frame form), at the kernel's mu and unit weights; below
#: mu = 1e-4 its own rounding (~eps / mu) exceeds the cross-check's tolerance.
#: The impact map is timed against ``impulseDynamics``, which performs ONE damped solve
#: of the KKT system (``[[-mu, J], [J^T, M]] [-impulse; v+ - v-] = [-(1 + e) J v-; 0]``):
#: that is rbdgen's first proximal iterate from ``lam_0 = 0`` at the same mu (Sathya 2024
#: eq. 27b with ``k = -(1 + e) J v-``), not its K-th.  So the peer runs only where the two
#: compute the same thing (:func:`impulse_peer_settings`): a kernel of exactly one
#: iteration (Pinocchio at the kernel's mu), or a tolerance-driven kernel, i.e. the
#: converged map (Pinocchio at damping :data:`IMPULSE_EXACT_MU`, an exact solve); a
#: fixed K > 1 has no Pinocchio counterpart and the peer is skipped with that reason
#: (measured at mu = 1e-4, impulses relative: K = 1 agrees to 2e-11 on solo12's feet and
#: 3e-12 on talos's soles, K = 3 differs by 1e-4 and 5e-3; converged, 1e-10).
#: The derivative rows are timed against Pinocchio's analytical derivatives as a user calls
#: them: ``computeRNEADerivatives``, ``computeABADerivatives``, ``constraintDynamics`` +
#: ``computeConstraintDynamicsDerivatives`` (the forward solve the derivatives are taken at,
#: then the derivatives, timed together as rbdgen's kernel computes both) and
#: ``impulseDynamics`` + ``computeImpulseDynamicsDerivatives`` (one damped solve, as above).
CONSTRAINED_PEERS = ("constraint_dynamics", "contact_aba", "lcaba", "delassus_inv", "impulse_dynamics",
                     "constraint_dynamics_derivatives", "impulse_dynamics_derivatives")
#: constrained peers that run proximal iterations (their count is reported)
ITERATIVE_PEERS = ("constraint_dynamics", "contact_aba", "lcaba", "constraint_dynamics_derivatives")
IMPULSE_PEERS = ("impulse_dynamics", "impulse_dynamics_derivatives")
#: outputs that are bookkeeping, not results: never compared across implementations
NOT_COMPARED = ("iterations", "residual")
#: outputs a Pinocchio peer computes differently, so only its other outputs are checked:
#: pin 4.1's contactABA (its constrainedABA) leaves in ``contact_force`` the penalty-scaled
#: multiplier of its own update order, not the constraint force (its ddq agrees with
#: rbdgen's to the augmented Lagrangian's rounding)
PIN_NOT_COMPARED = {"contact_aba": ("lam",)}
#: Pinocchio's damped Delassus inverse has its own rounding below mu = 1e-4 (PV-OSIMr), so
#: the Delassus rows of the constrained suite run at this damping on every side
DELASSUS_MU = 1e-4
#: impulseDynamics' damping for the converged impact map (gen.pinref.EXACT_MU)
IMPULSE_EXACT_MU = 1e-12
DEFAULTS = {"n_states": 256, "rounds": 200, "batch": 100, "warmup": 2000, "seed": 0}
TOLERANCE = 1e-8                 # relative, unconstrained
TOLERANCE_CONSTRAINED = 1e-6     # relative, proximal solvers (Pinocchio iterates differently)


class BenchmarkMismatch(RbdgenError):
    """The implementations disagree: the benchmark refuses to report times."""


def cache_root() -> Path:
    root = Path(os.environ.get("RBDGEN_CACHE") or Path.home() / ".cache" / "rbdgen")
    return root / "bench"


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE)), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _fmt(x: float) -> str:
    r = repr(float(x))
    return r if ("." in r or "e" in r or "n" in r) else r + ".0"


def impulse_peer_settings(manifest: dict, options: dict) -> tuple[float | None, str | None]:
    """``(damping, None)`` for Pinocchio's ``impulseDynamics`` computing what the impulse
    kernel of ``manifest`` computes, or ``(None, reason)`` (see the notes above :data:`CONSTRAINED_PEERS`): one
    iteration = its single damped solve at the same mu; a tolerance = the converged map,
    an exact solve at :data:`IMPULSE_EXACT_MU`."""

    if manifest.get("tolerance") is not None:
        return IMPULSE_EXACT_MU, None
    # the impact map's iteration count is its traced `iterations` output; its derivative
    # row has none, its `iterations` option is the count
    iterations = manifest.get("iterations") or options.get("iterations", DEFAULT_ITERATIONS)
    if iterations == 1:
        return float(options.get("mu", DEFAULT_MU)), None
    return None, (f"Pinocchio's impulseDynamics performs one damped solve (rbdgen's first iterate), not "
                  f"{iterations} iterations: benchmark impulse with iterations=1 or a tolerance")


def make_states(model, inputs, n: int, seed: int) -> np.ndarray:
    """``n`` rows of the concatenated inputs: ``q`` a random configuration, the others
    uniform in [-1, 1] (fixed ``seed``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        parts = [model.random_q(rng) if name == "q" else rng.uniform(-1.0, 1.0, size) for name, size in inputs]
        rows.append(np.concatenate(parts))
    return np.ascontiguousarray(rows, dtype=np.float64)


def _stats(samples) -> dict:
    a = np.asarray(samples, dtype=float)
    return {"median_ns": float(np.median(a)), "p10_ns": float(np.percentile(a, 10)),
            "p90_ns": float(np.percentile(a, 90)), "mean_ns": float(a.mean()), "min_ns": float(a.min())}


def _run(cmd, what: str, cwd=None) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if res.returncode != 0:
        raise RbdgenError(f"{what} failed ({res.returncode}): {(res.stderr or res.stdout)[-1500:]}")
    return res.stdout


def _compile_program(workdir: Path, c_sources: list[Path], include_dirs: list[Path], link_with_pin: bool,
                     shim: pinshim.ShimBuild | None, shim_parts, progress,
                     extra_link: tuple[str, ...] = (), flags=None) -> tuple[Path, float]:
    """Compile the C sources (in parallel) with ``flags`` (default
    :data:`~gen.bench.pinshim.BENCH_FLAGS`) and link ``bench`` (with ``extra_link``, e.g.
    libmujoco); cached by content and flags."""
    flags = list(flags or pinshim.BENCH_FLAGS)
    h = hashlib.sha256()
    for src in c_sources:
        h.update(src.read_bytes())
    for d in include_dirs:
        for hdr in sorted(Path(d).glob("*.h")):
            h.update(hdr.read_bytes())
    h.update(json.dumps([flags, link_with_pin, str(shim.folder) if shim else "", sorted(shim_parts or []),
                         list(extra_link)]).encode())
    exe = workdir / f"bench-{h.hexdigest()[:16]}"
    if exe.exists():
        return exe, 0.0
    t0 = time.perf_counter()
    cc = os.environ.get("CC", "gcc")
    incs = [f"-I{d}" for d in include_dirs]
    with tempfile.TemporaryDirectory(prefix=".objs.", dir=workdir) as objdir:
        def one(indexed):
            k, src = indexed
            obj = Path(objdir) / f"{k}-{src.stem}.o"
            _run([cc, "-c", *flags, "-g0", *incs, str(src), "-o", str(obj)], f"compiling {src.name}")
            return obj

        with ThreadPoolExecutor(max(1, min(len(c_sources), os.cpu_count() or 1))) as pool:
            objs = list(pool.map(one, enumerate(c_sources)))
        tmp = Path(objdir) / "bench"
        if link_with_pin:
            cmd = [pinshim.cxx(), *flags, *map(str, objs), *shim.link_args(shim_parts), *extra_link, "-o", str(tmp)]
        else:
            cmd = [cc, *flags, *map(str, objs), *extra_link, "-lm", "-o", str(tmp)]
        _run(cmd, "linking the benchmark")
        os.replace(tmp, exe)                 # atomic: concurrent builders agree
    for old in workdir.glob("bench-*"):      # earlier builds of this program are stale
        if old != exe:
            try:
                old.unlink()
            except OSError:
                pass
    return exe, time.perf_counter() - t0


def benchmark(robot, algorithm: str, constraints=None, *, against=("generic", "pinocchio"),
              n_states: int = DEFAULTS["n_states"], rounds: int = DEFAULTS["rounds"],
              batch: int = DEFAULTS["batch"], warmup: int = DEFAULTS["warmup"], seed: int = DEFAULTS["seed"],
              pin_peer: str | None = None, tolerance: float | None = None, numpy_states: int = 4,
              check: bool = True, keep_outputs: bool = False, keep_dir=None, progress=None,
              **options) -> dict:
    """Benchmark ``algorithm`` on ``robot`` (specialised C vs the implementations in
    ``against``); returns the result dict (see the module docstring and
    :func:`gen.bench.report.rows`).  Raises :class:`BenchmarkMismatch` when the
    implementations disagree (``check=False``: report anyway, with ``verify.ok`` False).
    ``options`` go to the algorithm (e.g. ``iterations``, ``mu`` for proximal solvers).
    ``keep_outputs``: add ``states`` (n_states x inputs) and ``outputs`` (implementation ->
    output name -> array, one row per state, matrices as rows x cols in their natural
    orientation) to the result, for tests."""

    say = progress or (lambda s: None)
    against = tuple(a for a in against if a != "specialized")
    bad = [a for a in against if a not in IMPLEMENTATIONS]
    if bad:
        raise RbdgenError(f"unknown implementation(s) {', '.join(bad)} in --against "
                          f"(choose from generic, pinocchio, mujoco, adam)")
    if min(n_states, rounds, batch) < 1 or warmup < 0:
        raise RbdgenError("n_states, rounds and batch must be >= 1 and warmup >= 0")
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)

    # --- the specialised kernel ------------------------------------------------------------
    t0 = time.perf_counter()
    kernel = build(model, algorithm, cset, progress=progress, **options)
    t_build = time.perf_counter() - t0
    man = kernel.manifest
    fn = man["functions"][0]
    inputs = [(x["name"], int(x["size"])) for x in fn["inputs"]]
    reg_inputs = algo.inputs(model, cset)
    if [n for n, _ in inputs] != [n for n, _ in reg_inputs]:
        raise RbdgenError(f"manifest inputs {inputs} differ from the registry's {reg_inputs}")
    offsets, stride = [], 0
    for _, size in inputs:
        offsets.append(stride)
        stride += size
    outputs = [{"name": y["name"], "size": int(y["size"]), "rows": int(y.get("rows", y["size"])),
                "cols": int(y.get("cols", 1)), "compare": y["name"] not in NOT_COMPARED}
               for y in fn["outputs"]]
    impls = [{"name": "specialized", "key": "spec", "kind": "spec", "work_size": int(fn["work_size"]),
              "colmajor": man.get("layout", "column-major") == "column-major"}]
    skipped = {}

    # --- generic C ---------------------------------------------------------------------------

    generic_ctx = None
    if "generic" in against:

        generic = algo.generic
        mimic = [b.name for b in model.bodies if b.mimic is not None]
        if mimic and generic is not None:
            skipped["generic"] = f"the generic C has no mimic joints (joint '{mimic[0]}')"
            generic = None
        loop = [str(c) for c in cset.constraints if not c.anchored] if cset else []
        if loop and generic is not None and generic.anchored_only:
            skipped["generic"] = (f"the generic C's {algorithm} takes constraints relative to the world only "
                                  f"('{loop[0]}' closes a loop between two moving bodies)")
            generic = None
        # rbg_<name>(&model, [&constraints,] [&options,] [scalar,] inputs..., outputs..., work);
        # scalar: a damped Delassus inverse's mu, the impact map's restitution
        generic_ctx = None if generic is None else {
            "model_c": model_to_c(model, "bench_model"), "function": generic.entry,
            "constrained": False, "prox": False, "scalar_arg": None}
        work = None if generic is None else generic.work(model.nbodies, model.nv, cset.m if cset else 0)
        if generic is None:
            skipped.setdefault("generic", f"the generic C has no {algorithm} ({algo.generic_note})")
        elif algo.iterative:
            # the specialised kernel's proximal options (its manifest): mu, the iteration
            # count or, with a tolerance, the early exit's cap; tol -1 = none
            tol = man.get("tolerance")
            cap = man.get("max_iter") if tol is not None else man.get("iterations")
            generic_ctx.update({"constrained": True, "prox": True,
                                "constraints_c": constraints_to_c(model, cset, "bench_cons"),
                                "mu": _fmt(options.get("mu", DEFAULT_MU)), "max_iter": int(cap),
                                "tol": "-1.0" if tol is None else _fmt(tol)})
            if "restitution" in {o.name for o in algo.options}:
                generic_ctx["scalar_arg"] = _fmt(options.get("restitution", 0.0))
        elif algo.constrained:
            # the damped inverses take the kernel's mu; J M^-1 J^T takes none
            damped = "mu" in {o.name for o in algo.options}
            generic_ctx.update({"constrained": True, "constraints_c": constraints_to_c(model, cset, "bench_cons"),
                                "scalar_arg": _fmt(options.get("mu", DEFAULT_MU)) if damped else None})
        if generic_ctx is not None:
            impls.append({"name": "generic", "key": "gen", "kind": "generic", "work_size": int(work),
                          "colmajor": False})

    # --- Pinocchio ----------------------------------------------------------------------------
    pin_ctx, shim, shim_parts, archive = None, None, None, None
    if "pinocchio" in against:
        reason = None
        peer = pin_peer or algo.pin_peer
        try:
            if not pinref.available():
                reason = "pinocchio is not installed"
        except Exception as e:  # pragma: no cover
            reason = str(e)
        if reason is None:
            try:
                pinshim.pin_prefix()          # headers, Eigen (cmeel-eigen), boost
            except RbdgenError as e:
                reason = str(e)
        if reason is None and peer is None:
            reason = f"no Pinocchio peer for {algorithm}"
        if reason is None and peer not in pinshim.FUNCTION_PART:
            raise RbdgenError(f"unknown Pinocchio peer '{peer}' (choose from {', '.join(pinshim.FUNCTION_PART)})")
        if reason is None and algo.constrained != (peer in CONSTRAINED_PEERS):
            reason = f"Pinocchio's {peer} does not compute {algorithm}'s outputs"
        if reason is None and not algo.constrained and not pinref.supports(model, algorithm):
            reason = f"Pinocchio's {peer} needs depth-first joint numbering ({model.name} is not)"
        impulse_mu = None
        if reason is None and peer in IMPULSE_PEERS:
            impulse_mu, reason = impulse_peer_settings(man, options)
        if reason is None:
            pmodel = pinshim.pin_model(model)
            archive = pinshim.model_archive(pmodel)
            shim_parts = ("core", pinshim.FUNCTION_PART[peer])
            shim = pinshim.build_shim(shim_parts, progress=progress)
            pin_outputs = [{"name": y["name"]} for y in outputs if y["compare"]]
            pin_ctx = {"function": peer, "outputs": pin_outputs, "constrained": algo.constrained,
                       "iterative": peer in ITERATIVE_PEERS, "constraints": [], "mu": "1e-6", "max_iter": 0,
                       "accuracy": "0.0", "family": 0, "restitution": None}
            if algo.constrained:

                iters = man.get("iterations") or options.get("max_iter") or options.get("iterations") \
                    or DEFAULT_ITERATIONS
                pin_ctx.update({
                    "mu": _fmt(options.get("mu", DEFAULT_MU)), "max_iter": int(iters),
                    "accuracy": _fmt(options.get("tol", 0.0)), "family": pinshim.CONSTRAINED_FAMILY[peer],
                    "constraints": [{"type": t, "joint1": j1, "M1": [_fmt(x) for x in M1], "joint2": j2,
                                     "M2": [_fmt(x) for x in M2], "kp": _fmt(cset.gains(c)[0]),
                                     "kd": _fmt(cset.gains(c)[1])}
                                    for c, (t, j1, M1, j2, M2) in enumerate(pinshim.constraint_rows(cset))]})
                if impulse_mu is not None:          # one damped solve (impulse_peer_settings)
                    pin_ctx.update({"mu": _fmt(impulse_mu), "max_iter": 1,
                                    "restitution": _fmt(options.get("restitution", 0.0))})
            impls.append({"name": "pinocchio", "key": "pin", "kind": "pin", "work_size": None,
                          "colmajor": False, "function": peer})
        else:
            skipped["pinocchio"] = reason

    # --- MuJoCo (gen.bench.mujoco_peer) -------------------------------------------------------
    mj_ctx = None
    if "mujoco" in against:
        reason = mujoco_peer.unavailable(model, algo)
        if reason is None:
            mj_ctx = mujoco_peer.context(model, algo)
            impls.append({"name": "mujoco", "key": "mj", "kind": "mujoco", "work_size": None,
                          "colmajor": False, "calls": mj_ctx["calls"]})
        else:
            skipped["mujoco"] = reason

    # --- ADAM (gen.bench.adam_peer) --------------------------------------------------------------
    adam_fn = None
    if "adam" in against:
        reason = adam_peer.unavailable(model, algo)
        if reason is None:
            say(f"ADAM's {algo.adam_peer} of {model.name} (adam-robotics, CasADi)")
            try:
                adam_fn = adam_peer.function(model, algo, f"adam_{algorithm}")
            except Exception as e:        # noqa: BLE001 - a third-party library's failure is a skip reason
                reason = f"ADAM failed on {model.name}: {' '.join(str(e).split())[:200]}"
        if adam_fn is not None:
            impls.append({"name": "adam", "key": "adam", "kind": "adam", "work_size": None, "colmajor": True,
                          "quantity": algo.adam_peer, "ops": sum(count_function(adam_fn).values())})
        else:
            skipped["adam"] = reason
    adam_ctx = None if adam_fn is None else {
        "function": adam_fn.name(), "sz_arg": int(adam_fn.sz_arg()), "sz_res": int(adam_fn.sz_res()),
        "sz_iw": int(adam_fn.sz_iw()), "sz_w": int(adam_fn.sz_w())}

    # --- the program --------------------------------------------------------------------------
    program = f"bench_{fn['symbol']}"
    ctx = {"program": program, "robot": model.name, "algorithm": algorithm,
           "constraints": getattr(cset, "spec", None) if cset is not None else None,
           "impls": impls, "inputs": [{"name": n, "size": s, "offset": o} for (n, s), o in zip(inputs, offsets)],
           "outputs": outputs, "n_states": n_states, "stride": stride,
           "has_spec": True, "spec": {"header": man["header"], "symbol": fn["symbol"]},
           "has_generic": generic_ctx is not None, "generic": generic_ctx or {},
           "has_pin": pin_ctx is not None, "pin": pin_ctx or {},
           "has_mj": mj_ctx is not None, "mj": mj_ctx or {},
           "has_adam": adam_ctx is not None, "adam": adam_ctx or {}}
    source = _env().get_template(TEMPLATE).render(ctx)
    root = Path(keep_dir) if keep_dir else cache_root() / program
    root.mkdir(parents=True, exist_ok=True)
    harness_c = root / f"{program}.c"
    if not harness_c.exists() or harness_c.read_text() != source:
        harness_c.write_text(source)
    c_sources = [harness_c, *kernel.sources]
    if adam_fn is not None:
        c_sources.append(adam_peer.c_source(adam_fn, root / f"{adam_fn.name()}.c"))
    include_dirs = [kernel.path]
    if generic_ctx is not None:
        c_sources += list(GENERIC_SOURCES)
        include_dirs.append(GENERIC_DIR)
    extra_link = ()
    if mj_ctx is not None:
        include_dirs.append(mujoco_peer.package_dir() / "include")
        extra_link = tuple(mujoco_peer.link_args())
    say(f"compiling the benchmark program {program}")
    exe, t_compile = _compile_program(root, c_sources, include_dirs, pin_ctx is not None, shim, shim_parts, progress,
                                      extra_link)

    states = make_states(model, inputs, n_states, seed)
    if adam_fn is not None and adam_peer.zero_base_torque(model, algo):
        tau = offsets[[n for n, _ in inputs].index("tau")]
        states[:, tau:tau + 6] = 0.0         # ADAM's ABA: an unactuated base (adam_peer)
    with tempfile.TemporaryDirectory(prefix="rbdgen-bench-") as tmp:
        tmp = Path(tmp)
        (tmp / "states.bin").write_bytes(states.tobytes())
        args = [str(exe), str(tmp / "states.bin")]
        if pin_ctx is not None:
            (tmp / "model.txt").write_bytes(archive)
            args.append(str(tmp / "model.txt"))
        if mj_ctx is not None:
            args.append(str(model.source))
        args += [str(rounds), str(batch), str(warmup), str(tmp / "dump.bin")]
        say(f"running {program}: {rounds} rounds x {batch} calls x {len(impls)} implementations")
        t0 = time.perf_counter()
        raw = json.loads(_run(args, f"running {program}"))
        t_run = time.perf_counter() - t0
        dump = np.fromfile(tmp / "dump.bin", dtype=np.float64)

    # --- verification -------------------------------------------------------------------------
    per_state = sum(y["size"] for y in outputs) * len(impls)
    dump = dump.reshape(n_states, per_state) if per_state else dump.reshape(n_states, 0)
    ref_scale = max([1.0] + [float(v) for v in raw["verify"]["max_abs_ref"].values()])
    tol = tolerance if tolerance is not None else (TOLERANCE_CONSTRAINED if algo.constrained else TOLERANCE)
    verify = {"states": raw["verify"]["states"], "reference": "specialized", "tolerance": tol,
              "max_abs_ref": raw["verify"]["max_abs_ref"], "max_abs_diff": {}, "max_rel_diff": {},
              "failed_calls": {}}
    ok = True
    for entry in raw["verify"]["impls"]:
        name = entry["name"]
        verify["failed_calls"][name] = entry["failed_calls"]
        if name == "specialized":
            ok &= entry["failed_calls"] == 0
            continue
        skip = PIN_NOT_COMPARED.get(pin_ctx["function"], ()) if name == "pinocchio" else ()
        diffs = {k: (float("nan") if v < 0 else v) for k, v in entry["max_abs_diff"].items() if k not in skip}
        verify["max_abs_diff"][name] = diffs
        rel = max(diffs.values(), default=0.0) / ref_scale
        verify["max_rel_diff"][name] = rel
        ok &= bool(rel <= tol) and entry["failed_calls"] == 0
    # the specialised C against the NumPy reference
    spec_sizes = [y["size"] for y in outputs]
    np_diff = 0.0
    for s in range(min(numpy_states, n_states)):
        xs = np.split(states[s], np.cumsum([n for _, n in inputs])[:-1])
        ref = run(model, algorithm, *xs, constraints=cset, **options)
        ref = ref if isinstance(ref, tuple) else (ref,)
        got = np.split(dump[s, :sum(spec_sizes)], np.cumsum(spec_sizes)[:-1])
        for y, r, g in zip(outputs, ref, got):
            if not y["compare"]:
                continue
            g = g.reshape(y["rows"], y["cols"], order="F" if impls[0]["colmajor"] else "C")
            np_diff = max(np_diff, float(np.max(np.abs(g.reshape(np.shape(r)) - r), initial=0.0)))
    verify["numpy_states"] = min(numpy_states, n_states)
    verify["numpy_max_abs_diff"] = np_diff
    ok &= np_diff / ref_scale <= tol
    verify["ok"] = bool(ok)
    if raw.get("pinocchio_iterations") is not None:
        verify["pinocchio_iterations"] = raw["pinocchio_iterations"]
    kept = None
    if keep_outputs:
        kept, col = {}, 0
        for im in impls:
            kept[im["name"]] = {}
            for y in outputs:
                block = dump[:, col:col + y["size"]]
                col += y["size"]
                if y["cols"] > 1:
                    block = block.reshape(n_states, y["rows"], y["cols"], order="C") if not im["colmajor"] \
                        else block.reshape(n_states, y["cols"], y["rows"]).transpose(0, 2, 1)
                kept[im["name"]][y["name"]] = np.array(block)

    # --- statistics ---------------------------------------------------------------------------
    timing = {t["name"]: t for t in raw["timing"]}
    result_impls = {}
    for im in impls:
        t = timing[im["name"]]
        st = _stats(t["samples_ns"])
        st.update({"trials": rounds * batch, "samples": rounds, "rc": t["rc"]})
        if im["kind"] == "spec":
            st["symbol"] = fn["symbol"]
        if im["kind"] == "pin":
            st["function"] = im["function"]
        if im["kind"] == "mujoco":
            st["calls"] = im["calls"]
        if im["kind"] == "adam":
            st.update({"quantity": im["quantity"], "ops": im["ops"]})
        result_impls[im["name"]] = st
    spec_med = result_impls["specialized"]["median_ns"]
    ratios, paired = {}, {}
    spec_samples = np.asarray(timing["specialized"]["samples_ns"])
    for name in result_impls:
        if name == "specialized":
            continue
        ratios[f"{name}/specialized"] = result_impls[name]["median_ns"] / spec_med
        paired[f"{name}/specialized"] = float(np.median(np.asarray(timing[name]["samples_ns"]) / spec_samples))
    result = {
        "robot": model.name, "algorithm": algorithm,
        "constraints": ctx["constraints"], "nq": model.nq, "nv": model.nv, "m": int(man.get("m") or 0),
        "iterations": man.get("iterations"),
        "opcount": (fn.get("opcount") or {}).get("total"),
        **({"route": man["route"]} if man.get("route") else {}),
        "implementations": result_impls, "ratios": ratios, "ratios_paired": paired,
        "skipped": skipped, "verify": verify,
        "settings": {"n_states": n_states, "rounds": rounds, "batch": batch, "warmup": warmup, "seed": seed,
                     "flags": " ".join(pinshim.BENCH_FLAGS), "overhead_ns": raw["overhead_ns"],
                     "interleaved": True, "clock": "CLOCK_MONOTONIC"},
        "seconds": {"build_kernel": round(t_build, 3), "compile_program": round(t_compile, 3),
                    "run": round(t_run, 3)},
        "program": str(harness_c),
    }
    if raw.get("pinocchio_eigen_align") is not None:
        result["settings"]["pinocchio_eigen_align"] = raw["pinocchio_eigen_align"]
    if kept is not None:
        result["states"] = states
        result["outputs"] = kept
    if check and not ok:
        worst = ", ".join(f"{k}: {v:.3g}" for k, v in verify["max_rel_diff"].items())
        raise BenchmarkMismatch(
            f"{model.name}/{algorithm}: implementations disagree (max relative difference {worst}; "
            f"specialized vs NumPy {np_diff:.3g}; tolerance {tol:g}; failed calls {verify['failed_calls']}); "
            f"not reporting times")
    return result


def machine_info() -> dict:
    """CPU model and cores (/proc/cpuinfo), compilers and versions for the report."""
    cpu, cores = platform.processor() or platform.machine(), os.cpu_count()
    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        for line in text.splitlines():
            if line.startswith("model name") and cpu in ("", platform.machine(), platform.processor()):
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                have = set(line.split(":", 1)[1].split())
                flags = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f in have)
    except OSError:
        pass

    def version(mod):
        try:
            return __import__(mod).__version__
        except Exception:
            return None


    cc = os.environ.get("CC", "gcc")
    info = {"cpu": cpu, "cores": cores, "isa": flags, "machine": platform.machine(),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "cc": pinshim.compiler_version(cc), "cxx": pinshim.compiler_version(pinshim.cxx()),
            "flags": " ".join(pinshim.BENCH_FLAGS),
            "versions": {"rbdgen": __version__, "pinocchio": version("pinocchio"),
                         "casadi": version("casadi"), "numpy": version("numpy")}}
    try:
        load = os.getloadavg()
        info["loadavg"] = [round(x, 2) for x in load]
    except OSError:
        pass
    return info
