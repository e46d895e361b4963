"""The way in, measured: microseconds per call of a kernel reached from Python, beside its
C function and Pinocchio's own Python binding, in one run (``python -m gen.bench.calls``).

Columns (one state; the Python calls are timed in turn in ``--rounds`` rounds of bursts
of about 0.2 ms each, their medians, as the C harness times its rounds: on a shared
machine the median leaves out the time spent waiting for a core, and the differences
between the calls hold):

* ``c_us``: the C function, timed in C by the benchmark harness (:mod:`gen.bench.harness`);
* ``call_us``: ``kernel(*inputs)`` (:mod:`gen.kernel`, the fast call where it compiled);
* ``out_us``: ``kernel(*inputs, out=...)`` into caller arrays;
* ``call_out_us``: ``kernel.call(*inputs, out=...)``, the same call through CPython's
  method call (keywords passed without a dict);
* ``batch_us``: per state, ``kernel(Q, V, T)`` of a ``batch=8`` kernel on 256 states;
* ``pin_us``: Pinocchio's Python binding of the same algorithm (``pinocchio.aba``,
  ``computeABADerivatives``, ``constraintDynamics`` with the kernel's damping and
  iterations, ``computeConstraintDynamicsDerivatives`` after it);
* ``casadi_map_us``: per evaluation, the kernel as ``gen.casadi_external`` (CasADi's
  external-function C API, no Python in the call) inside ``F.map(1000)``;
* ``casadi_jac_us``: per evaluation, its Jacobian ``jac_<name>`` (the derivative kernel,
  chart included) inside ``F.map(1000)``, on the rows that have one.  Both maps run on
  buffers bound once (``Function.buffer``): a call from Python with DM arguments would
  add the allocation of fresh outputs of 1000 x the output size (60 MB for talos's
  Jacobian) to every timing.  The map's outputs stream to memory (talos's Jacobian: 60
  kB per evaluation), where ``c_us`` writes one cache-hot output.

Overheads are ``call_us - c_us`` and ``out_us - c_us``; ``floor_us`` is a bare cffi call of
the C function with pointers cast beforehand, the least any Python call can cost here.
"""
from __future__ import annotations

import argparse
import sys
import timeit

import numpy as np

from .. import pinref
from ..algorithms.pinocchio import proximal_setup
from ..build import build
from ..algorithms import ALGORITHMS
from ..casadi_api import casadi_external
from ..constraint_spec import parse_constraints
from ..robots import load_robot
from ..table import render_table
from .harness import benchmark

#: seconds per timed burst of :func:`_interleaved`
BURST_S = 2e-4
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
#: (robot, algorithm, constraints) measured by default
CASES = [("panda", "aba", None), ("panda", "aba_derivatives", None), ("solo12", "aba", None),
         ("solo12", "aba_derivatives", None), ("talos", "aba", None), ("talos", "aba_derivatives", None),
         ("solo12", "prox_ltl", FEET), ("solo12", "constrained_derivatives", FEET)]
COLUMNS = ["robot", "algorithm", "c_us", "floor_us", "call_us", "out_us", "call_out_us", "batch_us", "pin_us",
           "casadi_map_us", "casadi_jac_us"]


def _interleaved(calls: dict, rounds: int, burst_s: float = BURST_S) -> dict:
    """``{name: median us per call}``: ``rounds`` rounds, each timing every call in turn
    over a burst of about ``burst_s`` seconds (its call count fixed beforehand) after one
    untimed call, the median over the rounds.  The C harness times the same way (short
    rounds, their median): on a machine shared with other jobs a burst of 0.2 ms mostly
    runs in one time slice, so the median leaves out the time the process waits for a
    core, and the calls timed in turn share whatever load there is (their differences
    hold).  The untimed call brings the code back into cache after the other calls'
    (talos aba_derivatives' is ~1 MB: after a batch call, a burst of ten calls paid its
    misses, floor_us 35 us against call_us 21 us)."""
    counts = {}
    for name, f in calls.items():
        f()
        once = timeit.timeit(f, number=3) / 3
        counts[name] = max(1, int(burst_s / max(once, 1e-9)))
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, f in calls.items():
            f()                 # untimed: its code and data back in cache after the other calls'
            times[name].append(timeit.timeit(f, number=counts[name]) / counts[name] * 1e6)
    return {name: float(np.median(t)) for name, t in times.items()}


def _pinocchio_call(model, algorithm, cset, kernel, ins):
    """A zero-argument function calling Pinocchio's Python binding of ``algorithm`` on
    ``ins``, or None where there is none here."""
    if not pinref.available():
        return None
    import pinocchio as pin
    pm = pinref.pin_model(model)
    pd = pm.createData()
    if algorithm == "aba":
        return lambda: pin.aba(pm, pd, *ins)
    if algorithm == "aba_derivatives":
        return lambda: pin.computeABADerivatives(pm, pd, *ins)
    cms, cds, settings = proximal_setup(pin, pm, pd, cset, dict(kernel.manifest.get("options") or {}))
    if algorithm == "prox_ltl":
        return lambda: pin.constraintDynamics(pm, pd, *ins, cms, cds, settings)
    if algorithm == "constrained_derivatives":
        def both():
            pin.constraintDynamics(pm, pd, *ins, cms, cds, settings)
            pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, settings)
        return both
    return None


def bound_map(f, columns: list[np.ndarray], n: int):
    """``f.map(n)`` bound to preallocated buffers (``Function.buffer``): returns (a
    zero-argument call evaluating the n columns, the outputs as nnz x n arrays).  One
    Python call per n evaluations and no allocation in it, so the time is CasADi's map
    and the function's C."""
    fm = f.map(n)
    buf, run = fm.buffer()
    args = [np.ascontiguousarray(np.asarray(a, dtype=float).ravel(order="F")) for a in columns]
    outs = [np.zeros(fm.nnz_out(i)) for i in range(fm.n_out())]
    for i, a in enumerate(args):
        buf.set_arg(i, memoryview(a))
    for i, o in enumerate(outs):
        buf.set_res(i, memoryview(o))
    keep = (fm, buf, args, outs)                # run() reads and writes these: they must outlive it

    def call():
        run()
        return keep

    call()
    return call, args, [o.reshape(-1, n, order="F") for o in outs]


def _casadi_map(model, algorithm, cset, ins, n: int = 1000, repeat: int = 21) -> tuple:
    """Per evaluation, ``gen.casadi_external`` and its Jacobian function inside
    ``F.map(n)`` (:func:`bound_map`; None where there is none), each map run ``repeat``
    times in turn (:func:`_interleaved`: one run per burst), the median."""
    try:
        f = casadi_external(model, algorithm, cset)
    except Exception:                           # noqa: BLE001  (a row without an external: no column)
        return None, None
    columns = [np.tile(np.reshape(x, (-1, 1)), (1, n)) for x in ins]
    run, _, outs = bound_map(f, columns, n)
    maps = {"value": run}
    if algorithm in ALGORITHMS and ALGORITHMS[algorithm].jacobian is not None:
        maps["jac"], *_ = bound_map(f.jacobian(), columns + outs, n)     # jac_<name>: inputs, then outputs
    t = _interleaved(maps, repeat)
    return t["value"] / n, t["jac"] / n if "jac" in maps else None


def measure(robot: str, algorithm: str, constraints=None, *, rounds: int = 201, repeat: int = 21,
            casadi: bool = True) -> dict:
    """One row of the table (module docstring): ``rounds`` of the C harness and of the
    Python calls (:func:`_interleaved`), ``repeat`` runs of each CasADi map."""
    model = load_robot(robot)
    cset = parse_constraints(model, constraints) if constraints else None
    kernel = build(model, algorithm, cset)
    rng = np.random.default_rng(0)
    ins = [model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)]
    c = benchmark(model, algorithm, cset, against=(), rounds=rounds)["implementations"]["specialized"]["median_ns"]
    row = {"robot": robot, "algorithm": algorithm, "c_us": c / 1e3}
    outs = kernel(*ins)
    outs = outs if isinstance(outs, tuple) else (outs,)
    fb = kernel.ffi.from_buffer
    bufs = [o if isinstance(o, np.ndarray) else np.empty(1) for o in outs]
    ptrs = [fb("double[]", x) for x in ins] + [fb("double[]", b if b.flags.c_contiguous else b.T) for b in bufs]
    ptrs.append(kernel._work())
    q, v, tau = ins                 # named, as a user calls (a *args call adds a tuple, **kw a dict)
    calls = {"floor_us": lambda: kernel._c(*ptrs), "call_us": lambda: kernel(q, v, tau)}
    if all(isinstance(o, np.ndarray) for o in outs):
        out = tuple(np.empty_like(o, order="F") for o in outs)
        calls["out_us"] = lambda: kernel(q, v, tau, out=out)
        calls["call_out_us"] = lambda: kernel.call(q, v, tau, out=out)
    k8 = build(model, algorithm, cset, batch=8) if constraints is None or algorithm == "prox_ltl" else None
    if k8 is not None:
        n = 256
        stacks = [np.stack([model.random_q(rng) for _ in range(n)]), rng.normal(size=(n, model.nv)),
                  rng.normal(size=(n, model.nv))]
        Q, V, T = stacks
        calls["batch_us"] = lambda: k8(Q, V, T)
    pin_call = _pinocchio_call(model, algorithm, cset, kernel, ins)
    if pin_call:
        calls["pin_us"] = pin_call
    row.update(_interleaved(calls, rounds))
    if "batch_us" in row:
        row["batch_us"] /= n
    row.setdefault("pin_us", None)
    row["casadi_map_us"], row["casadi_jac_us"] = \
        _casadi_map(model, algorithm, cset, ins, repeat=repeat) if casadi else (None, None)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gen.bench.calls", description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", metavar="ROBOT:ALGORITHM[:CONSTRAINTS]",
                   help="a case to measure (repeatable; default: the module's CASES)")
    p.add_argument("--rounds", type=int, default=201, help="rounds of the C harness and of the Python calls")
    p.add_argument("--repeat", type=int, default=21, help="runs of each CasADi map (1000 evaluations each)")
    p.add_argument("--no-casadi", action="store_true")
    p.add_argument("--format", choices=["md", "csv", "json"], default="md")
    args = p.parse_args(argv)
    cases = [tuple(c.split(":", 2)) + (None,) * (3 - len(c.split(":", 2))) for c in args.case] if args.case else CASES
    rows = []
    for robot, algorithm, constraints in cases:
        print(f"calls: {robot} {algorithm} {constraints or ''}", file=sys.stderr, flush=True)
        rows.append(measure(robot, algorithm, constraints, rounds=args.rounds, repeat=args.repeat,
                            casadi=not args.no_casadi))
    print(render_table(rows, COLUMNS, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
