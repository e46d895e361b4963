"""MuJoCo as a benchmark peer (issue 16 §4): its C library called from the timing
harness (:mod:`gen.bench.harness`) on the same MJCF file, where it computes the same
quantity as a registry row (the row's ``mujoco_peer``):

* ``bias`` (row ``nle``): ``mj_kinematics``, ``mj_comPos``, ``mj_comVel``,
  ``mj_rne(flg_acc = 0)`` -- MuJoCo's ``qfrc_bias`` from ``qpos, qvel``;
* ``solve`` (row ``crba_solve``): ``mj_kinematics``, ``mj_comPos``, ``mj_crb``,
  ``mj_factorM``, ``mj_solveM`` -- ``x = M(q)^-1 b``.

That is the shortest sequence of MuJoCo's public functions giving the quantity from the
state; its call overhead, stated in every report, is the work MuJoCo does there that the
specialised kernel does not: ``mj_kinematics`` also places every geom, site, camera and
light, and ``mj_comPos`` computes the subtree centres of mass and the body inertias in
the global frame (MuJoCo's ``cinert``, ``cdof`` layout).  The harness converts rbdgen's
coordinates to MuJoCo's and back inside the timed call (copies, the quaternion order
``[x y z w]`` -> ``[w x y z]``, and for a free joint a 3x3 rotation of ``b`` and ``x``,
O(nv) in all).  ``dof_armature`` is set to 0 once after loading, so ``M`` is the rigid-body
matrix rbdgen computes (MuJoCo adds armature to ``M``; timing does not depend on it), then
``mj_setConst``: MuJoCo caches the diagonal of M at ``qpos0`` (``dof_M0``, armature
included) and ``mj_crb`` copies it for the "simple" dofs (``dof_simplenum``: bodies hanging from
the world), so without it a slider with armature, child of the world,
keeps its armature in M (``crba_solve`` 2.6e-3 relative off on a cart beside a pendulum,
tests/test_mujocoref.py).  MuJoCo's warnings and errors go to the program's stderr, not
to its default ``MUJOCO_LOG.TXT`` in the working directory.

Conventions (``gen.mjcf``): rbdgen's ``q`` and ``v`` have MuJoCo's addresses; a free
joint's linear velocity is in the body frame (rbdgen) or the world frame (MuJoCo),
``v_mj = T v`` with ``T = diag(R, I)``, so ``M = T^T M_mj T`` and ``x = T^T M_mj^-1 T b``
(``T`` orthogonal).  ``bias`` is timed only on models without free joints: with one,
rbdgen's ``nle`` is ``T^T (qfrc_bias + M_mj dT/dt v)``, which MuJoCo's call sequence does
not compute (it would add a mass-matrix product to MuJoCo's side).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ...algorithms.registry import Algorithm
from ...model import Model
from .base import Bench, Plan

#: peer name -> (MuJoCo calls as reported, the rbdgen inputs it reads)
CALLS = {"bias": "mj_kinematics + mj_comPos + mj_comVel + mj_rne(flg_acc=0)",
         "solve": "mj_kinematics + mj_comPos + mj_crb + mj_factorM + mj_solveM"}


def package_dir() -> Path | None:
    """The installed ``mujoco`` package's folder (headers under ``include/``, the shared
    library beside them), or None."""
    spec = importlib.util.find_spec("mujoco")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def library() -> Path | None:
    d = package_dir()
    libs = sorted(d.glob("libmujoco.so*")) if d else []
    return libs[0] if libs else None


def unavailable(model: Model, algo: Algorithm) -> str | None:
    """Why MuJoCo cannot be timed against ``algo`` on ``model`` (None: it can)."""
    if algo.mujoco_peer is None:
        return f"MuJoCo has no counterpart of {algo.name} (peers: nle, crba_solve)"
    if not str(model.source).lower().endswith(".xml"):
        return "MuJoCo is timed on MJCF models only (the same file on both sides)"
    d = package_dir()
    if d is None or library() is None or not (d / "include" / "mujoco" / "mujoco.h").is_file():
        return "the mujoco package with its C headers and libmujoco is not installed"
    if algo.mujoco_peer == "bias" and any(b.kind == "free" for b in model.bodies):
        return ("MuJoCo's free-joint velocity is world-linear: its qfrc_bias is not rbdgen's nle "
                "(see gen.bench.peers.mujoco)")
    return None


def context(model: Model, algo: Algorithm) -> dict:
    """The harness template's view: the call sequence, the quaternions to reorder (their
    first address in q), the free joints (q address of the quaternion, v address of the
    linear part), nq, nv."""
    quats, frees = [], []
    for b in model.bodies:
        if b.kind in ("free", "spherical"):
            quats.append(b.idx_q + (3 if b.kind == "free" else 0))
        if b.kind == "free":
            frees.append({"quat": b.idx_q + 3, "lin": b.idx_v})
    return {"peer": algo.mujoco_peer, "calls": CALLS[algo.mujoco_peer], "quats": quats, "frees": frees,
            "nq": model.nq, "nv": model.nv}


def compile_args() -> list[str]:
    return [f"-I{package_dir() / 'include'}"]


def link_args() -> list[str]:
    lib = library()
    return [str(lib), f"-Wl,-rpath,{lib.parent}"]


def plan(bench: Bench) -> Plan | str:
    why = unavailable(bench.model, bench.algo)
    if why:
        return why
    ctx = context(bench.model, bench.algo)
    return Plan(impl={"name": "mujoco", "key": "mj", "kind": "mujoco", "work_size": None, "colmajor": False},
                block="mj", context=ctx, include_dirs=[package_dir() / "include"], link=tuple(link_args()),
                args=[str(bench.model.source)], report={"calls": ctx["calls"]})
