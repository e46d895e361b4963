"""ADAM as a benchmark peer (issue 15 §5): ``adam-robotics``' CasADi backend builds the
dynamics of the same URDF as symbolic CasADi functions, which a user would generate C
from; the harness (:mod:`gen.bench.harness`) compiles that C with the same flags as
rbdgen's kernels and times it in the same program.  A registry row's ``adam_peer`` names
the quantity:

* ``bias_force`` (row ``nle``): ``h(H, s, v_b, s_dot)``;
* ``mass_matrix`` (row ``crba``): ``M(H, s)``;
* ``inverse_dynamics`` (row ``rnea``): ``M(H, s) a + h`` -- ADAM's bias-force form, as
  its users compute inverse dynamics;
* ``aba`` (row ``aba``): ADAM's floating-base ABA, which takes joint torques only (an
  unactuated base): the harness then zeroes the base entries of ``tau`` in every state,
  for every implementation.

Conventions: ADAM's model always floats its base.  rbdgen's free-flyer ``q = [p, quat
(x y z w)]`` becomes ``H = [[R(quat), p], [0, 1]]`` inside the function (part of ADAM's
timed call, ~30 operations), velocities in ADAM's body-fixed representation (Pinocchio's
LOCAL ``[v; w]``); a fixed-base robot gets ``H = I``, ``v_b = 0`` and the joint block of
ADAM's outputs (ADAM computes the base rows too: that is its cost), and has no ``aba``
counterpart.  Gravity is the model's.

ADAM reads the model's URDF through ``urdf_parser_py``, which refuses or misreads what
URDF allows (a joint or inertial without ``<origin>``: go1, g1; a ``<texture>`` without a
file: icub; mimic joints: panda's fingers).  It is given the same file with only the
kinematic and inertial data kept (:func:`urdf_text`): visuals, collisions, transmissions
and plugins dropped, the spec's defaults written out (origin 0, axis x), and the joints
rbdgen locked (``--lock``) made fixed at q = 0, as rbdgen locks them.  Generated with CasADi's
``CodeGenerator`` (``casadi_real`` double, ``casadi_int`` int, CSE as ADAM sets it).
"""
from __future__ import annotations

import importlib.util
import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import casadi as ca
import numpy as np

from opcount.counter import count_function

from ...algorithms.registry import Algorithm
from ...model import Model
from .base import Bench, Plan

#: rbdgen joint kinds ADAM's URDF model reads the same way (continuous joints are an
#: angle there, ``[cos, sin]`` here)
KINDS = ("revolute", "prismatic")


def unavailable(model: Model, algo: Algorithm) -> str | None:
    """Why ADAM cannot be timed against ``algo`` on ``model`` (None: it can)."""
    if algo.adam_peer is None:
        return f"ADAM has no counterpart of {algo.name} (peers: rnea, nle, crba, aba)"
    if importlib.util.find_spec("adam") is None:
        return "adam-robotics is not installed (pip install 'adam-robotics[casadi]')"
    if not str(model.source).lower().endswith(".urdf"):
        return "ADAM is timed on URDF models only (the same file on both sides)"
    floating = bool(model.bodies) and model.bodies[0].kind == "free"
    other = sorted({b.kind for b in model.bodies[1 if floating else 0:] if b.kind not in KINDS})
    if other or model.has_mimic:
        return f"ADAM reads {', '.join(other) or 'mimic'} joints differently"
    if algo.adam_peer == "aba" and not floating:
        return "ADAM's model always floats its base: it has no fixed-base forward dynamics"
    return None


def zero_base_torque(model: Model, algo: Algorithm) -> bool:
    """Whether the states must have ``tau_base = 0`` (ADAM's ABA takes joint torques only)."""
    return algo.adam_peer == "aba" and model.bodies[0].kind == "free"


def urdf_text(model: Model) -> str:
    """The model's URDF as ADAM is given it: links (inertial only) and joints, the URDF
    spec's defaults explicit, joints that are not bodies of ``model`` fixed at q = 0."""
    root = ET.parse(model.source).getroot()
    moving = {b.name for b in model.bodies}
    for el in list(root):
        if el.tag not in ("link", "joint"):
            root.remove(el)
    for link in root.findall("link"):
        for el in list(link):
            if el.tag != "inertial":
                link.remove(el)
        for inertial in link.findall("inertial"):
            if inertial.find("origin") is None:
                ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
    for joint in root.findall("joint"):
        if joint.find("origin") is None:
            ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
        for el in joint.findall("mimic"):
            joint.remove(el)
        if joint.get("name") not in moving:
            joint.set("type", "fixed")
        elif joint.find("axis") is None:
            ET.SubElement(joint, "axis", xyz="1 0 0")
    return ET.tostring(root, encoding="unicode")


def _kindyn(model: Model):
    from adam.casadi import KinDynComputations
    from adam.core.constants import Representations
    logging.getLogger("adam").setLevel(logging.ERROR)
    floating = model.bodies[0].kind == "free"
    joints = [b.name for b in model.bodies[1 if floating else 0:]]
    kd = KinDynComputations(urdf_text(model), joints, gravity=np.concatenate([model.gravity, np.zeros(3)]))
    kd.set_frame_velocity_representation(Representations.BODY_FIXED_REPRESENTATION)
    return kd


def _base_transform(q, floating: bool):
    if not floating:
        return ca.SX.eye(4)
    x, y, z, w = q[3], q[4], q[5], q[6]
    R = ca.vertcat(ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
                   ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
                   ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))
    return ca.vertcat(ca.horzcat(R, q[0:3]), ca.horzcat(ca.SX.zeros(1, 3), ca.SX.ones(1, 1)))


def function(model: Model, algo: Algorithm, name: str) -> ca.Function:
    """ADAM's counterpart of ``algo`` as a CasADi function of rbdgen's inputs, returning
    rbdgen's first output (matrices column-major, CasADi's layout)."""
    kd = _kindyn(model)
    floating = model.bodies[0].kind == "free"
    ins = [ca.SX.sym(n, size) for n, size in algo.inputs(model, None)]
    q, v = ins[0], ins[1] if len(ins) > 1 else None
    H = _base_transform(q, floating)
    s = q[7:] if floating else q
    o = 0 if floating else 6                          # ADAM's rows of the joints
    if v is not None:
        vb, sd = (v[0:6], v[6:]) if floating else (ca.SX.zeros(6), v)
    kind = algo.adam_peer
    if kind == "mass_matrix":
        out = kd.mass_matrix_fun()(H, s)[o:, o:]
    elif kind == "bias_force":
        out = kd.bias_force_fun()(H, s, vb, sd)[o:]
    elif kind == "inverse_dynamics":
        a = ins[2] if floating else ca.vertcat(ca.SX.zeros(6), ins[2])
        out = (ca.mtimes(kd.mass_matrix_fun()(H, s), a) + kd.bias_force_fun()(H, s, vb, sd))[o:]
    else:                                              # aba: the base unactuated
        out = kd.aba_fun()(H, s, vb, sd, ins[2][6:])
    return ca.Function(name, ins, [ca.densify(out)], [n for n, _ in algo.inputs(model, None)],
                       [algo.outputs(model, None)[0][0]], {"cse": True})


def c_source(f: ca.Function, path: Path) -> Path:
    """C of ``f`` by CasADi's code generator (the function ``<f.name()>`` with CasADi's
    ``(arg, res, iw, w, mem)`` signature and its helpers)."""
    cg = ca.CodeGenerator(path.name, {"casadi_int": "int", "casadi_real": "double", "with_header": False,
                                      "verbose": False})
    cg.add(f)
    text = cg.dump()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def plan(bench: Bench) -> Plan | str:
    model, algo = bench.model, bench.algo
    why = unavailable(model, algo)
    if why:
        return why
    bench.say(f"ADAM's {algo.adam_peer} of {model.name} (adam-robotics, CasADi)")
    try:
        f = function(model, algo, f"adam_{algo.name}")
    except Exception as e:        # noqa: BLE001 - a third-party library's failure is a skip reason
        return f"ADAM failed on {model.name}: {' '.join(str(e).split())[:200]}"
    ctx = {"function": f.name(), "sz_arg": int(f.sz_arg()), "sz_res": int(f.sz_res()),
           "sz_iw": int(f.sz_iw()), "sz_w": int(f.sz_w())}

    def unactuated_base(states, offsets):          # ADAM's ABA takes joint torques only
        tau = offsets["tau"]
        states[:, tau:tau + 6] = 0.0

    return Plan(impl={"name": "adam", "key": "adam", "kind": "adam", "work_size": None, "colmajor": True},
                block="adam", context=ctx, sources=[c_source(f, bench.root / f"{f.name()}.c")],
                report={"quantity": algo.adam_peer, "ops": sum(count_function(f).values())},
                adjust_states=unactuated_base if zero_base_torque(model, algo) else None)
