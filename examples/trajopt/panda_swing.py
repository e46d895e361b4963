"""Exact vs limited-memory Hessian in IPOPT on rbdgen's compiled forward dynamics (issue 35 §4).

panda (fingers locked, 7 joints) swings its hand from the "ready" posture to a point a
quarter turn about the base's vertical axis and stops there, under Franka's torque and
joint limits.  Direct multiple shooting over N intervals of dt: the state ``(q_k, v_k)``
and the torque ``tau_k`` are decision variables, each interval one semi-implicit Euler
step of the free forward dynamics,

    v_{k+1} = v_k + dt aba(q_k, v_k, tau_k),   q_{k+1} = q_k + dt v_{k+1}

Constraints: ``q_0`` = ready, ``v_0 = v_N = 0``, the hand's TCP at the target at the last
node, ``|tau| <= (87, 87, 87, 87, 12, 12, 12) N m`` and the joint ranges (Franka's
published limits: the URDF model rbdgen loads keeps no limits).  Cost:
``sum dt (1e-3 |tau_k|^2 + |v_{k+1}|^2)``.

Solved by IPOPT (``casadi.nlpsol``) three ways:

(1) ``external-exact``: ``gen.casadi_external(panda, "aba", hessian=True)``, the compiled C
    with its Jacobian (``jac_<name>``: aba_derivatives) and the second derivatives IPOPT's
    exact Hessian needs (``adj1_<name>``, ``jac_adj1_<name>``: aba_derivatives and
    aba_hessian_product), IPOPT's default exact Hessian;
(2) ``external-lbfgs``: the same external, ``hessian_approximation = limited-memory``;
(3) ``sx-exact``: ``gen.casadi_function`` (the SX graph, expanded), CasADi's own exact
    Hessian by AD: the reference.

Run ``python examples/trajopt/panda_swing.py`` (``--help``); it prints the table of
examples/trajopt/README.md and writes ``panda_swing.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import casadi as ca
import numpy as np

import gen
from gen.backend import NUMPY, SXBackend
from gen.kinematics import frame_placement

ROBOT = "panda"
TCP = "panda_hand_tcp"
READY = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])
#: Franka Emika's published limits (robot and interface specifications)
TAU_MAX = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])
Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
W_TAU = 1e-3
VARIANTS = ("external-exact", "external-lbfgs", "sx-exact")


def tcp_function(model) -> ca.Function:
    q = ca.SX.sym("q", model.nq)
    return ca.Function("tcp", [q], [frame_placement(model, TCP, q, be=SXBackend())[1]])


def target(model) -> np.ndarray:
    """The ready TCP position turned a quarter turn about the base's z axis."""
    p = np.asarray(frame_placement(model, TCP, READY.reshape(-1, 1), be=NUMPY)[1]).ravel()
    return np.array([-p[1], p[0], p[2]])


def transcribe(model, F, nodes: int, horizon: float):
    dt, nv = horizon / nodes, model.nv
    tcp = tcp_function(model)
    Q = [ca.MX.sym(f"q{k}", nv) for k in range(nodes + 1)]
    V = [ca.MX.sym(f"v{k}", nv) for k in range(nodes + 1)]
    U = [ca.MX.sym(f"tau{k}", nv) for k in range(nodes)]
    g, cost = [], 0
    for k in range(nodes):
        v1 = V[k] + dt * F(Q[k], V[k], U[k])
        g += [V[k + 1] - v1, Q[k + 1] - (Q[k] + dt * v1)]
        cost += dt * (W_TAU * ca.sumsqr(U[k]) + ca.sumsqr(V[k + 1]))
    g.append(tcp(Q[nodes]) - target(model))
    lbx, ubx, x0 = [], [], []
    for k in range(nodes + 1):
        rest = k in (0, nodes)
        lbx += [READY if k == 0 else Q_MIN, np.zeros(nv) if rest else np.full(nv, -np.inf)]
        ubx += [READY if k == 0 else Q_MAX, np.zeros(nv) if rest else np.full(nv, np.inf)]
        x0 += [READY, np.zeros(nv)]
        if k < nodes:
            lbx, ubx, x0 = lbx + [-TAU_MAX], ubx + [TAU_MAX], x0 + [np.zeros(nv)]
    x = ca.vertcat(*[z for k in range(nodes + 1) for z in ([Q[k], V[k]] + ([U[k]] if k < nodes else []))])
    g = ca.vertcat(*g)
    zero = np.zeros(g.shape[0])
    return {"x": x, "f": cost, "g": g}, dict(lbx=np.concatenate(lbx), ubx=np.concatenate(ubx), lbg=zero,
                                             ubg=zero, x0=np.concatenate(x0))


def solve(model, variant: str, nodes: int, horizon: float, *, max_iter: int, verbose: bool,
          repeats: int = 3) -> dict:
    t0 = time.perf_counter()
    F = gen.casadi_function(model, "aba") if variant == "sx-exact" else \
        gen.casadi_external(model, "aba", hessian=True)
    t_setup = time.perf_counter() - t0
    nlp, bounds = transcribe(model, F, nodes, horizon)
    ipopt = {"print_level": 5 if verbose else 0, "max_iter": max_iter, "tol": 1e-8, "sb": "yes"}
    if variant == "external-lbfgs":
        ipopt.update(hessian_approximation="limited-memory", limited_memory_max_history=30)
    solver = ca.nlpsol(f"swing_{variant.replace('-', '_')}", "ipopt", nlp,
                       {"expand": variant.startswith("sx"), "print_time": False, "ipopt": ipopt})
    times = []
    for _ in range(repeats):               # the fastest of a few solves: the machine is shared
        t0 = time.perf_counter()
        sol = solver(**bounds)
        times.append(time.perf_counter() - t0)
    t_solve = min(times)
    st = solver.stats()
    x = np.array(sol["x"]).ravel()
    per = 3 * model.nv
    us = np.array([x[k * per + 2 * model.nv:(k + 1) * per] for k in range(nodes)])
    return {"variant": variant, "nodes": nodes, "horizon": horizon, "success": bool(st["success"]),
            "status": st["return_status"], "iterations": int(st["iter_count"]), "solve_s": t_solve,
            "setup_s": t_setup, "per_iteration_ms": 1e3 * t_solve / max(1, int(st["iter_count"])),
            "hessian_s": float(st.get("t_wall_nlp_hess_l", 0.0)), "cost": float(sol["f"]),
            "max_defect": float(np.max(np.abs(np.array(sol["g"])))), "max_tau_ratio": float(np.max(np.abs(us) / TAU_MAX)),
            "x": x.tolist()}


def table(results: list[dict]) -> str:
    rows = ["| variant | IPOPT iterations | solve [s] | per iteration [ms] | of which Hessian [s] | cost | max defect |",
            "|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r['variant']} | {r['iterations']} | {r['solve_s']:.2f} | {r['per_iteration_ms']:.1f} | "
                    f"{r['hessian_s']:.2f} | {r['cost']:.8g} | {r['max_defect']:.1e} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=40, help="shooting intervals N (default 40)")
    ap.add_argument("--horizon", type=float, default=0.5, help="duration T in s (default 0.5)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--max-iter", type=int, default=3000, help="IPOPT's iteration cap (default 3000)")
    ap.add_argument("--json", default=str(Path(__file__).with_name("panda_swing.json")),
                    help="write the figures here ('' none)")
    ap.add_argument("--repeats", type=int, default=3, help="solves per variant, the fastest reported (default 3)")
    ap.add_argument("--verbose", action="store_true", help="IPOPT's log")
    args = ap.parse_args(argv)
    model = gen.load_robot(ROBOT)
    results = []
    for variant in args.variants.split(","):
        r = solve(model, variant, args.nodes, args.horizon, max_iter=args.max_iter, verbose=args.verbose,
                  repeats=args.repeats)
        print(f"({variant}) {r['status']}: {r['iterations']} iterations, {r['solve_s']:.2f} s, cost {r['cost']:.8g}, "
              f"max defect {r['max_defect']:.1e}, max |tau|/limit {r['max_tau_ratio']:.2f}", flush=True)
        results.append(r)
    xs = {r["variant"]: np.array(r["x"]) for r in results}
    if "external-exact" in xs and "sx-exact" in xs:
        print(f"external-exact vs sx-exact solution: max |dx| {np.max(np.abs(xs['external-exact'] - xs['sx-exact'])):.1e}")
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([{k: v for k, v in r.items() if k != "x"} for r in results], indent=1))
    return 0 if all(r["success"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
