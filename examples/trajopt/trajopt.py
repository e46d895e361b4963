"""Trajectory optimisation with contacts on rbdgen's dynamics (issue 14 §2).

solo12 stands with its four feet held by 3D contacts and moves its base 10 cm sideways
and back.  Direct multiple shooting (Bock & Plitt 1984) over N intervals of dt: the
state ``(q_k, v_k)`` and the joint torque ``tau_k`` (12 actuated joints; the free-flyer
has none) are decision variables, and each interval is one semi-implicit Euler step of
the constrained forward dynamics,

    ddq_k = prox_ltl(q_k, v_k, [0; tau_k])[ddq]       (feet held: J ddq + dJ v = 0)
    v_{k+1} = v_k + dt ddq_k,   q_{k+1} = q_k (+) dt v_{k+1}   (gen.simulate.advance)

with ``(+)`` Pinocchio's integrate (the SE(3) exponential on the base).  ``prox_ltl``
runs K = 3 proximal iterations at mu = 1e-6 (Carpentier 2021 eq. 18): with the four
feet's 12 independent rows the iterate is the exact constrained acceleration to rounding.
The base quaternion is normalised before it enters the dynamics, so the raw-coordinate
derivatives of the SX graph and of the compiled external agree (gen/casadi_api.py).

Constraints: ``q_0, v_0`` the SRDF ``standing`` posture at rest; the base 10 cm to the
side (+y) at the middle node; at the last node the base back in its initial pose, at rest; |tau| <= 2.7 N m, the
Solo12 actuator's maximum torque (Grimminger et al., RA-L 2020, Table I: 0.025 N m/A x
12 A x 9:1 gearing) -- the URDF's limits (1000 N m, +-10 rad) are placeholders; joints
within +-0.6 rad of ``standing`` (this example's choice: the real ranges are wider).
Cost: ``sum dt (|tau_k|^2 + 0.1 |v_k|^2)``.

Solved with IPOPT (through ``casadi.nlpsol``; limited-memory Hessian, because the
external supplies first derivatives only) two ways:

(a) ``sx``: ``gen.casadi_function`` -- the SX graph of prox_ltl inlined in the NLP
    (``expand``), its Jacobian by CasADi's AD, evaluated by CasADi's virtual machine;
(b) ``external``: ``gen.casadi_external`` -- the compiled C loaded by
    ``casadi.external`` from a shared library that speaks CasADi's external-function C
    API (no Python in a call), its Jacobian ``jac_<name>`` the compiled
    ``constrained_derivatives`` (Carpentier & Mansard RSS 2018's analytical derivatives).

Run ``python examples/trajopt/trajopt.py`` (``--help`` for the options); it prints the
figures of examples/trajopt/README.md and writes ``trajopt.png`` (matplotlib).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import casadi as ca
import numpy as np

import gen
from gen.kinematics import frame_placement
from gen.backend import NUMPY, SXBackend
from gen.bench.calls import bound_map
from gen.robots.named import robots_dir
from gen.simulate import POSTURES, advance, srdf_posture

ROBOT = "solo12"
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
CONSTRAINTS = ",".join(f"3D:{f}" for f in FEET)
ALGORITHM = "prox_ltl"
TAU_MAX = 2.7            # N m, Grimminger et al. 2020 (module docstring)
JOINT_RANGE = 0.6        # rad about 'standing'
SHIFT = 0.10             # m, sideways (+y) at the middle node
W_V = 0.1                # weight of |v|^2 against |tau|^2
BASE_Y = 1               # index of the base's y in q


def standing(model) -> np.ndarray:
    rel, state = POSTURES[ROBOT]
    return srdf_posture(model, robots_dir() / rel, state)


def normalised(model, q):
    """q with the base quaternion (q[3:7], x y z w) scaled to unit norm."""
    quat = q[3:7]
    return ca.vertcat(q[0:3], quat / ca.norm_2(quat), q[7:])


def step_function(model, dt: float) -> ca.Function:
    """(q, v, ddq) -> (q+, v+): gen.simulate.advance traced on SX."""
    be = SXBackend()
    q, v, a = be.sym("q", model.nq), be.sym("v", model.nv), be.sym("ddq", model.nv)
    q1, v1 = advance(model, q, v, a, dt, be=be)
    return ca.Function("step", [q, v, a], [q1, v1], ["q", "v", "ddq"], ["q_next", "v_next"])


def dynamics(model, variant: str, flags=None):
    """The constrained forward dynamics (q, v, tau) -> ddq, lam, ... as a CasADi function:
    the SX graph or the compiled external (module docstring)."""
    if variant == "sx":
        return gen.casadi_function(model, ALGORITHM, CONSTRAINTS)
    return gen.casadi_external(model, ALGORITHM, CONSTRAINTS, flags=flags)


def transcribe(model, F, nodes: int, horizon: float, home_pose: bool = True):
    """The multiple-shooting NLP (module docstring) on the dynamics function F; without
    ``home_pose`` only the base's y (not its whole pose) returns at the end."""
    dt = horizon / nodes
    step = step_function(model, dt)
    q0 = standing(model)
    nj = model.nv - 6
    Q = [ca.MX.sym(f"q{k}", model.nq) for k in range(nodes + 1)]
    V = [ca.MX.sym(f"v{k}", model.nv) for k in range(nodes + 1)]
    U = [ca.MX.sym(f"tau{k}", nj) for k in range(nodes)]
    g, lbg, cost = [], [], 0
    for k in range(nodes):
        ddq = F(normalised(model, Q[k]), V[k], ca.vertcat(ca.MX.zeros(6), U[k]))[0]
        q1, v1 = step(Q[k], V[k], ddq)
        g += [Q[k + 1] - q1, V[k + 1] - v1]
        lbg += [0.0] * (model.nq + model.nv)
        cost += dt * (ca.sumsqr(U[k]) + W_V * ca.sumsqr(V[k + 1]))
    # bounds: start at rest in 'standing'; 10 cm sideways at the middle node, back and at
    # rest at the end; torques and joint ranges
    inf = np.inf
    lbx, ubx, x0 = [], [], []
    for k in range(nodes + 1):
        lo, hi = np.full(model.nq, -inf), np.full(model.nq, inf)
        lo[7:], hi[7:] = q0[7:] - JOINT_RANGE, q0[7:] + JOINT_RANGE
        if k == 0:
            lo, hi = q0.copy(), q0.copy()
        target = q0[BASE_Y] + (SHIFT if k == nodes // 2 else 0.0)
        if k == nodes // 2:
            lo[BASE_Y] = hi[BASE_Y] = target
        if k == nodes:                     # the base back where it started (pose, or y)
            at = slice(0, 7) if home_pose else slice(BASE_Y, BASE_Y + 1)
            lo[at], hi[at] = q0[at], q0[at]
        lbx += [lo]
        ubx += [hi]
        x0 += [q0]
        rest = k in (0, nodes)
        lbx += [np.zeros(model.nv) if rest else np.full(model.nv, -inf)]
        ubx += [np.zeros(model.nv) if rest else np.full(model.nv, inf)]
        x0 += [np.zeros(model.nv)]
        if k < nodes:
            lbx += [np.full(nj, -TAU_MAX)]
            ubx += [np.full(nj, TAU_MAX)]
            x0 += [np.zeros(nj)]
    x = ca.vertcat(*[z for k in range(nodes + 1) for z in ([Q[k], V[k]] + ([U[k]] if k < nodes else []))])
    g = ca.vertcat(*g)
    nlp = {"x": x, "f": cost, "g": g}
    bounds = dict(lbx=np.concatenate(lbx), ubx=np.concatenate(ubx), lbg=np.array(lbg), ubg=np.array(lbg),
                  x0=np.concatenate(x0))
    return nlp, bounds, dt


def unpack(model, x: np.ndarray, nodes: int):
    nj, at = model.nv - 6, 0
    qs, vs, us = [], [], []
    for k in range(nodes + 1):
        qs.append(x[at:at + model.nq])
        at += model.nq
        vs.append(x[at:at + model.nv])
        at += model.nv
        if k < nodes:
            us.append(x[at:at + nj])
            at += nj
    return np.array(qs), np.array(vs), np.array(us)


def time_call(fn, reps: int) -> float:
    """Mean wall time of fn() in seconds over reps calls (after one warm-up call)."""
    fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps



def micro_timings(model, F, reps: int, n_map: int = 1000) -> dict:
    """Time of one dynamics evaluation and of one Jacobian (w.r.t. q, v, tau) outside the
    solver, at the 'standing' posture with a random velocity and torque: one call from
    Python, and per evaluation inside ``F.map(n_map)`` (``gen.bench.calls.bound_map``: no Python per
    evaluation)."""
    rng = np.random.default_rng(0)
    q, v, tau = standing(model), rng.normal(size=model.nv), np.concatenate([np.zeros(6), rng.normal(size=12)])
    x = [ca.MX.sym(n, F.size_in(i)) for i, n in enumerate(F.name_in())]
    J = ca.Function("J", x, [ca.jacobian(F(*x)[0], ca.vertcat(*x))])
    if F.is_a("SXFunction"):
        J = J.expand()
    columns = [np.tile(a.reshape(-1, 1), (1, n_map)) for a in (q, v, tau)]
    Fm, Jm = bound_map(F, columns, n_map)[0], bound_map(J, columns, n_map)[0]
    return {"eval_us": 1e6 * time_call(lambda: F(q, v, tau), reps),
            "jacobian_us": 1e6 * time_call(lambda: J(q, v, tau), reps),
            "map_eval_us": 1e6 * time_call(Fm, 5) / n_map,
            "map_jacobian_us": 1e6 * time_call(Jm, 5) / n_map}


def solve(model, variant: str, nodes: int, horizon: float, *, max_iter: int = 2000, flags=None,
          verbose: bool = False, home_pose: bool = True) -> dict:
    t0 = time.perf_counter()
    F = dynamics(model, variant, flags)
    t_setup = time.perf_counter() - t0
    nlp, bounds, dt = transcribe(model, F, nodes, horizon, home_pose)
    opts = {"expand": variant == "sx", "print_time": False,
            "ipopt": {"print_level": 5 if verbose else 0, "max_iter": max_iter, "tol": 1e-6,
                      "hessian_approximation": "limited-memory", "limited_memory_max_history": 30,
                      "sb": "yes"}}
    t0 = time.perf_counter()
    solver = ca.nlpsol(f"trajopt_{variant}", "ipopt", nlp, opts)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = solver(**bounds)
    t_solve = time.perf_counter() - t0
    st = solver.stats()
    qs, vs, us = unpack(model, np.array(sol["x"]).reshape(-1), nodes)
    n_g, n_jac = st["n_call_nlp_g"], st["n_call_nlp_jac_g"]
    feet0 = np.array([frame_placement(model, f, qs[0].reshape(-1, 1), be=NUMPY)[1].ravel() for f in FEET])
    drift = max(np.max(np.linalg.norm(np.array([frame_placement(model, f, q.reshape(-1, 1), be=NUMPY)[1].ravel()
                                                for f in FEET]) - feet0, axis=1)) for q in qs)
    return {
        "variant": variant, "nodes": nodes, "horizon": horizon, "dt": dt,
        "success": bool(st["success"]), "status": st["return_status"], "iterations": int(st["iter_count"]),
        "cost": float(sol["f"]), "setup_s": t_setup, "nlpsol_s": t_build, "solve_s": t_solve,
        "n_eval_g": n_g, "n_eval_jac_g": n_jac,
        # per dynamics evaluation inside the solver: constraint (resp. Jacobian) time per
        # call over the N shooting intervals (each call evaluates N dynamics and N steps)
        "g_per_dynamics_us": 1e6 * st["t_wall_nlp_g"] / max(1, n_g) / nodes,
        "jac_per_dynamics_us": 1e6 * st["t_wall_nlp_jac_g"] / max(1, n_jac) / nodes,
        "max_defect": float(np.max(np.abs(np.array(sol["g"])))),
        "max_tau": float(np.max(np.abs(us))), "foot_drift_m": float(drift),
        "base_y": (qs[:, BASE_Y] - qs[0, BASE_Y]).tolist(), "base_z": (qs[:, 2] - qs[0, 2]).tolist(),
        "tau": us.tolist(), "F": F,
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for r in results:
        t = np.arange(r["nodes"] + 1) * r["dt"]
        axes[0].plot(t, 100 * np.array(r["base_y"]), marker=".", label=f"base y ({r['variant']})")
        axes[0].plot(t, 100 * np.array(r["base_z"]), ls="--", label=f"base z ({r['variant']})")
    axes[0].set_xlabel("t [s]")
    axes[0].set_ylabel("base displacement [cm]")
    axes[0].legend(fontsize=7)
    r = results[-1]
    t = np.arange(r["nodes"]) * r["dt"]
    tau = np.array(r["tau"])
    for j, leg in enumerate(("FL", "FR", "HL", "HR")):
        for k, (joint, ls) in enumerate(zip(("HAA", "HFE", "KFE"), ("-", "--", ":"))):
            axes[1].step(t, tau[:, 3 * j + k], where="post", ls=ls, color=f"C{j}", lw=1,
                         label=f"{leg}_{joint}")
    axes[1].axhline(TAU_MAX, color="k", lw=0.5)
    axes[1].axhline(-TAU_MAX, color="k", lw=0.5)
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylabel(f"joint torque [N m] ({r['variant']})")
    axes[1].legend(fontsize=6, ncol=4)
    fig.suptitle(f"solo12, feet held (3D x 4): base {100 * SHIFT:.0f} cm sideways and back, "
                 f"N = {r['nodes']}, T = {r['horizon']} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=40, help="shooting intervals N (default 40)")
    ap.add_argument("--horizon", type=float, default=1.6, help="duration T in s (default 1.6)")
    ap.add_argument("--variants", default="sx,external", help="sx, external or both (default)")
    ap.add_argument("--flags", default=None, help="C compiler flags of the external (default gen.build's)")
    ap.add_argument("--max-iter", type=int, default=2000, help="IPOPT's iteration cap (default 2000)")
    ap.add_argument("--reps", type=int, default=200, help="repetitions of the micro timings")
    ap.add_argument("--plot", default=str(Path(__file__).with_name("trajopt.png")), help="PNG path ('' none)")
    ap.add_argument("--json", default="", help="write the figures to this JSON file")
    ap.add_argument("--verbose", action="store_true", help="IPOPT's log")
    args = ap.parse_args(argv)
    model = gen.load_robot(ROBOT)
    results = []
    for variant in args.variants.split(","):
        r = solve(model, variant, args.nodes, args.horizon, max_iter=args.max_iter, flags=args.flags,
                  verbose=args.verbose)
        r.update(micro_timings(model, r.pop("F"), args.reps))
        results.append(r)
        print(f"({variant}) {r['status']}: {r['iterations']} IPOPT iterations, solve {r['solve_s']:.2f} s "
              f"(setup {r['setup_s']:.2f} s, nlpsol {r['nlpsol_s']:.2f} s); per dynamics evaluation in the "
              f"solver: value {r['g_per_dynamics_us']:.1f} us, Jacobian {r['jac_per_dynamics_us']:.1f} us; "
              f"standalone: value {r['eval_us']:.1f} us, Jacobian {r['jacobian_us']:.1f} us; "
              f"cost {r['cost']:.6g}, max |tau| {r['max_tau']:.3f} N m, max defect {r['max_defect']:.1e}, "
              f"foot drift {1e3 * r['foot_drift_m']:.2f} mm; inside F.map(1000): value {r['map_eval_us']:.2f} us, "
              f"Jacobian {r['map_jacobian_us']:.2f} us", flush=True)
    if args.plot:
        plot(results, Path(args.plot))
        print(f"wrote {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if all(r["success"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
