"""``rbdgen bench``: time the specialised C against the generic C and Pinocchio (docs/DESIGN.md §5).

::

    rbdgen bench ROBOT --algorithm A [--constraints S] [--against generic,pinocchio]
                 [--iterations K | --tol T --max-iter K] [--mu MU] [--pin-peer P]
                 [--format md|csv|json] [--states N] [--rounds R] [--batch B] [--warmup W]
    rbdgen bench --suite [--robots r1,r2] [--algorithms rnea,crba,aba,nle] [--targets all|none|PARTS]
                 [--out DIR]

Wiring (in ``gen/cli.py``'s ``parser()``)::

    from .bench.cli import add_parser as add_bench_parser
    add_bench_parser(sub)          # sets func=gen.bench.cli.run

``run(args)`` returns the exit status: 0, 1 when the implementations disagree (a
single benchmark) or some suite entries failed, and raises :class:`~gen.errors.RbdgenError`
for user errors (the CLI's ``main`` prints them as one line, status 2).
"""
from __future__ import annotations

import sys

from ..api import get_algorithm
from ..errors import RbdgenError
from ..robots import load_robot
from . import harness, report, suite, targets
from .harness import IMPLEMENTATIONS

FORMATS = ("md", "csv", "json")


def add_parser(subparsers):
    """Add the ``bench`` sub-command to an argparse ``subparsers`` object."""

    d = harness.DEFAULTS
    p = subparsers.add_parser(
        "bench", help="time the specialized C against the generic C and Pinocchio (--suite: all named robots)",
        description="Benchmark rbdgen's specialized C against the generic C and Pinocchio: one C program, "
                    "one process, implementations interleaved, outputs cross-checked before timing.")
    p.add_argument("robot", nargs="?", help="named robot, synthetic spec (chain:N, ...), URDF or MJCF path")
    p.add_argument("--floating-base", action="store_true", help="add a free-flyer root (URDF paths)")
    p.add_argument("--algorithm", "-a", help="algorithm to time (rnea, nle, crba, aba, ...)")
    p.add_argument("--constraints", "-c", help="constraint spec for constrained algorithms")
    p.add_argument("--against", default="generic,pinocchio,adam",
                   help="comma list of implementations to compare with: generic, pinocchio, adam (ADAM's CasADi "
                        "functions as C; URDF; rnea, nle, crba, aba), mujoco (MJCF models; nle and crba_solve) "
                        "(default: generic,pinocchio,adam, each where it applies; 'none' for the specialized C alone)")
    p.add_argument("--suite", action="store_true",
                   help="every named robot x (rnea, crba, aba, nle); writes bench/reports/<date>-suite.{md,json,png}")
    p.add_argument("--constrained-suite", action="store_true",
                   help="every named constraint set x (the proximal solvers, the Delassus algorithms, "
                        "the impact map and prox_lcp) against generic and Pinocchio (constraintDynamics, "
                        "contactABA, damped Delassus inverse, impulseDynamics); writes "
                        "bench/reports/<date>-constrained.{md,json}")
    p.add_argument("--sets", help="with --constrained-suite: comma list of set names (default: the non-redundant "
                                  "sets of opcount.constrained)")
    p.add_argument("--targets", default="all",
                   help="with --suite: issue 15's targets measured after the suite and reported with it: "
                        "all (default: batch, order, compile, choice; about 13 minutes on 2 cores), none, "
                        "or a comma list of those parts")
    p.add_argument("--robots", help="with --suite: comma list of robots (default: every named robot)")
    p.add_argument("--algorithms", help="with --suite: comma list of algorithms (default: rnea,crba,aba,nle)")
    p.add_argument("--out", "-o", help="with --suite: report folder (default: bench/reports/ of the source tree)")
    p.add_argument("--states", type=int, default=d["n_states"], help=f"random states cycled (default {d['n_states']})")
    p.add_argument("--rounds", type=int, default=d["rounds"], help=f"timing rounds (default {d['rounds']})")
    p.add_argument("--batch", type=int, default=d["batch"], help=f"calls per timed batch (default {d['batch']})")
    p.add_argument("--warmup", type=int, default=d["warmup"], help=f"warm-up calls (default {d['warmup']})")
    p.add_argument("--seed", type=int, default=d["seed"])
    p.add_argument("--iterations", type=int, help="fixed iteration count (proximal solvers)")
    p.add_argument("--mu", type=float, help="proximal damping, Pinocchio's sense (default 1e-6)")
    p.add_argument("--restitution", type=float, help="impact map: coefficient of restitution (default 0)")
    p.add_argument("--tol", type=float, help="proximal solvers: early exit once |J ddq - a_c*|_inf <= TOL "
                                             "(the specialized and generic C alike; Pinocchio gets it as "
                                             "its ProximalSettings accuracy)")
    p.add_argument("--max-iter", type=int, help="iteration cap of the early exit (with --tol)")
    p.add_argument("--pin-peer", help="Pinocchio function to time instead of the default peer "
                                      "(rnea, nle, crba, aba, constraint_dynamics, contact_aba, lcaba)")
    p.add_argument("--tolerance", type=float, help="relative agreement required before timing "
                                                   f"(default {harness.TOLERANCE:g}; constrained "
                                                   f"{harness.TOLERANCE_CONSTRAINED:g})")
    p.add_argument("--no-check", action="store_true", help="report times even if the implementations disagree")
    p.add_argument("--format", choices=FORMATS, default="md", help="table format (default: md)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.set_defaults(func=run)
    return p


def _progress(quiet: bool):
    def say(msg: str) -> None:
        if not quiet:
            print(f"rbdgen: {msg}", file=sys.stderr, flush=True)
    return say


def _against(text: str) -> tuple[str, ...]:
    if text.strip().lower() in ("", "none"):
        return ()
    names = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    bad = [n for n in names if n not in IMPLEMENTATIONS]
    if bad:
        raise RbdgenError(f"--against: unknown implementation '{bad[0]}' (choose from generic, pinocchio, mujoco, adam)")
    return tuple(n for n in names if n != "specialized")


def _targets(text: str) -> tuple[str, ...]:
    words = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    if words in ((), ("none",)):
        return ()
    if words == ("all",):
        return targets.PARTS
    bad = [w for w in words if w not in targets.PARTS]
    if bad:
        raise RbdgenError(f"--targets: unknown part '{bad[0]}' (choose from all, none, {', '.join(targets.PARTS)})")
    return words


def _common_kwargs(args) -> dict:
    for name in ("states", "rounds", "batch"):
        if getattr(args, name) < 1:
            raise RbdgenError(f"--{name} must be at least 1")
    if args.warmup < 0:
        raise RbdgenError("--warmup must be non-negative")
    return {"n_states": args.states, "rounds": args.rounds, "batch": args.batch, "warmup": args.warmup,
            "seed": args.seed}


def run(args) -> int:
    say = _progress(args.quiet)
    against = _against(args.against)
    kwargs = _common_kwargs(args)
    options = {k: v for k, v in (("iterations", args.iterations), ("mu", args.mu), ("tol", args.tol),
                                 ("max_iter", args.max_iter), ("restitution", args.restitution)) if v is not None}
    if "max_iter" in options and "tol" not in options:
        raise RbdgenError("--max-iter caps the early exit: give it with --tol (or use --iterations K)")
    if args.constrained_suite:

        if args.robot or args.algorithm or args.suite:
            raise RbdgenError("--constrained-suite runs the named constraint sets: give no ROBOT/--algorithm/--suite "
                              "(use --sets and --algorithms to narrow it)")
        if "tol" in options:
            raise RbdgenError("--constrained-suite times a fixed iteration count: use --iterations K, not --tol")
        sets = [t.strip() for t in args.sets.split(",")] if args.sets else None
        solvers = tuple(a.strip() for a in args.algorithms.split(",")) if args.algorithms else \
            suite.CONSTRAINED_SUITE
        s = suite.run_constrained_suite(sets, solvers, iterations=options.pop("iterations", 3), against=against,
                                        progress=say, **kwargs, **options)
        for kind, path in suite.write_constrained_report(s, args.out).items():
            say(f"wrote {path}")
        print(report.constrained_markdown(s) if args.format != "json" else __import__("json").dumps(s, indent=1))
        return 1 if any("error" in r for r in s["results"]) else 0
    if args.suite:

        if args.robot or args.algorithm:
            raise RbdgenError("--suite runs every named robot x algorithm: give no ROBOT/--algorithm "
                              "(use --robots / --algorithms to narrow it)")
        robots = [r.strip() for r in args.robots.split(",")] if args.robots else None
        algos = tuple(a.strip() for a in args.algorithms.split(",")) if args.algorithms else suite.SUITE_ALGORITHMS

        for a in algos:
            if get_algorithm(a).constrained:
                raise RbdgenError(f"--suite times unconstrained algorithms; {a} needs constraints")
        if options:
            raise RbdgenError("--iterations / --mu / --tol / --max-iter apply to constrained algorithms, "
                              "not to --suite")
        s = suite.run_suite(robots, algos, against=against, targets=_targets(args.targets), progress=say,
                            tolerance=args.tolerance, **kwargs, **options)
        paths = suite.write_report(s, args.out)
        for kind, path in paths.items():
            say(f"wrote {path}")
        print(report.render(s["results"], args.format) if args.format != "json"
              else __import__("json").dumps(s, indent=1))
        return 1 if any("error" in r for r in s["results"]) else 0
    if args.targets != "all":
        raise RbdgenError("--targets goes with --suite (the targets are measured after the suite)")
    if not args.robot or not args.algorithm:
        raise RbdgenError("bench needs ROBOT and --algorithm (or --suite)")

    if options and not get_algorithm(args.algorithm).constrained:
        raise RbdgenError(f"--iterations / --mu / --tol / --max-iter apply to constrained algorithms, "
                          f"not {args.algorithm}")
    model = load_robot(args.robot, floating_base=args.floating_base)
    try:
        result = harness.benchmark(model, args.algorithm, args.constraints, against=against,
                                   pin_peer=args.pin_peer, tolerance=args.tolerance,
                                   check=not args.no_check, progress=say, **kwargs, **options)
    except harness.BenchmarkMismatch as e:
        print(f"rbdgen: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    print(report.render([result], args.format))
    return 0 if result["verify"]["ok"] else 1
