"""``rbdgen build ... --crocoddyl``: a header-only C++ crocoddyl action model next to a
derivative kernel (template ``gen/templates/crocoddyl.hpp.j2``).

The kernel decides the class: ``aba_derivatives`` gives
``rbdgen::DifferentialActionModelFreeFwdDynamics``, ``constrained_derivatives`` on a set
of world-anchored contacts gives ``rbdgen::DifferentialActionModelContactFwdDynamics``;
both derive from crocoddyl's classes of the same names (same constructor arguments, data
and ``quasiStatic``) and call the kernel, which returns the value after the derivatives,
once per ``calc``.  crocoddyl's ``inv_damping`` ``eps`` is the kernel's ``iterations = 1,
mu = eps``, and ``eps = 0`` rbdgen's default ``iterations = 3, mu = 1e-6`` (the Python
models' rule, :mod:`gen.crocoddyl`); other options, a position gain ``Kp``, weights,
velocity or unilateral rows and batched kernels have no crocoddyl counterpart and are
refused in one line.  The header checks at construction that crocoddyl's model is the
kernel's (sizes, armature, contact frames in crocoddyl's order, LOCAL, gains, damping).

This module needs neither crocoddyl nor Pinocchio: it writes text.
"""
from __future__ import annotations

import json
from pathlib import Path

import jinja2

from .emit import STAMP, TEMPLATES_DIR
from .errors import RbdgenError

CLASSES = {"aba_derivatives": ("DifferentialActionModelFreeFwdDynamics", "DifferentialActionDataFreeFwdDynamics"),
           "constrained_derivatives": ("DifferentialActionModelContactFwdDynamics",
                                       "DifferentialActionDataContactFwdDynamics")}
#: rbdgen's defaults, crocoddyl's inv_damping = 0
DEFAULT_ITERATIONS, DEFAULT_MU = 3, 1e-6


def header_name(kernel) -> str:
    return f"{kernel.symbol}_crocoddyl.hpp"


def inv_damping_of(options: dict) -> float:
    """crocoddyl's ``inv_damping`` equal to the kernel's options (module docstring)."""
    extra = sorted(set(options) - {"iterations", "mu", "route"})
    if extra:
        raise RbdgenError(f"--crocoddyl: option(s) {', '.join(extra)} have no crocoddyl counterpart")
    iterations, mu = int(options.get("iterations", DEFAULT_ITERATIONS)), float(options.get("mu", DEFAULT_MU))
    if iterations == 1:
        return mu
    if (iterations, mu) == (DEFAULT_ITERATIONS, DEFAULT_MU):
        return 0.0
    raise RbdgenError(f"--crocoddyl: iterations={iterations}, mu={mu:g} is no crocoddyl inv_damping (use "
                      f"--iterations 1 --mu EPS for inv_damping EPS, or the defaults for 0)")


def _contacts(kernel) -> dict:
    cset = kernel.cset
    if cset is None or not cset.constraints:
        raise RbdgenError("--crocoddyl with constrained_derivatives needs the contacts (-c 3D:FOOT,...)")
    if cset.Kp != 0.0 or cset.Kv != 0.0:
        raise RbdgenError(f"--crocoddyl: Baumgarte Kp={cset.Kp:g} (or Kv) is not supported; crocoddyl's contact gains "
                          f"are [0, Kd] here (--baumgarte 0,KD)")
    for c in cset.constraints:
        if c.weight != 1.0 or c.velocity or c.unilateral or c.body2 >= 0:
            raise RbdgenError(f"--crocoddyl: constraint '{c}' is not a crocoddyl contact (a frame held in the world, "
                              f"weight 1, bilateral position rows)")
    frames = [kernel.model.frame(c.frame1).name for c in cset.constraints]
    eps = inv_damping_of(kernel.options)
    return {"frames": [json.dumps(f) for f in frames], "sizes": [c.size for c in cset.constraints],
            "nc": cset.m, "kd": f"{cset.Kd:g}", "kd_literal": repr(float(cset.Kd)),
            "eps": f"{eps:g}", "eps_literal": repr(float(eps)),
            "spec": _comment(",".join(str(c) for c in cset.constraints))}


def _comment(text: str) -> str:
    """``text`` safe inside a C++ comment or string literal (names come from input files)."""
    return json.dumps(text)[1:-1].replace("*/", "*\\/")


def render(kernel) -> str:
    algorithm = kernel.algorithm.name
    if algorithm not in CLASSES:
        raise RbdgenError(f"--crocoddyl needs -a aba_derivatives (free dynamics) or -a constrained_derivatives "
                          f"(contacts); got -a {algorithm}")
    if kernel.batch:
        raise RbdgenError("--crocoddyl needs a scalar kernel (no --batch)")
    contact = algorithm == "constrained_derivatives"
    cls, data_cls = CLASSES[algorithm]
    ctx = {"stamp": STAMP, "symbol": kernel.symbol, "prefix": kernel.symbol, "cls": cls, "data_cls": data_cls,
           "algorithm": algorithm, "robot": _comment(kernel.model.name), "contact": contact,
           "header": header_name(kernel), "c_header": kernel.header_path.name,
           "guard": f"{kernel.symbol.upper()}_CROCODDYL_HPP", "nq": kernel.model.nq, "nv": kernel.model.nv,
           "work_size": kernel.work_size, **(_contacts(kernel) if contact else {})}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env.get_template("crocoddyl.hpp.j2").render(ctx)


def write_header(kernel, out_dir) -> Path:
    """Write the C++ action model of ``kernel`` into ``out_dir`` (module docstring)."""
    path = Path(out_dir) / header_name(kernel)
    path.write_text(render(kernel))
    return path
