"""The crocoddyl problems of the examples, built with either model class: crocoddyl's
built-in ``DifferentialActionModel*FwdDynamics`` or rbdgen's (``gen.crocoddyl``), which
take the same arguments.  Robots from example-robot-data, as a crocoddyl user loads them.

* :func:`panda_reaching`: panda (fingers locked), the hand's tool frame to a target
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
    robot = example_robot_data.load("panda")
    m = robot.model
    locked = [m.getJointId(n) for n in ("panda_finger_joint1", "panda_finger_joint2")]
    return pin.buildReducedModel(m, locked, robot.q0), robot.q0[:7].copy()


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
    """FDDP from the quasi-static guess: (solver, seconds)."""
    solver = crocoddyl.SolverFDDP(problem)
    xs = [problem.x0] * (problem.T + 1)
    us = problem.quasiStatic(xs[:-1])
    t0 = time.perf_counter()
    solver.solve(xs, us, maxiter, False)
    return solver, time.perf_counter() - t0


def largest_difference(a, b) -> float:
    """Largest entry of the state and control trajectories' difference."""
    dx = max(float(np.abs(x - y).max()) for x, y in zip(a.xs, b.xs))
    du = max(float(np.abs(x - y).max()) for x, y in zip(a.us, b.us))
    return max(dx, du)


def compare(title: str, build, builtin, ours, argv=None, **kw) -> None:
    """Solve ``build(builtin)`` and ``build(ours)`` ``--repeat`` times each (alternating),
    print iterations, cost, the largest trajectory difference and the solve-time medians."""
    import argparse
    ap = argparse.ArgumentParser(description=title)
    ap.add_argument("--T", type=int, default=None, help="horizon (nodes)")
    ap.add_argument("--repeat", type=int, default=11, help="solves per model; the median is printed")
    args = ap.parse_args(argv)
    if args.T is not None:
        kw["T"] = args.T
    t0 = time.perf_counter()
    pr, _ = build(ours, **kw)
    setup = time.perf_counter() - t0
    pb, _ = build(builtin, **kw)
    times = {"built-in": [], "rbdgen": []}
    for _ in range(args.repeat):
        sb, tb = solve(pb)
        sr, tr = solve(pr)
        times["built-in"].append(tb)
        times["rbdgen"].append(tr)
    print(f"{title} (T = {pb.T}, {args.repeat} solves each, rbdgen model set-up {setup:.2f} s)")
    for name, s in (("built-in", sb), ("rbdgen", sr)):
        print(f"  {name:9s} iterations {s.iter:3d}  cost {s.cost:.12e}  solve median "
              f"{1e3 * float(np.median(times[name])):8.2f} ms")
    ratio = float(np.median(times["rbdgen"]) / np.median(times["built-in"]))
    print(f"  same iterations: {'yes' if sb.iter == sr.iter else 'no'}; cost relative difference "
          f"{abs(sr.cost - sb.cost) / abs(sb.cost):.1e}; largest trajectory difference "
          f"{largest_difference(sb, sr):.1e}; rbdgen / built-in time {ratio:.2f}")
