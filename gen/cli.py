"""The ``rbdgen`` command line (docs/DESIGN.md §4).

Commands: ``robots`` (list; ``--frames ROBOT`` lists a robot's frames), ``opcount``,
``build``, ``verify`` (compiled C vs NumPy vs Pinocchio on random states) and ``demo``
(op counts, emission, compilation and verification of every unconstrained algorithm on
:data:`DEFAULT_ROBOT`).  Every command that prints a table takes ``--format md|csv|json``.
Progress with timings goes to stderr (``--quiet`` silences it).  User errors print one
line ``rbdgen: error: ...`` to stderr and exit with status 2; failed verifications
exit with status 1.

Wherever a constraint spec is accepted (``opcount``, ``build``, ``verify``),
``--baumgarte KP,KD`` (position constraints), ``--kv KV`` (velocity constraints ``3Dv``,
``6Dv``) and ``--weights W1,...`` (one per constraint) complete it into one
:class:`~gen.constraints.ConstraintSet` (``gen.parse_constraints``) used by every kernel
of the command.  ``verify`` compares with Pinocchio wherever :mod:`gen.pinref` has a
reference, constrained algorithms included (same gains, ``mu`` and iteration count).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from opcount.report import render as render_opcount

from . import pinref
from .algorithms import ALGORITHMS
from .algorithms.registry import ROUTES
from .api import get_algorithm
from .bench.cli import add_parser as add_bench_parser
from .build import build
from .casadi_api import casadi_library
from .choose import AUTO, choose, is_auto
from .constraint_spec import parse_constraints, spec_names
from .crocoddyl_cpp import write_header as write_crocoddyl_header
from .emit import timed, write
from .errors import RbdgenError
from .robots import load_robot
from .robots.named import NAMED_ROBOTS
from .robots.synthetic import SYNTHETIC
from .scaling import add_parser as add_scaling_parser
from .simulate import add_parser as add_simulate_parser
from .table import FORMATS, render_table
from .verify import VERIFY_TOL, note, passed, tolerances, verify_kernel
from .version import __version__

DEFAULT_ROBOT = "solo12"
FALLBACK_ROBOT = "humanoid30"        # when example-robot-data is not installed
DEMO_CONSTRAINTS = {"solo12": "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT",
                    "humanoid30": "6D:left_foot,6D:right_foot"}


# --- output --------------------------------------------------------------------------------

class _Progress:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"rbdgen: {msg}", file=sys.stderr, flush=True)


# --- helpers -------------------------------------------------------------------------------

def _algorithms(spec: str, constraints=None, model=None) -> list[str]:
    """The algorithms of ``-a`` (names, comma lists, ``all``).  ``all`` without a
    constraint set leaves the constrained algorithms out, and with one the rows that do
    not apply to it (the row's ``refuses``), and says so on stderr."""
    names = []
    for name in spec.split(","):
        name = name.strip()
        if name == "all":
            names += [a for a, alg in ALGORITHMS.items() if constraints or not alg.constrained]
            if not constraints:
                left = [a for a, alg in ALGORITHMS.items() if alg.constrained]
                print(f"rbdgen: note: -a all without -c leaves out the constrained algorithms "
                      f"({', '.join(left)}); give a constraint set to include them", file=sys.stderr)
            elif model is not None:
                for a in [a for a in names if ALGORITHMS[a].refuses]:
                    why = ALGORITHMS[a].refuses(model, constraints)
                    if why:
                        names.remove(a)
                        print(f"rbdgen: note: -a all leaves out {a}: {why}", file=sys.stderr)
        else:
            names.append(get_algorithm(name).name)
    return list(dict.fromkeys(names))


OPTION_FLAGS = ("iterations", "tol", "max_iter", "mu", "restitution", "route", "runtime_params")


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _given_options(args) -> dict:
    given = {k: v for k in OPTION_FLAGS if (v := getattr(args, k, None)) is not None}
    if "max_iter" in given and "tol" not in given:
        raise RbdgenError("--max-iter caps the early-exit driver: give it with --tol (or use --iterations K)")
    return given


def _algorithm_options(algorithm: str, args) -> dict:
    """``--iterations``, ``--tol``, ``--max-iter``, ``--mu``, ``--restitution`` as the
    options of one algorithm, checked by the row's one option checker (an option the
    algorithm does not take is an error naming its options)."""
    return ALGORITHMS[algorithm].check_options(_given_options(args), spell=_flag)


def _options_of(algorithms: list[str], args) -> dict[str, dict]:
    """Per algorithm, the options it takes among those given (one algorithm: every given
    option must be its own); an option none of them takes is an error."""
    if len(algorithms) == 1:
        return {algorithms[0]: _algorithm_options(algorithms[0], args)}
    given = _given_options(args)
    out = {}
    for name in algorithms:
        row = ALGORITHMS[name]
        out[name] = row.check_options({k: v for k, v in given.items() if any(o.name == k for o in row.options)},
                                      spell=_flag)
    unused = [_flag(k) for k in given if not any(k in o for o in out.values())]
    if unused:
        raise RbdgenError(f"{', '.join(unused)} applies to none of {', '.join(algorithms)}")
    return out


def _solver_option_args(s) -> None:
    """The algorithm options shared by opcount, build and verify."""
    s.add_argument("--iterations", type=int, help="fixed iteration count (proximal solvers; default 3)")
    s.add_argument("--tol", type=float,
                   help="early-exit C driver: iterate until |J ddq - a_c*|_inf <= TOL (proximal solvers)")
    s.add_argument("--max-iter", type=int, help="iteration cap of the driver (with --tol)")
    s.add_argument("--mu", type=float, help="proximal damping, Pinocchio's sense (Sathya's penalty is 1/mu): "
                                            "proximal solvers and damped Delassus inverses")
    s.add_argument("--restitution", type=float, help="impact map: coefficient of restitution e in [0, 1] "
                                                     "(default 0, plastic)")
    s.add_argument("--runtime-params", action="store_const", const=True,
                   help="proximal solvers: take mu, the Baumgarte gains [Kp, Kd, Kv] and the constraint weights as "
                        "inputs of every call (retune without rebuilding; --mu, --baumgarte, --kv, --weights give "
                        "the documented defaults)")
    s.add_argument("--route", choices=ROUTES, help="derivative algorithms: analytical algorithm or automatic "
                                                   "differentiation of the value algorithm (default: the one "
                                                   "of lower estimated cost; the manifest records which)")


def constraint_set(model, args):
    """The :class:`~gen.constraints.ConstraintSet` of ``--constraints`` with
    ``--baumgarte KP,KD``, ``--kv`` and ``--weights`` (None without ``--constraints``),
    parsed once for every kernel of the command."""
    gains = {k: v for k, v in (("--baumgarte", getattr(args, "baumgarte", None)), ("--kv", getattr(args, "kv", None)),
                               ("--weights", getattr(args, "weights", None))) if v is not None}
    if not args.constraints:
        if gains:
            raise RbdgenError(f"{', '.join(gains)} given without --constraints: "
                              f"gains and weights belong to a constraint set (-c SPEC)")
        return None
    Kp, Kd = gains.get("--baumgarte", (0.0, 0.0))
    return parse_constraints(model, args.constraints, Kp=Kp, Kd=Kd, Kv=gains.get("--kv", 0.0),
                             weights=gains.get("--weights"))


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a NumPy seed)."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return n


def _numbers(count: int | None, form: str):
    """argparse type: comma-separated numbers (``count`` of them when given)."""
    def parse(text: str) -> tuple[float, ...]:
        try:
            xs = tuple(float(x) for x in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {form}, got '{text}'") from None
        if count is not None and len(xs) != count:
            raise argparse.ArgumentTypeError(f"expected {form}, got '{text}'")
        return xs
    return parse


# --- commands ------------------------------------------------------------------------------

def cmd_robots(args) -> int:
    if args.frames:
        model = _load(args, args.frames)
        rows = [{"frame": n, "kind": f.kind, "body": model.bodies[f.body].link if f.body >= 0 else "world"}
                for n, f in zip(spec_names(model), model.frames)]
        print(render_table(rows, ["frame", "kind", "body"], args.format))
        return 0
    if args.floating_base or args.lock or args.mimic:
        raise RbdgenError("--floating-base, --lock and --mimic describe the robot of --frames ROBOT")
    rows = []
    for name, (_, _, _, desc) in NAMED_ROBOTS.items():
        try:
            m = load_robot(name)
            nq, nv = m.nq, m.nv
        except RbdgenError:
            nq = nv = None
            desc += " (unavailable: needs example-robot-data)"
        rows.append({"robot": name, "kind": "named", "nq": nq, "nv": nv, "description": desc})
    for spec, desc in SYNTHETIC.items():
        nq = nv = None
        if ":" not in spec:
            m = load_robot(spec)
            nq, nv = m.nq, m.nv
        rows.append({"robot": spec, "kind": "synthetic", "nq": nq, "nv": nv, "description": desc})
    print(render_table(rows, ["robot", "kind", "nq", "nv", "description"], args.format))
    return 0


AUTO_HELP = ("automatic choice: " + ", ".join(f"'{k}' ({what})" for k, (what, _) in AUTO.items())
             + ", the cheapest applicable formulation by weighted op count (gen/choose.py)")
CHOICE_COLUMNS = ["algorithm", "status", "ops", "cost", "reason"]


def _report_choice(choice, args) -> None:
    """The automatic choice and every candidate's estimate or exclusion, on stderr."""
    if not args.quiet:
        print(f"rbdgen: -a {choice.auto}: chose {choice.chosen} (weighted op count, gen/choose.py)\n"
              + render_table(choice.rows(), CHOICE_COLUMNS, "md"), file=sys.stderr, flush=True)


def cmd_opcount(args) -> int:
    model = _load(args)
    cset = constraint_set(model, args)
    if is_auto(args.algorithm):
        choice = choose(model, args.algorithm, cset, **_given_options(args))
        _report_choice(choice, args)
        print(render_opcount(model, [choice.chosen], args.format, constraints=cset,
                             options_of={choice.chosen: choice.options}))
        return 0
    algorithms = _algorithms(args.algorithm, cset, model)
    print(render_opcount(model, algorithms, args.format, constraints=cset, options_of=_options_of(algorithms, args)))
    return 0


def cmd_build(args) -> int:
    progress = _Progress(args.quiet)
    model = _load(args)
    cset = constraint_set(model, args)
    auto = is_auto(args.algorithm)
    opts = _given_options(args) if auto else _algorithm_options(args.algorithm, args)
    t0 = time.perf_counter()
    k = build(model, args.algorithm, cset, out_dir=args.out, flags=args.flags, prefix=args.prefix,
              progress=progress, avoid_stack=args.avoid_stack, batch=args.batch, lanes=not args.no_lanes, **opts)
    f = k.function
    row = {**({"algorithm": k.algorithm.name} if auto else {}), "symbol": f["symbol"], "ops": (f["opcount"] or {}).get("total"), "batch": k.batch or 1,
           "work_size": f["work_size"], "folder": str(k.path), "header": k.header_path.name,
           "seconds": round(time.perf_counter() - t0, 2)}
    if args.casadi_hessian and not args.casadi:
        raise RbdgenError("--casadi-hessian adds the Hessian to the --casadi library: give --casadi too")
    if args.casadi:
        row["casadi"] = _casadi_build(model, k.algorithm.name, cset, args, progress, opts)
    if args.crocoddyl:                 # the C++ crocoddyl action model (gen/crocoddyl_cpp.py)
        row["crocoddyl"] = write_crocoddyl_header(k, args.out).name
    print(render_table([row], list(row), args.format))
    return 0


def _casadi_build(model, algorithm, cset, args, progress, opts) -> str:
    """--casadi: the CasADi library (gen.casadi_api.casadi_library: value and derivative
    kernels, jac_<name>) written into --out as lib<name>.so with its sources (the
    derivative kernel's files and <name>_jacobian.c beside the folder's own); returns its
    casadi.external name."""
    if args.batch or args.avoid_stack or args.prefix:
        raise RbdgenError("--casadi builds the default scalar kernel: leave out --batch, --avoid-stack and --prefix")
    name, lib, files = casadi_library(model, algorithm, cset, flags=args.flags, progress=progress,
                                      hessian=args.casadi_hessian, **opts)
    write(files, args.out)
    shutil.copyfile(lib, Path(args.out) / f"lib{name}.so")
    return name


def _load(args, robot=None):
    return load_robot(robot or args.robot, floating_base=getattr(args, "floating_base", False),
                      lock_joints=getattr(args, "lock", ()), mimic=getattr(args, "mimic", False))


def _verify_rows(model, algorithms, cset, args, progress, out_root=None) -> list[dict]:
    rows = []
    options_of = _options_of(algorithms, args)
    for name in algorithms:
        cons = cset if ALGORITHMS[name].constrained else None
        t0 = time.perf_counter()
        out_dir = None if out_root is None else Path(out_root) / name
        k = build(model, name, cons, out_dir=out_dir, flags=args.flags, progress=progress, **options_of[name])
        build_s = time.perf_counter() - t0
        with timed(progress, f"verify {model.name}/{name} on {args.samples} random states"):
            w = verify_kernel(k, args.samples, args.seed)
        route = (k.manifest.get("route") or {}).get("used")
        tols = tolerances(name, args.rtol, w["kappa"], route)
        rows.append({"algorithm": name, "ops": (k.function["opcount"] or {}).get("total"),
                     "err_c_numpy": w["c_numpy"], "err_c_pinocchio": w["c_pinocchio"],
                     "err_numpy_pinocchio": w["numpy_pinocchio"], "err_c_mujoco": w["c_mujoco"],
                     "kappa": max(w["kappa"].values()) if w["kappa"] else None,
                     "rtol": tols["c_numpy"], "rtol_pinocchio": tols["c_pinocchio"],
                     "status": "ok" if passed(name, w, args.rtol, route) else "FAIL", "route": route,
                     "note": note(name, args.rtol, w["kappa"], route),
                     "build_s": round(build_s, 2), "folder": str(k.path)})
    return rows


def cmd_verify(args) -> int:
    progress = _Progress(args.quiet)
    model = _load(args)
    cset = constraint_set(model, args)
    algorithms = _algorithms(args.algorithm, cset, model)
    rows = _verify_rows(model, algorithms, cset, args, progress)
    cols = ["algorithm", "err_c_numpy", "err_c_pinocchio", "err_numpy_pinocchio", "err_c_mujoco", "kappa", "rtol",
            "rtol_pinocchio", "status", "note"]
    if all(r["err_c_mujoco"] is None for r in rows):
        cols.remove("err_c_mujoco")
    return _report(rows, cols, args)


def _report(rows, cols, args) -> int:
    """Print the verification table; 1 (and the failing algorithms on stderr) if any failed."""
    print(render_table(rows, cols, args.format))
    bad = [r["algorithm"] for r in rows if r["status"] != "ok"]
    if bad:
        iterated = [r["algorithm"] for r in rows if r["status"] != "ok" and r.get("route") == "ad"
                    and any(o.name == "iterations" for o in ALGORITHMS[r["algorithm"]].options)]
        hint = (f"; {', '.join(iterated)}: the AD route differentiates the K-th proximal iterate, not converged "
                f"on these states (raise --iterations, or take the analytical route)") if iterated else ""
        print(f"rbdgen: FAIL: verification failed for {', '.join(bad)} (rtol column){hint}", file=sys.stderr)
        return 1
    print(f"rbdgen: PASS: {len(rows)} kernel(s) verified", file=sys.stderr)
    return 0


def cmd_demo(args) -> int:
    progress = _Progress(args.quiet)
    robot = args.robot
    try:
        model = load_robot(robot)
    except RbdgenError as e:
        if robot != DEFAULT_ROBOT:
            raise
        print(f"rbdgen: {DEFAULT_ROBOT} is unavailable ({e}); falling back to {FALLBACK_ROBOT}",
              file=sys.stderr)
        model = load_robot(FALLBACK_ROBOT)

    if not pinref.available():
        progress("Pinocchio is not installed: the Pinocchio column is n/a (pip install pin)")
    args.constraints = DEMO_CONSTRAINTS.get(model.name)
    progress(f"demo on {model.describe()}, constrained solvers with {args.constraints or 'no constraints'}, "
             f"build folders under {args.out}")
    t0 = time.perf_counter()
    cset = constraint_set(model, args)
    algorithms = _algorithms("all", cset, model)
    # the derivatives of the constrained solve and of the impact map are kernels of 100k+
    # operations whose -O3 compile takes minutes: the demo names them instead of building
    slow = [a for a in algorithms if ALGORITHMS[a].ad is not None and ALGORITHMS[a].constrained]
    if slow:
        progress(f"left out of the demo (minutes to compile): {', '.join(slow)}; e.g. rbdgen verify "
                 f"{model.name} -a {slow[0]} -c {args.constraints}")
    algorithms = [a for a in algorithms if a not in slow]
    rows = _verify_rows(model, algorithms, cset, args, progress, out_root=args.out)
    progress(f"demo done in {time.perf_counter() - t0:.1f} s")
    return _report(rows, ["algorithm", "ops", "err_c_numpy", "err_c_pinocchio", "kappa", "rtol", "status", "build_s",
                          "folder", "note"], args)


# --- parser --------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``rbdgen: error: ...``, exit status 2."""
    def error(self, message):
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _common(p, *, table=True):
    if table:
        p.add_argument("--format", choices=FORMATS, default="md", help="table format (default: md)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")


def _constraint_args(p):
    p.add_argument("--constraints", "-c", help="constraint spec, e.g. 6D:left_sole_link,6D:right_sole_link")
    p.add_argument("--baumgarte", metavar="KP,KD", type=_numbers(2, "KP,KD (two numbers)"),
                   help="Baumgarte gains of the position constraints: a_c* = -gamma - KD J v - KP e (default 0,0)")
    p.add_argument("--kv", metavar="KV", type=float,
                   help="gain of the velocity constraints (3Dv, 6Dv): psi' = -KV psi (default 0)")
    p.add_argument("--weights", metavar="W1,W2,...", type=_numbers(None, "one number per constraint, W1,W2,..."),
                   help="one positive weight per constraint: damping mu / w on its rows (default 1)")


def _robot_args(p, positional: bool = True):
    if positional:
        p.add_argument("robot", help="named robot, synthetic spec (chain:N, bintree:N, humanoid30, fourbar), "
                                     "URDF path or MJCF (.xml) path")
    p.add_argument("--floating-base", action="store_true", help="add a free-flyer root (URDF paths)")
    p.add_argument("--lock", metavar="J1,J2", type=_names, default=(),
                   help="comma-separated moving joints to fix at q = 0 (URDF paths; gen.load_robot's lock_joints)")
    p.add_argument("--mimic", action="store_true",
                   help="honour URDF <mimic> tags (Pinocchio's mimic=True; ignored by default, as Pinocchio)")


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated joint names, got '{text}'")
    return names


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rbdgen", description="Robot-specific rigid-body dynamics: op counts, "
                "generated C, compiled kernels verified against NumPy and Pinocchio.")
    p.add_argument("--version", action="version", version=f"rbdgen {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser("robots", help="list robots (--frames ROBOT: list a robot's frames)")
    s.add_argument("--frames", metavar="ROBOT", help="list the frames of ROBOT instead")
    _robot_args(s, positional=False)
    _common(s)
    s.set_defaults(func=cmd_robots)

    s = sub.add_parser("opcount", help="operation counts by class and phase")
    _robot_args(s)
    s.add_argument("--algorithm", "-a", default="all",
                   help=f"algorithm name, comma list, or 'all' (default); {AUTO_HELP}")
    _constraint_args(s)
    _solver_option_args(s)
    _common(s)
    s.set_defaults(func=cmd_opcount)

    s = sub.add_parser("build", help="emit and compile one kernel into a build folder")
    _robot_args(s)
    s.add_argument("--algorithm", "-a", required=True, help=f"algorithm name; {AUTO_HELP}")
    _constraint_args(s)
    _solver_option_args(s)
    s.add_argument("--out", "-o", required=True, help="build folder to write")
    s.add_argument("--flags", help="compiler flags (default: -O3 -march=native or $RBDGEN_CFLAGS)")
    s.add_argument("--avoid-stack", action="store_true",
                   help="keep intermediates in the caller's work buffer instead of locals")
    s.add_argument("--no-lanes", action="store_true",
                   help="write every statement on doubles (default: a robot's isomorphic limbs, e.g. solo12's "
                        "four legs, share vector instructions, one limb per lane; needs GCC or Clang)")
    s.add_argument("--batch", type=int, metavar="N",
                   help="batched kernel: N states per call (2, 4, 8, 16), lanes innermost "
                        "(element i of state l at [i*N + l]); symbol ..._b<N>")
    s.add_argument("--casadi", action="store_true",
                   help="also write lib<prefix>_casadi.so: the kernel and its derivative kernel behind CasADi's "
                        "external-function API (casadi.external('<prefix>_casadi', path), Jacobian included)")
    s.add_argument("--casadi-hessian", action="store_true",
                   help="with --casadi and -a aba: also adj1_/jac_adj1_<name> (the exact Hessian of a Lagrangian "
                        "for IPOPT, through aba_derivatives and aba_hessian_product)")
    s.add_argument("--prefix", help="C symbol of the kernel, its header, library and CMake package (default: "
                                    "rbd_<robot>_<algorithm>[_<constraints>][_v<hash of non-default options>])")
    s.add_argument("--crocoddyl", action="store_true",
                   help="also write <prefix>_crocoddyl.hpp, a header-only crocoddyl action model on this kernel "
                        "(-a aba_derivatives: free dynamics; -a constrained_derivatives: contacts)")
    _common(s)
    s.set_defaults(func=cmd_build)

    for name, helptext in (("verify", "compiled C vs NumPy vs Pinocchio on random states"),
                           ("demo", f"the whole pipeline on {DEFAULT_ROBOT}: ops, C, compile, verify")):
        s = sub.add_parser(name, help=helptext)
        if name == "verify":
            _robot_args(s)
            s.add_argument("--algorithm", "-a", default="all", help="algorithm, comma list or 'all' (default)")
            _constraint_args(s)
            _solver_option_args(s)
        else:
            s.add_argument("--robot", default=DEFAULT_ROBOT, help=f"robot (default: {DEFAULT_ROBOT})")
            s.add_argument("--out", "-o", default="rbdgen-demo", help="folder for the build folders (default: ./rbdgen-demo)")
        s.add_argument("--samples", "-n", type=int, default=10, help="random states (default: 10)")
        s.add_argument("--seed", type=_non_negative_int, default=0)
        s.add_argument("--rtol", type=float, default=VERIFY_TOL,
                       help=f"relative comparison tolerance (default: {VERIFY_TOL:g}), floored where a formulation "
                            f"factorises an ill-conditioned matrix by eps kappa, kappa its condition number at the "
                            f"states compared (its own column; gen/verify.py); the tolerance applied is printed per row")
        s.add_argument("--flags", help="compiler flags (default: -O3 -march=native or $RBDGEN_CFLAGS)")
        _common(s)
        s.set_defaults(func=cmd_verify if name == "verify" else cmd_demo)

    add_bench_parser(sub)                          # rbdgen bench (gen/bench/cli.py)
    add_scaling_parser(sub)                        # rbdgen scaling (gen/scaling.py)
    add_simulate_parser(sub)                       # rbdgen simulate (gen/simulate.py)
    return p


def _one_line(msg) -> str:
    return " ".join(str(msg).split())


def main(argv=None) -> int:
    """Entry point of the ``rbdgen`` console script; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        if getattr(args, "samples", 1) < 1:
            raise _UsageError("--samples must be at least 1")
        return args.func(args)
    except BrokenPipeError:          # `rbdgen robots | head` (an OSError: caught first)
        sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as e:             # --out unwritable or not a directory, a missing compiler...
        print(f"rbdgen: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except _UsageError as e:
        print(f"rbdgen: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except RbdgenError as e:
        print(f"rbdgen: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:           # a fault of rbdgen's, not of the input: one line, the traceback on request
        if os.environ.get("RBDGEN_TRACEBACK"):
            raise
        print(f"rbdgen: internal error: {type(e).__name__}: {_one_line(e)} "
              f"(please report it; RBDGEN_TRACEBACK=1 prints where)", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("rbdgen: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:          # --help, --version
        return e.code if isinstance(e.code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
