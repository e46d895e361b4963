"""The crocoddyl problems of the examples, built with either model class: crocoddyl's
built-in ``DifferentialActionModel*FwdDynamics`` or rbdgen's (``gen.crocoddyl``: the
compiled model where it can be built, or the Python model), which take the same
arguments.  Robots from example-robot-data, as a crocoddyl user loads them.

* :func:`panda_reaching`: panda (fingers locked at 0), the hand's tool frame to a target
  0.3 m away, state and control regularisation, 1 s at dt = 10 ms;
* :func:`solo12_base`: solo12 on its four feet (3D contacts, LOCAL, Baumgarte
  ``Kd = 50``), the base moved 5 cm forward and 3 cm down, 0.5 s at dt = 10 ms;
* :func:`talos_standing`: talos (example-robot-data's reduced talos, armature set to 0:
  rbdgen models none) on its two 6D soles, the base 5 cm down, 0.5 s at dt = 10 ms.

Each returns ``(problem, x0)``; :func:`solve` runs FDDP from the quasi-static guess.
"""
from __future__ import annotations

import time

import crocoddyl
import example_robot_data
import numpy as np
import pinocchio as pin


def _state_costs(state, nu, x0, weights, w_state=1e-1, w_control=1e-3):
    costs = crocoddyl.CostModelSum(state, nu)
    xres = crocoddyl.ResidualModelState(state, x0, nu)
    act = crocoddyl.ActivationModelWeightedQuad(np.asarray(weights, dtype=float) ** 2)
    costs.addCost("state", crocoddyl.CostModelResidual(state, act, xres), w_state)
    costs.addCost("control", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, nu)),
                  w_control)
    return costs


def _problem(x0, running, terminal, dt: float, T: int):
    models = [crocoddyl.IntegratedActionModelEuler(running(), dt) for _ in range(T)]
    return crocoddyl.ShootingProblem(x0, models, crocoddyl.IntegratedActionModelEuler(terminal(), 0.0))


def panda_model():
    """The panda with its fingers locked at 0 (as ``rbdgen build panda`` and the C++ example
    lock them)."""
    robot = example_robot_data.load("panda")
    m = robot.model
    locked = [m.getJointId(n) for n in ("panda_finger_joint1", "panda_finger_joint2")]
    return pin.buildReducedModel(m, locked, pin.neutral(m)), robot.q0[:7].copy()


def panda_reaching(Model, T: int = 100, dt: float = 1e-2, pm=None):
    """Reach 0.3 m: ``Model`` is a DifferentialActionModelFreeFwdDynamics class."""
    if pm is None:
        pm, q0 = panda_model()
    else:
        q0 = example_robot_data.load("panda").q0[:7].copy()
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFull(state)
    x0 = np.concatenate([q0, np.zeros(state.nv)])
    fid = pm.getFrameId("panda_hand_tcp")
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, q0)
    target = data.oMf[fid].translation + np.array([0.1, 0.2, -0.2])

    def costs(terminal: bool):
        c = _state_costs(state, actuation.nu, x0, [1.0] * state.nv + [1.0] * state.nv,
                         w_state=1e-1 if terminal else 1e-2, w_control=0.0 if terminal else 1e-3)
        goal = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelFrameTranslation(state, fid, target,
                                                                                          actuation.nu))
        c.addCost("goal", goal, 1e4 if terminal else 1e1)
        return c

    return _problem(x0, lambda: Model(state, actuation, costs(False)),
                    lambda: Model(state, actuation, costs(True)), dt, T), x0


def _contact_models(state, actuation, frames, kind: str, gains, q0, pm):
    contacts = crocoddyl.ContactModelMultiple(state, actuation.nu)
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, q0)
    for name in frames:
        fid = pm.getFrameId(name)
        if kind == "3D":
            c = crocoddyl.ContactModel3D(state, fid, data.oMf[fid].translation.copy(), pin.LOCAL, actuation.nu,
                                         np.asarray(gains, dtype=float))
        else:
            c = crocoddyl.ContactModel6D(state, fid, data.oMf[fid].copy(), pin.LOCAL, actuation.nu,
                                         np.asarray(gains, dtype=float))
        contacts.addContact(name, c)
    return contacts


def _base_problem(Model, pm, q0, feet, kind, base_frame, shift, T, dt, inv_damping, enable_force, gains):
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    x0 = np.concatenate([q0, np.zeros(state.nv)])
    bid = pm.getFrameId(base_frame)
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, q0)
    target = data.oMf[bid].translation + np.asarray(shift, dtype=float)
    weights = [0.0] * 3 + [50.0] * 3 + [0.01] * (state.nv - 6) + [10.0] * 6 + [1.0] * (state.nv - 6)

    def model(terminal: bool):
        c = _state_costs(state, actuation.nu, x0, weights, w_state=1e1 if terminal else 1e-1,
                         w_control=0.0 if terminal else 1e-3)
        goal = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelFrameTranslation(state, bid, target,
                                                                                          actuation.nu))
        c.addCost("base", goal, 1e4 if terminal else 1e2)
        contacts = _contact_models(state, actuation, feet, kind, gains, q0, pm)
        return Model(state, actuation, contacts, c, inv_damping, enable_force)

    return _problem(x0, lambda: model(False), lambda: model(True), dt, T), x0


def solo12_model():
    robot = example_robot_data.load("solo12")
    return robot.model, robot.q0.copy()


def solo12_base(Model, T: int = 50, dt: float = 1e-2, inv_damping: float = 0.0, enable_force: bool = False,
                gains=(0.0, 50.0)):
    """solo12 on its four feet moves its base: ``Model`` is a
    DifferentialActionModelContactFwdDynamics class."""
    pm, q0 = solo12_model()
    return _base_problem(Model, pm, q0, ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"], "3D", "base_link",
                         [0.05, 0.0, -0.03], T, dt, inv_damping, enable_force, gains)


def talos_model():
    robot = example_robot_data.load("talos")
    pm = robot.model
    pm.armature[:] = 0.0
    return pm, robot.q0.copy()


def talos_standing(Model, T: int = 50, dt: float = 1e-2, inv_damping: float = 0.0, enable_force: bool = False,
                   gains=(0.0, 50.0)):
    """talos on its two 6D soles lowers its base."""
    pm, q0 = talos_model()
    return _base_problem(Model, pm, q0, ["left_sole_link", "right_sole_link"], "6D", "base_link",
                         [0.0, 0.0, -0.05], T, dt, inv_damping, enable_force, gains)


def solve(problem, maxiter: int = 100):
    """FDDP from the quasi-static guess: (solver, (wall, CPU) seconds).  The CPU time is
    the process's (one thread: OMP_NUM_THREADS=1): on a loaded machine the wall time
    also counts the time the process waited for a core."""
    solver = crocoddyl.SolverFDDP(problem)
    xs = [problem.x0] * (problem.T + 1)
    us = problem.quasiStatic(xs[:-1])
    t0, c0 = time.perf_counter(), time.process_time()
    solver.solve(xs, us, maxiter, False)
    return solver, (time.perf_counter() - t0, time.process_time() - c0)


def largest_difference(a, b) -> float:
    """Largest entry of the state and control trajectories' difference."""
    dx = max(float(np.abs(x - y).max()) for x, y in zip(a.xs, b.xs))
    du = max(float(np.abs(x - y).max()) for x, y in zip(a.us, b.us))
    return max(dx, du)


def measure(build, builtin, ours, repeat: int = 11, **kw) -> dict:
    """Solve ``build(builtin, **kw)`` and ``build(ours, **kw)`` ``repeat`` times each
    (alternating): iterations, costs, the cost's relative difference, the largest
    trajectory difference, the medians of the solves' wall and CPU times (ms) and the
    ratio of the CPU times, rbdgen's model set-up time (s)."""
    t0 = time.perf_counter()
    pr, _ = build(ours, **kw)
    setup = time.perf_counter() - t0
    pb, _ = build(builtin, **kw)
    times = {"built-in": [], "rbdgen": []}
    for _ in range(repeat):
        sb, tb = solve(pb)
        sr, tr = solve(pr)
        times["built-in"].append(tb)
        times["rbdgen"].append(tr)
    wall = {k: 1e3 * float(np.median([t[0] for t in v])) for k, v in times.items()}
    cpu = {k: 1e3 * float(np.median([t[1] for t in v])) for k, v in times.items()}
    return {"T": pb.T, "repeat": repeat, "setup": setup, "iterations": {"built-in": sb.iter, "rbdgen": sr.iter},
            "cost": {"built-in": sb.cost, "rbdgen": sr.cost}, "cost_rel": abs(sr.cost - sb.cost) / abs(sb.cost),
            "trajectory": largest_difference(sb, sr), "ms": wall, "cpu_ms": cpu,
            "ratio": cpu["rbdgen"] / cpu["built-in"]}


def print_measured(title: str, r: dict) -> None:
    """The examples' report of :func:`measure` (also the C++ examples' format)."""
    print(f"{title} (T = {r['T']}, {r['repeat']} solves each, rbdgen model set-up {r['setup']:.2f} s)")
    for name in ("built-in", "rbdgen"):
        print(f"  {name:9s} iterations {r['iterations'][name]:3d}  cost {r['cost'][name]:.12e}  solve median "
              f"{r['ms'][name]:8.2f} ms (CPU {r['cpu_ms'][name]:8.2f} ms)")
    same = r["iterations"]["built-in"] == r["iterations"]["rbdgen"]
    print(f"  same iterations: {'yes' if same else 'no'}; cost relative difference {r['cost_rel']:.1e}; largest "
          f"trajectory difference {r['trajectory']:.1e}; rbdgen / built-in CPU time {r['ratio']:.2f}")


def compare(title: str, build, builtin, ours, argv=None, **kw) -> None:
    """The examples' command line: :func:`measure` and :func:`print_measured`."""
    import argparse
    ap = argparse.ArgumentParser(description=title)
    ap.add_argument("--T", type=int, default=None, help="horizon (nodes)")
    ap.add_argument("--repeat", type=int, default=11, help="solves per model; the median is printed")
    args = ap.parse_args(argv)
    if args.T is not None:
        kw["T"] = args.T
    print_measured(title, measure(build, builtin, ours, args.repeat, **kw))


class _StepLengths(crocoddyl.CallbackAbstract):
    def __init__(self):
        crocoddyl.CallbackAbstract.__init__(self)
        self.steps = []

    def __call__(self, solver):
        self.steps.append(solver.stepLength)


def _median_ms(f, repeat: int) -> float:
    """Median CPU time of ``f()`` (ms)."""
    ts = []
    for _ in range(repeat):
        t0 = time.process_time()
        f()
        ts.append(time.process_time() - t0)
    return 1e3 * float(np.median(ts))


def breakdown(problem, repeat: int = 11) -> dict:
    """Where one FDDP solve of ``problem`` spends its time, measured in parts (CPU ms,
    medians): the models over all nodes (``problem.calc``, ``problem.calcDiff``: dynamics,
    actuation, costs, Euler integration), the solver's backward pass, and one trial step
    (``tryStep``: the rollout, which calls every node's ``calc``).  A solve runs, per
    iteration, one ``calcDiff`` and one backward pass and one ``tryStep`` per trial step
    length (FDDP halves it from 1: a step length ``2^-k`` took ``k + 1`` trials),
    counted on one solve; ``solve`` is the median of ``repeat`` solves."""
    solver = crocoddyl.SolverFDDP(problem)
    xs = [problem.x0] * (problem.T + 1)
    us = problem.quasiStatic(xs[:-1])
    total = _median_ms(lambda: solver.solve(xs, us, 100, False), repeat)
    steps = _StepLengths()
    solver.setCallbacks([steps])
    solver.solve(xs, us, 100, False)
    trials = sum(int(round(-np.log2(a))) + 1 for a in steps.steps if a > 0)
    solver.setCallbacks([])
    solver.setCandidate(xs, us, False)
    calc = _median_ms(lambda: problem.calc(solver.xs, solver.us), repeat)
    calc_diff = _median_ms(lambda: problem.calcDiff(solver.xs, solver.us), repeat)
    solver.calcDiff()
    backward = _median_ms(solver.backwardPass, repeat)
    try_step = _median_ms(lambda: solver.tryStep(1.0), repeat)
    n = len(steps.steps)
    models = n * calc_diff + trials * calc
    return {"iterations": n, "trials": trials, "calc": calc, "calcDiff": calc_diff, "backward": backward,
            "tryStep": try_step, "solve": total, "models": models,
            "solver": n * backward + trials * (try_step - calc)}


def cpp_kernel_folders(work) -> None:
    """The C++ examples' kernel folders ``work/panda``, ``work/solo12`` and ``work/talos``
    (each with its ``*_crocoddyl.hpp``) from this module's Pinocchio models, through
    gen.crocoddyl's kernels: the builds the Python models use, so a process that runs both
    builds each kernel once.  ``cpp/run.sh`` builds them with ``rbdgen build ... --crocoddyl``
    on the URDFs unless ``RBDGEN_KERNELS`` names a folder made by this function.  talos's
    kernel, the longest to trace, comes first: in a parallel test run the other worker's
    tests build the smaller two meanwhile (the crocoddyl stage 121 -> 97 s on two cores)."""
    from pathlib import Path

    import gen
    import gen.crocoddyl as gc
    from gen.crocoddyl_cpp import write_header

    for name, build in (("talos", talos_standing), ("solo12", solo12_base), ("panda", panda_reaching)):
        if build is panda_reaching:
            m = build(gc.DifferentialActionModelFreeFwdDynamics, T=1)[0].runningModels[0].differential
            algorithm, cset, options = "aba_derivatives", None, {}
        else:
            m = build(gc.DifferentialActionModelContactFwdDynamics, T=1)[0].runningModels[0].differential
            algorithm, cset, options = "constrained_derivatives", m.cset, gc.damping_options(m.inv_damping)
        staged = Path(work) / ".staged" / name
        write_header(gen.build(m.robot, algorithm, cset, out_dir=staged, quiet=True, **options), staged)
        _update(staged, Path(work) / name)


def _update(src, dst) -> None:
    """Copy the files of ``src`` into ``dst`` where their bytes differ (an unchanged file
    keeps its time stamp, so CMake does not recompile it)."""
    import shutil
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and (not (dst / f.name).exists() or (dst / f.name).read_bytes() != f.read_bytes()):
            shutil.copy2(f, dst / f.name)


def _per_call_us(f, n: int = 200, batches: int = 9) -> float:
    """Median over ``batches`` of the CPU time of ``n`` calls of ``f`` (us per call)."""
    ts = []
    for _ in range(batches):
        t0 = time.process_time()
        for _ in range(n):
            f()
        ts.append((time.process_time() - t0) / n)
    return 1e6 * float(np.median(ts))


def node_profile(build) -> dict:
    """One running node of ``build``'s contact problem at ``x0`` and its quasi-static
    ``u`` (CPU us per call): the built-in model's ``calc`` / ``calcDiff``, rbdgen's compiled
    model's (what ``gen.crocoddyl``'s classes return) and rbdgen's Python model's with each
    of its steps, and the Euler node around each rbdgen model as the solver calls it (in
    C++ for the compiled model, through crocoddyl's Python override for the Python model)."""
    import gen.crocoddyl as gc
    pb, x = build(crocoddyl.DifferentialActionModelContactFwdDynamics, T=2)
    pc, _ = build(gc.DifferentialActionModelContactFwdDynamics, T=2)
    pr, _ = build(gc.PythonDifferentialActionModelContactFwdDynamics, T=2)
    mb, mc, m = (p.runningModels[0].differential for p in (pb, pc, pr))
    db, dc, d = mb.createData(), mc.createData(), m.createData()
    u = m.quasiStatic(d, x)
    q, v = x[:m.nq], x[m.nq:]
    m.calc(d, x, u)
    (ec, edc), (er, edr) = ((p.runningModels[0], p.runningModels[0].createData()) for p in (pc, pr))
    c = "compiled" if mc.implementation == "compiled" else "Python"
    steps = {
        "built-in calc": lambda: mb.calc(db, x, u),
        "built-in calcDiff": lambda: mb.calcDiff(db, x, u),
        f"rbdgen {c} model calc": lambda: mc.calc(dc, x, u),
        f"rbdgen {c} model calcDiff": lambda: mc.calcDiff(dc, x, u),
        "rbdgen Python model calc": lambda: m.calc(d, x, u),
        "  actuation.calc": lambda: m.actuation.calc(d.actuation, x, u),
        "  prox_ltl kernel": lambda: m.forward(q, v, d.tau, out=d.out_value),
        "  Pinocchio kinematics for the costs": lambda: m.kinematics.calc(d.pinocchio, q, v, d.xout_),
        "  contacts.updateForce": lambda: m.contacts.updateForce(d.contacts, d.lam),
        "  costs.calc": lambda: m.costs.calc(d.costs, x, u),
        "rbdgen Python model calcDiff": lambda: m.calcDiff(d, x, u),
        "  actuation.calcDiff (none for crocoddyl's floating base)": lambda: m._actuation_diff(d, x, u),
        "  constrained_derivatives kernel": lambda: m.derivatives(q, v, d.tau, out=d.out_derivatives),
        "  Fu, Fx from d/dtau": lambda: m._control_jacobians(d, d.ddq_dtau, d.Fx_, d.Fu_),
        "  Pinocchio Jacobians for the costs": lambda: m.kinematics.calc_diff(d.pinocchio, q, v, d.xout_),
        "  costs.calcDiff": lambda: m.costs.calcDiff(d.costs, x, u),
        f"Euler node calcDiff ({c} model)": lambda: ec.calcDiff(edc, x, u),
        "Euler node calcDiff (Python model)": lambda: er.calcDiff(edr, x, u),
    }
    for f in (lambda: mc.calc(dc, x, u), lambda: ec.calc(edc, x, u), lambda: er.calc(edr, x, u)):
        f()                              # calcDiff after calc at the same point (crocoddyl's contract)
    return {name: _per_call_us(f) for name, f in steps.items()}


def cycled_nodes(build, Model, counts=(1, 2, 4, 8, 16, 50), calls: int = 400, batches: int = 7) -> dict:
    """The Euler node's ``calcDiff`` (CPU us per call, median of ``batches``) when the
    calls cycle over the first ``k`` nodes of ``build(Model)``'s problem at ``x0`` and its
    quasi-static ``u``, for each ``k`` in ``counts``: one node is a tight loop, 50 is a
    solve's sweep, in which every node's data (and the kernel's code) comes back from beyond
    the core's L2 cache."""
    T = max(counts)
    pr, x0 = build(Model, T=T)
    xs = [x0] * (T + 1)
    us = pr.quasiStatic(xs[:-1])
    pr.calc(xs, us)
    ms, ds = pr.runningModels, pr.runningDatas
    out = {}
    for k in counts:
        nodes = list(zip(ms[:k], ds[:k], xs[:k], us[:k])) * max(1, calls // k)

        def run():
            for m, d, x, u in nodes:
                m.calcDiff(d, x, u)
        out[k] = _per_call_us(run, 1, batches) / len(nodes)
    return out


def _full_step_candidate(solver, problem):
    """FDDP's candidate after a full step (alpha = 1: every gap closed): ``xs[t+1]`` is
    node t's ``xnext`` from the rollout, ``us[t] = us[t] - k[t] - K[t] (xs_try[t] - xs[t])``
    (crocoddyl's SolverFDDP::forwardPass)."""
    xs, us = list(solver.xs), list(solver.us)
    xt, ut = [problem.x0], []
    for i, (m, d) in enumerate(zip(problem.runningModels, problem.runningDatas)):
        ut.append(us[i] - solver.k[i] - solver.K[i] @ m.state.diff(xs[i], xt[i]))
        xt.append(d.xnext.copy())
    return xt, ut


def solve_phases(problem, maxiter: int = 100) -> dict:
    """One FDDP solve of ``problem`` from the quasi-static guess replayed phase by phase
    (crocoddyl 3.2.1's SolverFDDP::solve: the first ``problem.calc``, then per iteration
    ``problem.calcDiff`` and the gaps, the backward pass, one trial step) with each phase's
    CPU time (ms) summed over the solve, so every phase runs with what the one before it left
    in the caches, as in ``solver.solve``.  Valid where every step is full (FDDP's first
    trial, alpha = 1, accepted; the talos and solo12 problems here); a shorter step raises.
    :func:`breakdown` times each phase repeated on its own, which leaves a phase's data in
    the caches and, for a cheap phase, measures less than a solve spends in it."""
    solver = crocoddyl.SolverFDDP(problem)
    xs = [problem.x0] * (problem.T + 1)
    us = problem.quasiStatic(xs[:-1])
    ms = dict.fromkeys(("first calc", "calcDiff", "gaps", "backward pass", "trial step"), 0.0)

    def timed(name, f):
        t0 = time.process_time()
        out = f()
        ms[name] += 1e3 * (time.process_time() - t0)
        return out

    solver.preg = solver.dreg = solver.reg_min  # solve's starting regularization (decreased no lower by full steps)
    solver.setCandidate(xs, us, False)
    timed("first calc", lambda: problem.calc(solver.xs, solver.us))
    for it in range(1, maxiter + 1):
        solver.cost = timed("calcDiff", lambda: problem.calcDiff(solver.xs, solver.us))
        timed("gaps", solver.computeDynamicFeasibility)
        timed("backward pass", solver.backwardPass)
        solver.updateExpectedImprovement()
        dv = timed("trial step", lambda: solver.tryStep(1.0))
        d = solver.expectedImprovement()
        expected = d[0] + 0.5 * d[1]
        if not (abs(d[0]) < solver.th_grad or dv > solver.th_acceptStep * expected if expected >= 0
                else dv > solver.th_acceptNegStep * expected):
            raise RuntimeError(f"solve_phases: iteration {it} took a step shorter than 1 (replays full steps only)")
        solver.setCandidate(*_full_step_candidate(solver, problem), True)
        solver.stoppingCriteria()
        if solver.stop < solver.th_stop:
            break
    return {"iterations": it, "ms": ms, "xs": list(solver.xs), "us": list(solver.us)}
