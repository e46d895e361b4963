"""A :class:`gen.model.Model` as the flat arrays of the generic C library's
``rbg_model`` struct (``rbg.h``), and as a C initializer for embedding in a program.

The struct (one entry per body ``i`` unless noted; see ``rbg.h`` for the contract):

=============  ========  =============================================================
field          C type    contents
=============  ========  =============================================================
nbodies        int       number of moving bodies (joints)
nq, nv         int       configuration / velocity dimensions
parent         int[nb]   parent body, -1 for the world, ``parent[i] < i``
jtype          int[nb]   RBG_REVOLUTE 0, RBG_REVOLUTE_UNB 1, RBG_PRISMATIC 2, RBG_FREE 3,
                         RBG_SPHERICAL 4, RBG_PLANAR 5, RBG_HELICAL 6 (:data:`JOINT_CODES`)
axis_k         int[nb]   k if the axis is exactly +e_k, else -1 (always -1 for free,
                         spherical and planar)
idx_q, idx_v   int[nb]   first q / v coordinate of the joint
nvj            int[nb]   velocity dimension of the joint (1, 3 or 6)
dof_parent     int[nv]   Featherstone 2005's λ over dofs (:meth:`Model.dof_parents`)
axis           double[3 nb]   unit joint axis in the joint frame (0 for free, spherical
                              and planar)
pitch          double[nb]     a helical joint's ``Body.pitch`` (0 for other kinds)
plc_R          double[9 nb]   placement rotation, row-major (parent <- joint, q neutral)
plc_p          double[3 nb]   placement translation
inertia        double[10 nb]  m, m c (3), I_O = inertia about the body origin, packed
                              Ixx Ixy Ixz Iyy Iyz Izz (body frame)
gravity        double[3]      world gravity
=============  ========  =============================================================

:data:`STRUCT_FIELDS` lists the same layout for programs; :func:`work_sizes` mirrors the
``RBG_WORK_*`` macros.

A :class:`gen.constraints.ConstraintSet` becomes the first block of ``rbg_constraints``
(:data:`CONSTRAINT_FIELDS`, per constraint ``l``); ``rbg_constraints_init`` fills the
second block (row offsets, sparsity patterns) into an int buffer of
:func:`constraints_iwork_size` ints:

=============  ========  =============================================================
field          C type    contents
=============  ========  =============================================================
nc             int       number of constraints
size           int[nc]   3 (3D) or 6 (6D)
body1, body2   int[nc]   bodies carrying frames A and B, -1 for the world
M1, M2         double[12 nc]  the frames in their bodies (in the world for -1): R
                              row-major (frame -> body), then p
weight         double[nc]     positive weights (damping rho = mu / weight)
kp, kd         double[nc]     Baumgarte gains per constraint (ConstraintSet.gains)
unilateral     int[nc]   1 if the normal row is one-sided (spec ``3D+`` / ``6D+``), else 0
=============  ========  =============================================================
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..algorithms import ALGORITHMS
from ..constraint_spec import as_constraint_set
from ..errors import RbdgenError
from ..model import Model

JOINT_CODES = {"revolute": 0, "revolute_unb": 1, "prismatic": 2, "free": 3, "spherical": 4, "planar": 5,
               "helical": 6}
#: kinds whose ``axis`` the C does not read (stored as 0, ``axis_k = -1``)
NO_AXIS = ("free", "spherical", "planar")

# (field, C element type, length as a function of (nbodies, nv)); order = struct order.
STRUCT_FIELDS = [
    ("nbodies", "int", None),
    ("nq", "int", None),
    ("nv", "int", None),
    ("parent", "int", lambda nb, nv: nb),
    ("jtype", "int", lambda nb, nv: nb),
    ("axis_k", "int", lambda nb, nv: nb),
    ("idx_q", "int", lambda nb, nv: nb),
    ("idx_v", "int", lambda nb, nv: nb),
    ("nvj", "int", lambda nb, nv: nb),
    ("dof_parent", "int", lambda nb, nv: nv),
    ("axis", "double", lambda nb, nv: 3 * nb),
    ("pitch", "double", lambda nb, nv: nb),
    ("plc_R", "double", lambda nb, nv: 9 * nb),
    ("plc_p", "double", lambda nb, nv: 3 * nb),
    ("inertia", "double", lambda nb, nv: 10 * nb),
    ("gravity", "double[3]", None),
]
ARRAY_FIELDS = [f for f, _, n in STRUCT_FIELDS if n is not None]

def generic_ids(*families: str) -> dict[str, int]:
    """``rbg_algo`` ids of the registered algorithms of ``families`` that have generic C
    (their rows' :class:`~gen.algorithms.registry.GenericC`)."""
    return {n: a.generic.algo_id for n, a in ALGORITHMS.items() if a.generic is not None and a.family in families}


ALGO_IDS = generic_ids("dynamics", "factorisation")
CONSTRAINED_ALGO_IDS = generic_ids("solver")
DELASSUS_ALGO_IDS = generic_ids("delassus")
EVENT_ALGO_IDS = generic_ids("event")


def _work(names, model: Model, m: int = 0) -> dict[str, int]:
    return {a: ALGORITHMS[a].generic.work(model.nbodies, model.nv, m) for a in names}


# (field, C element type, length as a function of nc); order = struct order.
CONSTRAINT_FIELDS = [
    ("nc", "int", None),
    ("size", "int", lambda nc: nc),
    ("body1", "int", lambda nc: nc),
    ("body2", "int", lambda nc: nc),
    ("M1", "double", lambda nc: 12 * nc),
    ("M2", "double", lambda nc: 12 * nc),
    ("weight", "double", lambda nc: nc),
    ("kp", "double", lambda nc: nc),
    ("kd", "double", lambda nc: nc),
    ("unilateral", "int", lambda nc: nc),
]
CONSTRAINT_ARRAY_FIELDS = [f for f, _, n in CONSTRAINT_FIELDS if n is not None]


@dataclass(frozen=True)
class ModelArrays:
    """The ``rbg_model`` fields as contiguous NumPy arrays (``np.intc`` / float64)."""

    name: str
    nbodies: int
    nq: int
    nv: int
    parent: np.ndarray
    jtype: np.ndarray
    axis_k: np.ndarray
    idx_q: np.ndarray
    idx_v: np.ndarray
    nvj: np.ndarray
    dof_parent: np.ndarray
    axis: np.ndarray
    pitch: np.ndarray
    plc_R: np.ndarray
    plc_p: np.ndarray
    inertia: np.ndarray
    gravity: np.ndarray


def _axis_k(axis: np.ndarray) -> int:
    for k in range(3):
        if np.array_equal(np.asarray(axis, dtype=float), np.eye(3)[k]):
            return k
    return -1


def inertia_params(inertia) -> np.ndarray:
    """``(m, m c, I_O packed)`` of a :class:`gen.model.Inertia`; I_O is taken from
    ``Inertia.matrix()`` so the generic C uses the reference's exact numbers."""
    M6 = inertia.matrix()
    I_O = M6[3:, 3:]
    return np.array([inertia.mass, *(inertia.mass * np.asarray(inertia.com, dtype=float)),
                     I_O[0, 0], I_O[0, 1], I_O[0, 2], I_O[1, 1], I_O[1, 2], I_O[2, 2]])


def serialize(model: Model) -> ModelArrays:
    """The struct arrays of ``model``.  The generic C implements every joint kind of
    :data:`gen.model.JOINT_KINDS` (:data:`JOINT_CODES`); a model with a mimic joint is
    refused."""
    bodies = model.bodies
    turned = [b for b in bodies if b.angle_offset]
    if turned:      # only gen.canonical_frames' traced copies have one; the peers take the model
        raise RbdgenError(f"{model.name}: the generic C library has no joint angle offsets (joint '{turned[0].name}')")
    mimic = [b for b in bodies if b.mimic is not None]
    if mimic:
        raise RbdgenError(f"{model.name}: the generic C library has no mimic joints (joint '{mimic[0].name}'); "
                          f"the specialized C (gen.build) supports them")
    ints = lambda xs: np.ascontiguousarray(xs, dtype=np.intc)
    flat = lambda xs, n: np.ascontiguousarray(np.reshape(xs, (len(bodies) * n,)) if bodies else np.zeros(0),
                                              dtype=np.float64)
    axes = [np.zeros(3) if b.kind in NO_AXIS else np.asarray(b.axis, dtype=float) for b in bodies]
    return ModelArrays(
        name=model.name, nbodies=len(bodies), nq=model.nq, nv=model.nv,
        parent=ints([b.parent for b in bodies]),
        jtype=ints([JOINT_CODES[b.kind] for b in bodies]),
        axis_k=ints([-1 if b.kind in NO_AXIS else _axis_k(a) for b, a in zip(bodies, axes)]),
        idx_q=ints([b.idx_q for b in bodies]),
        idx_v=ints([b.idx_v for b in bodies]),
        nvj=ints([b.nv for b in bodies]),
        dof_parent=ints(model.dof_parents()),
        axis=flat(axes, 3),
        pitch=flat([float(b.pitch) if b.kind == "helical" else 0.0 for b in bodies], 1),
        plc_R=flat([np.asarray(b.placement.R, dtype=float) for b in bodies], 9),
        plc_p=flat([np.asarray(b.placement.p, dtype=float) for b in bodies], 3),
        inertia=flat([inertia_params(b.inertia) for b in bodies], 10),
        gravity=np.ascontiguousarray(model.gravity, dtype=np.float64).reshape(3),
    )


def work_sizes(model: Model) -> dict[str, int]:
    """Doubles of workspace per algorithm (``rbg_work_size`` / ``RBG_WORK_*``)."""
    return _work(ALGO_IDS, model)


@dataclass(frozen=True)
class ConstraintArrays:
    """The caller block of ``rbg_constraints`` as contiguous NumPy arrays; ``m`` is the
    number of rows (set again by ``rbg_constraints_init``)."""

    spec: str
    nc: int
    m: int
    size: np.ndarray
    body1: np.ndarray
    body2: np.ndarray
    M1: np.ndarray
    M2: np.ndarray
    weight: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    unilateral: np.ndarray


def _se3_row(M) -> list[float]:
    return [*np.asarray(M.R, dtype=float).reshape(9), *np.asarray(M.p, dtype=float).reshape(3)]


def serialize_constraints(model: Model, cset) -> ConstraintArrays:
    """The struct arrays of a constraint set (a :class:`~gen.constraints.ConstraintSet`,
    a spec string or None for the empty set) on ``model``."""

    cs = as_constraint_set(model, cset)
    cons = cs.constraints
    ints = lambda xs: np.ascontiguousarray(xs, dtype=np.intc)
    flat = lambda rows: np.ascontiguousarray(np.reshape(rows, (-1,)) if rows else np.zeros(0), dtype=np.float64)
    return ConstraintArrays(
        spec=cs.spec, nc=len(cons), m=cs.m,
        size=ints([c.size for c in cons]),
        body1=ints([c.body1 for c in cons]),
        body2=ints([c.body2 for c in cons]),
        M1=flat([_se3_row(c.placement1) for c in cons]),
        M2=flat([_se3_row(c.placement2) for c in cons]),
        weight=flat([float(c.weight) for c in cons]),
        kp=flat([cs.gains(c)[0] for c in range(len(cons))]),
        kd=flat([cs.gains(c)[1] for c in range(len(cons))]),
        unilateral=ints([int(c.unilateral) for c in cons]),
    )


def constraints_iwork_size(model: Model, cset) -> int:
    """Ints ``rbg_constraints_init`` needs (``rbg_constraints_iwork_size``): the row
    offsets, supports, S_E, ES, the three patterns and proxLCP's row order and pattern at
    their upper bounds, then an N x N scratch for the symbolic factorisation (N = m + nv)."""
    a = serialize_constraints(model, cset)
    nb, nv, nc, m = model.nbodies, model.nv, a.nc, a.m
    n = m + nv
    return ((nc + 1) + (nc + 1 + nc * nv) + nb + (nb + 1 + nb * nc) + (n + 1 + n * (n - 1) // 2)
            + (nv + 1 + nv * (nv - 1) // 2) + (m + 1 + m * (m - 1) // 2) + m + (n + 1 + n * (n - 1) // 2)
            + n * n)


def constrained_work_sizes(model: Model, cset) -> dict[str, int]:
    """Doubles of workspace per proximal solver for this constraint set
    (``rbg_constrained_work_size`` / ``RBG_WORK_<ALGO>(nb, nv, m)``)."""
    m = serialize_constraints(model, cset).m
    return _work(CONSTRAINED_ALGO_IDS, model, m)


def event_work_sizes(model: Model, cset) -> dict[str, int]:
    """Doubles of workspace of ``rbg_prox_lcp`` and ``rbg_impulse`` for this constraint set
    (``rbg_constrained_work_size`` / ``RBG_WORK_<ALGO>(nb, nv, m)``)."""
    m = serialize_constraints(model, cset).m
    return _work(EVENT_ALGO_IDS, model, m)


def delassus_work_sizes(model: Model, cset) -> dict[str, int]:
    """Doubles of workspace per Delassus algorithm for this constraint set
    (``rbg_constrained_work_size`` / ``RBG_WORK_<ALGO>(nb, nv, m)``)."""
    m = serialize_constraints(model, cset).m
    return _work(DELASSUS_ALGO_IDS, model, m)


# --- C initializer ---------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def c_identifier(text: str) -> str:
    """``text`` with every non-identifier character replaced by ``_`` (``chain:7`` ->
    ``chain_7``)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return out if _IDENT.match(out) else "_" + out


def _fmt(x) -> str:
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if not np.isfinite(x):
        raise RbdgenError(f"model_to_c: non-finite model constant {x}")
    r = repr(float(x))                      # shortest round-trip representation
    return r if ("." in r or "e" in r) else r + ".0"


def _c_array(ctype: str, name: str, values, per_line: int) -> str:
    vals = [_fmt(x) for x in values]
    if not vals:                            # C forbids zero-length arrays
        vals = ["0"]
    lines = [", ".join(vals[k:k + per_line]) for k in range(0, len(vals), per_line)]
    body = ",\n    ".join(lines)
    return f"static const {ctype} {name}[{len(vals)}] = {{\n    {body}}};\n"


def model_to_c(model: Model, name: str | None = None) -> str:
    """C source defining ``static const rbg_model <name>`` and its arrays, plus
    ``<NAME>_WORK_<ALGO>`` work-size macros, for a program that ``#include "rbg.h"``
    and compiles ``rbg.c``.  Values print exactly (shortest round-trip repr).  The
    initializer uses designated initializers in declaration order (C99; C++20)."""
    name = c_identifier(name or model.name)
    if not _IDENT.match(name):
        raise RbdgenError(f"model_to_c: '{name}' is not a C identifier")
    a = serialize(model)
    per_body = {"axis": 3, "pitch": 8, "plc_R": 9, "plc_p": 3, "inertia": 10}
    out = [f"/* rbg_model for robot '{model.name}' (nq = {a.nq}, nv = {a.nv}, nbodies = {a.nbodies}).\n"
           f" * generated by rbdgen (gen.generic.serialize.model_to_c) -- do not edit.\n"
           f" * inertia: per body m, m c (3), I about the body origin (xx xy xz yy yz zz). */\n"
           f"#include \"rbg.h\"\n\n"]
    names = {}
    for field in ARRAY_FIELDS:
        ctype = "int" if getattr(a, field).dtype == np.intc else "double"
        cname = f"{name}_{field}"
        names[field] = cname
        out.append(_c_array(ctype, cname, getattr(a, field), per_body.get(field, 16)))
    init = [f"    .nbodies = {a.nbodies},", f"    .nq = {a.nq},", f"    .nv = {a.nv},"]
    init += [f"    .{f} = {names[f]}," for f in ARRAY_FIELDS]
    init.append(f"    .gravity = {{{', '.join(_fmt(g) for g in a.gravity)}}},")
    out.append(f"\nstatic const rbg_model {name} = {{\n" + "\n".join(init) + "\n};\n\n")
    upper = name.upper()
    for algo, n in work_sizes(model).items():
        out.append(f"#define {upper}_WORK_{algo.upper()} {n}\n")
    sizes = work_sizes(model)
    out.append(f"#define {upper}_WORK_MAX {max(sizes.values())}\n")
    return "".join(out)


def constraints_to_c(model: Model, cset, name: str = "constraints") -> str:
    """C source defining ``static rbg_constraints <name>`` (its caller block; not const:
    ``rbg_constraints_init(&model, &<name>, <name>_iwork)`` fills the rest), the int
    buffer ``static int <name>_iwork[<NAME>_IWORK]`` and ``<NAME>_WORK_<ALGO>`` work-size
    macros, for a program that already embeds the model (:func:`model_to_c`)."""
    name = c_identifier(name)
    a = serialize_constraints(model, cset)
    upper = name.upper()
    out = [f"/* rbg_constraints '{a.spec}' on robot '{model.name}' (nc = {a.nc}, m = {a.m}).\n"
           f" * generated by rbdgen (gen.generic.serialize.constraints_to_c) -- do not edit.\n"
           f" * M1, M2: per constraint R (row-major, frame -> body) then p. */\n"]
    per = {"M1": 12, "M2": 12}
    for field in CONSTRAINT_ARRAY_FIELDS:
        arr = getattr(a, field)
        ctype = "int" if arr.dtype == np.intc else "double"
        out.append(_c_array(ctype, f"{name}_{field}", arr, per.get(field, 16)))
    init = [f"    .nc = {a.nc},"] + [f"    .{f} = {name}_{f}," for f in CONSTRAINT_ARRAY_FIELDS]
    out.append(f"\nstatic rbg_constraints {name} = {{\n" + "\n".join(init) + "\n};\n\n")
    out.append(f"#define {upper}_IWORK {constraints_iwork_size(model, cset)}\n")
    out.append(f"static int {name}_iwork[{upper}_IWORK];\n\n")
    for algo, n in {**constrained_work_sizes(model, cset), **delassus_work_sizes(model, cset),
                    **event_work_sizes(model, cset)}.items():
        out.append(f"#define {upper}_WORK_{algo.upper()} {n}\n")
    return "".join(out)
