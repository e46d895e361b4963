"""The timing harness (docs/DESIGN.md §5): one C program per benchmark, all implementations in the
same process and the same run, interleaved.

:func:`benchmark` builds the specialised kernel (:func:`gen.build`), asks each peer of
``against`` for its plan (:mod:`gen.bench.peers`: the generic C, Pinocchio through its C++
shim, MuJoCo's C library on MJCF models, ADAM's CasADi functions as C on URDF models; a
peer that does not compute the row on this model gives its reason, reported as skipped),
renders ``harness.c.j2`` into one C program linking the specialised C of the build folder
(``int <symbol>(in..., out..., work)``) and the peers' code, compiles everything with the same flags (:data:`gen.bench.pinshim.BENCH_FLAGS`,
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
On the rows of :data:`UPDATE_ROWS` the specialised side is timed as Pinocchio is, on
outputs kept across calls: ``<symbol>_update`` on outputs whose structural zeros
``<symbol>_zero_outputs`` wrote once (where the kernel has them; the result's
``implementations.specialized.entry`` names the function timed).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2
import numpy as np

from ..api import get_algorithm, run
from ..build import build
from ..errors import RbdgenError, run_tool
from ..model import Model
from ..robots import load_robot
from ..version import __version__
from . import pinshim
from .peers import PEERS, Bench

HERE = Path(__file__).resolve().parent
TEMPLATE = "harness.c.j2"

#: the implementations: rbdgen's specialised C and the peers (:data:`gen.bench.peers.PEERS`)
IMPLEMENTATIONS = ("specialized", *PEERS)
#: outputs that are bookkeeping, not results: never compared across implementations
NOT_COMPARED = ("iterations", "residual")
DEFAULTS = {"n_states": 256, "rounds": 200, "batch": 100, "warmup": 2000, "seed": 0}
#: rows whose specialised side is timed through ``<symbol>_update`` on outputs kept
#: across calls (:mod:`gen.codegen.zero_fill`): Pinocchio's second-order tensors live in
#: its Data, zeroed when the Data is made, and each call writes the tree's joint pairs
#: only; rbdgen's full entry writes talos' 4 MB of them (94 % zeros) on every call
UPDATE_ROWS = ("rnea_second_order",)
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
            run_tool([cc, "-c", *flags, "-g0", *incs, str(src), "-o", str(obj)], f"compiling {src.name}")
            return obj

        with ThreadPoolExecutor(max(1, min(len(c_sources), os.cpu_count() or 1))) as pool:
            objs = list(pool.map(one, enumerate(c_sources)))
        tmp = Path(objdir) / "bench"
        if link_with_pin:
            cmd = [pinshim.cxx(), *flags, *map(str, objs), *shim.link_args(shim_parts), *extra_link, "-o", str(tmp)]
        else:
            cmd = [cc, *flags, *map(str, objs), *extra_link, "-lm", "-o", str(tmp)]
        run_tool(cmd, "linking the benchmark")
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
    """Benchmark ``algorithm`` on ``robot`` (specialised C vs the peers in ``against``,
    :data:`gen.bench.peers.PEERS`); returns the result dict (see the module docstring and
    :func:`gen.bench.report.rows`).  Raises :class:`BenchmarkMismatch` when the
    implementations disagree (``check=False``: report anyway, with ``verify.ok`` False).
    ``options`` go to the algorithm (e.g. ``iterations``, ``mu`` for proximal solvers).
    ``keep_outputs``: add ``states`` (n_states x inputs) and ``outputs`` (implementation ->
    output name -> array, one row per state, matrices as rows x cols in their natural
    orientation) to the result, for tests."""
    against = tuple(a for a in against if a != "specialized")
    bad = [a for a in against if a not in PEERS]
    if bad:
        raise RbdgenError(f"unknown implementation(s) {', '.join(bad)} in --against "
                          f"(choose from {', '.join(PEERS)})")
    if min(n_states, rounds, batch) < 1 or warmup < 0:
        raise RbdgenError("n_states, rounds and batch must be >= 1 and warmup >= 0")
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    t0 = time.perf_counter()
    kernel = build(model, algorithm, cset, progress=progress, **options)
    t_build = time.perf_counter() - t0
    fn = kernel.manifest["functions"][0]
    inputs = [(x["name"], int(x["size"])) for x in fn["inputs"]]
    if [n for n, _ in inputs] != [n for n, _ in algo.inputs(model, cset)]:
        raise RbdgenError(f"manifest inputs {inputs} differ from the registry's {algo.inputs(model, cset)}")
    outputs = _outputs(fn)
    program = f"bench_{fn['symbol']}"
    root = Path(keep_dir) if keep_dir else cache_root() / program
    root.mkdir(parents=True, exist_ok=True)
    bench = Bench(model, algo, cset, kernel.manifest, options, outputs, root, pin_peer, progress)
    plans, skipped = {}, {}
    for name in (p for p in PEERS if p in against):
        plan = PEERS[name](bench)
        (skipped if isinstance(plan, str) else plans)[name] = plan
    spec = {"name": "specialized", "key": "spec", "kind": "spec", "work_size": int(fn["work_size"]),
            "colmajor": kernel.manifest.get("layout", "column-major") == "column-major",
            "entry": spec_entry(algo.name, fn)}
    impls = [spec] + [p.impl for p in plans.values()]
    exe, harness_c, t_compile = _program(bench, kernel, fn, program, inputs, impls, plans, n_states)
    states = make_states(model, inputs, n_states, seed)
    offsets = dict(zip([n for n, _ in inputs], np.cumsum([0] + [n for _, n in inputs])[:-1].tolist()))
    for plan in plans.values():
        if plan.adjust_states:
            plan.adjust_states(states, offsets)
    bench.say(f"running {program}: {rounds} rounds x {batch} calls x {len(impls)} implementations")
    raw, dump, t_run = _run_program(exe, states, plans, rounds, batch, warmup)
    tol = tolerance if tolerance is not None else (TOLERANCE_CONSTRAINED if algo.constrained else TOLERANCE)
    verify = _verify(bench, raw, dump, states, inputs, impls, plans, tol, numpy_states)
    result = {
        "robot": model.name, "algorithm": algorithm,
        "constraints": getattr(cset, "spec", None) if cset is not None else None,
        "nq": model.nq, "nv": model.nv, "m": int(kernel.manifest.get("m") or 0),
        "iterations": kernel.manifest.get("iterations"), "opcount": (fn.get("opcount") or {}).get("total"),
        **({"route": kernel.manifest["route"]} if kernel.manifest.get("route") else {}),
        **_statistics(raw, impls, plans, fn, rounds, batch),
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
    if keep_outputs:
        result["states"], result["outputs"] = states, _outputs_by_impl(dump, impls, outputs, n_states)
    if check and not verify["ok"]:
        worst = ", ".join(f"{k}: {v:.3g}" for k, v in verify["max_rel_diff"].items())
        raise BenchmarkMismatch(
            f"{model.name}/{algorithm}: implementations disagree (max relative difference {worst}; "
            f"specialized vs NumPy {verify['numpy_max_abs_diff']:.3g}; tolerance {tol:g}; "
            f"failed calls {verify['failed_calls']}); not reporting times")
    return result


def _outputs(fn: dict) -> list[dict]:
    """The kernel's outputs as the program writes them (``compare``: not bookkeeping)."""
    return [{"name": y["name"], "size": int(y["size"]), "rows": int(y.get("rows", y["size"])),
             "cols": int(y.get("cols", 1)), "compare": y["name"] not in NOT_COMPARED} for y in fn["outputs"]]


def _program(bench: Bench, kernel, fn: dict, program: str, inputs, impls, plans,
             n_states: int) -> tuple[Path, Path, float]:
    """Render ``harness.c.j2`` for the specialised kernel and the peers' plans, compile and
    link it (cached by content); returns the executable, the C file and the compile time."""
    offsets = np.cumsum([0] + [n for _, n in inputs])[:-1].tolist()
    cset = bench.cset
    entry = impls[0]["entry"]
    ctx = {"program": program, "robot": bench.model.name, "algorithm": bench.algo.name,
           "constraints": getattr(cset, "spec", None) if cset is not None else None,
           "impls": impls, "inputs": [{"name": n, "size": s, "offset": o} for (n, s), o in zip(inputs, offsets)],
           "outputs": bench.outputs, "n_states": n_states, "stride": int(sum(n for _, n in inputs)),
           "has_spec": True, "spec": {"header": bench.manifest["header"], "symbol": fn["symbol"], "entry": entry,
                                      "zero_outputs": None if entry == fn["symbol"] else fn["zero_outputs"]}}
    for block in ("generic", "pin", "mj", "adam"):
        plan = next((p for p in plans.values() if p.block == block), None)
        ctx[f"has_{block}"], ctx[block] = plan is not None, plan.context if plan else {}
    source = _env().get_template(TEMPLATE).render(ctx)
    harness_c = bench.root / f"{program}.c"
    if not harness_c.exists() or harness_c.read_text() != source:
        harness_c.write_text(source)
    sources = [harness_c, *kernel.sources] + [s for p in plans.values() for s in p.sources]
    include_dirs = [kernel.path] + [d for p in plans.values() for d in p.include_dirs]
    link = tuple(a for p in plans.values() for a in p.link)
    shim = next((p.shim for p in plans.values() if p.shim), None)
    bench.say(f"compiling the benchmark program {program}")
    exe, seconds = _compile_program(bench.root, sources, include_dirs, shim is not None, shim and shim[0],
                                    shim and shim[1], bench.progress, link)
    return exe, harness_c, seconds


def spec_entry(algorithm: str, fn: dict) -> str:
    """The specialised C function timed: ``<symbol>_update`` on the rows of
    :data:`UPDATE_ROWS` where the kernel has it, else ``<symbol>``."""
    return fn["update"] if algorithm in UPDATE_ROWS and "update" in fn else fn["symbol"]


def _run_program(exe: Path, states: np.ndarray, plans, rounds: int, batch: int, warmup: int):
    """Run the program once on ``states`` (the peers' run-time files in PEERS order);
    returns its JSON report, the outputs it dumped and the run's wall time."""
    with tempfile.TemporaryDirectory(prefix="rbdgen-bench-") as tmp:
        tmp = Path(tmp)
        (tmp / "states.bin").write_bytes(states.tobytes())
        args = [str(exe), str(tmp / "states.bin")]
        for plan in plans.values():
            for a in plan.args:
                if isinstance(a, tuple):
                    (tmp / a[0]).write_bytes(a[1])
                    a = str(tmp / a[0])
                args.append(a)
        args += [str(rounds), str(batch), str(warmup), str(tmp / "dump.bin")]
        t0 = time.perf_counter()
        raw = json.loads(run_tool(args, f"running {exe.name}"))
        t_run = time.perf_counter() - t0
        dump = np.fromfile(tmp / "dump.bin", dtype=np.float64)
    return raw, dump, t_run


def _verify(bench: Bench, raw: dict, dump, states, inputs, impls, plans, tol: float, numpy_states: int) -> dict:
    """Every peer against the specialised C (the program's comparison, the outputs a peer
    computes differently left out), and the specialised C against NumPy on the first
    ``numpy_states`` states; ``ok`` when all are within ``tol`` relative to the largest
    reference value and no call failed."""
    n_states = len(states)
    outputs = bench.outputs
    per_state = sum(y["size"] for y in outputs) * len(impls)
    dump = dump.reshape(n_states, per_state) if per_state else dump.reshape(n_states, 0)
    ref_scale = max([1.0] + [float(v) for v in raw["verify"]["max_abs_ref"].values()])
    verify = {"states": raw["verify"]["states"], "reference": "specialized", "tolerance": tol,
              "max_abs_ref": raw["verify"]["max_abs_ref"], "max_abs_diff": {}, "max_rel_diff": {},
              "failed_calls": {}}
    ok = True
    for entry in raw["verify"]["impls"]:
        name = entry["name"]
        verify["failed_calls"][name] = entry["failed_calls"]
        ok &= entry["failed_calls"] == 0
        if name == "specialized":
            continue
        diffs = {k: (float("nan") if v < 0 else v) for k, v in entry["max_abs_diff"].items()
                 if k not in plans[name].not_compared}
        verify["max_abs_diff"][name] = diffs
        verify["max_rel_diff"][name] = max(diffs.values(), default=0.0) / ref_scale
        ok &= bool(verify["max_rel_diff"][name] <= tol)
    spec_sizes = [y["size"] for y in outputs]
    np_diff = 0.0
    for s in range(min(numpy_states, n_states)):
        xs = np.split(states[s], np.cumsum([n for _, n in inputs])[:-1])
        ref = run(bench.model, bench.algo.name, *xs, constraints=bench.cset, **bench.options)
        ref = ref if isinstance(ref, tuple) else (ref,)
        got = np.split(dump[s, :sum(spec_sizes)], np.cumsum(spec_sizes)[:-1])
        for y, r, g in zip(outputs, ref, got):
            if y["compare"]:
                g = g.reshape(y["rows"], y["cols"], order="F" if impls[0]["colmajor"] else "C")
                np_diff = max(np_diff, float(np.max(np.abs(g.reshape(np.shape(r)) - r), initial=0.0)))
    verify.update({"numpy_states": min(numpy_states, n_states), "numpy_max_abs_diff": np_diff})
    verify["ok"] = bool(ok and np_diff / ref_scale <= tol)
    if raw.get("pinocchio_iterations") is not None:
        verify["pinocchio_iterations"] = raw["pinocchio_iterations"]
    return verify


def _statistics(raw: dict, impls, plans, fn: dict, rounds: int, batch: int) -> dict:
    """Per implementation: median, p10, p90, mean, min of the per-call samples and what its
    plan reports; ratios of medians to the specialised C's and medians of paired ratios."""
    timing = {t["name"]: t for t in raw["timing"]}
    result = {}
    for im in impls:
        t = timing[im["name"]]
        st = _stats(t["samples_ns"])
        st.update({"trials": rounds * batch, "samples": rounds, "rc": t["rc"]})
        st.update({"symbol": fn["symbol"], "entry": im["entry"]} if im["name"] == "specialized"
                  else plans[im["name"]].report)
        result[im["name"]] = st
    spec_med = result["specialized"]["median_ns"]
    spec_samples = np.asarray(timing["specialized"]["samples_ns"])
    others = [n for n in result if n != "specialized"]
    return {"implementations": result,
            "ratios": {f"{n}/specialized": result[n]["median_ns"] / spec_med for n in others},
            "ratios_paired": {f"{n}/specialized": float(np.median(np.asarray(timing[n]["samples_ns"]) / spec_samples))
                              for n in others}}


def _outputs_by_impl(dump, impls, outputs, n_states: int) -> dict:
    """``{implementation: {output: array}}`` from the dump, one row per state, matrices as
    rows x cols in their natural orientation."""
    per_state = sum(y["size"] for y in outputs) * len(impls)
    dump = dump.reshape(n_states, per_state) if per_state else dump.reshape(n_states, 0)
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
    return kept


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
