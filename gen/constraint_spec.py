"""Constraint specs: the text a user types (``6D:left_sole_link,3D:FL_FOOT``,
``3D:tip~anchor``, ``3Dv:...``, ``3D+:...``; the syntax is in :mod:`gen.constraints`)
parsed into a :class:`~gen.constraints.ConstraintSet` for a robot, with one-line errors
naming the token and the valid choices (frames, types, weights).  The kinematic rows
themselves (Jacobians, drifts, maximal-coordinate terms) are :mod:`gen.constraints`.

A FRAME is a frame's name or ``KIND:NAME`` with KIND ``body``, ``site`` or ``joint``
(:meth:`gen.model.Model.frame`): ``6D:site:torso``, ``3D:body:a~site:b`` (the first ``:``
ends the type, ``~`` separates the two frames).  MJCF gives bodies, sites and joints
separate namespaces, so a plain name may select several frames; it is refused, naming the
qualified choices.  A constraint stores :func:`spec_name` of its frames (plain where
unambiguous), so a set's spec is canonical: ``6D:body:torso`` on a robot whose only
``torso`` is a body is ``6D:torso``, the same kernel.
"""
from __future__ import annotations

import difflib

import numpy as np

from .backend import NUMPY
from .constraints import TYPES, Constraint, ConstraintSet
from .errors import RbdgenError
from .kinematics import frame_placement
from .model import SE3, Model
from .robots import load_robot

#: ``KIND:`` prefixes that name a frame of one kind (:meth:`gen.model.Model.frame`)
QUALIFIERS = ("body", "site", "joint")
SPEC_HELP = ("comma-separated TYPE:FRAME or TYPE:FRAME_A~FRAME_B with TYPE 3D or 6D "
             "(3Dv/6Dv: velocity constraints; 3D+/6D+: unilateral normal row), "
             "e.g. '6D:left_sole_link,3D:FL_FOOT'")


def parse_constraints(robot, spec, *, Kp: float = 0.0, Kd: float = 0.0, Kv: float = 0.0, weights=None,
                      reference_q=None) -> ConstraintSet:
    """Parse a constraint spec (docs/DESIGN.md §4) for ``robot`` (a Model or anything
    ``gen.load_robot`` accepts).  ``Kp``, ``Kd``: Baumgarte gains of the position
    constraints; ``Kv``: stabilisation gain of the velocity constraints (``3Dv``, ``6Dv``).  ``weights``: one positive weight per constraint
    (default 1).  ``reference_q``: anchor each world-anchored constraint at the frame's
    placement in that configuration (default: the world origin, Pinocchio's default),
    which only matters for the position feedback ``Kp``.  Errors name the offending
    token and the valid choices."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    if isinstance(spec, ConstraintSet):
        return spec
    tokens = list(spec) if isinstance(spec, (list, tuple)) else str(spec).split(",")
    tokens = [t.strip() for t in tokens]
    if not any(tokens):
        raise RbdgenError(f"empty constraint spec; expected {SPEC_HELP}")
    if weights is None:
        weights = [1.0] * len(tokens)
    weights = [float(w) for w in weights]
    if len(weights) != len(tokens):
        raise RbdgenError(f"{len(weights)} constraint weights given for {len(tokens)} constraints '{spec}'")
    ref = None
    if reference_q is not None:
        ref = (lambda name: _se3(frame_placement(model, name, NUMPY.asarray(reference_q), be=NUMPY)))
    cons = [_parse_token(model, tok, i, w, ref) for i, (tok, w) in enumerate(zip(tokens, weights))]
    return ConstraintSet(model, cons, float(Kp), float(Kd), float(Kv))


def _se3(M) -> SE3:
    return SE3(np.asarray(M[0], dtype=float), np.asarray(M[1], dtype=float).reshape(3))


def _parse_token(model: Model, tok: str, i: int, weight: float, ref) -> Constraint:
    if not tok:
        raise RbdgenError(f"constraint #{i + 1} is empty (stray comma?); expected {SPEC_HELP}")
    kind, colon, rest = tok.partition(":")
    if not colon or not rest.strip():
        raise RbdgenError(f"constraint '{tok}': expected TYPE:FRAME or TYPE:FRAME_A~FRAME_B "
                          f"with TYPE 3D or 6D")
    kind = kind.strip().upper()
    unilateral = kind.endswith("+")
    kind = kind[:-1] if unilateral else kind
    velocity = kind.endswith("V")
    kind = kind[:-1] if velocity else kind
    if kind not in TYPES:
        raise RbdgenError(f"constraint '{tok}': unknown type '{tok.partition(':')[0].strip()}' (choose from "
                          f"{', '.join(TYPES)}; a trailing v makes it a velocity constraint, e.g. 3Dv, and a "
                          f"trailing + makes the normal row unilateral, e.g. 3D+)")
    if velocity and unilateral:
        raise RbdgenError(f"constraint '{tok}': a velocity constraint (v) cannot be unilateral (+); "
                          f"one-sided rows are position constraints (Tedrake 2012 §3)")
    if not weight > 0 or not np.isfinite(weight):
        raise RbdgenError(f"constraint '{tok}': weight {weight} must be positive and finite")
    names = [n.strip() for n in rest.split("~")]
    if len(names) > 2 or not all(names):
        raise RbdgenError(f"constraint '{tok}': a loop closure joins exactly two frames, FRAME_A~FRAME_B")
    (f1, n1), *rest = [_frame(model, tok, n) for n in names]
    if not rest:
        if f1.body < 0:
            raise RbdgenError(f"constraint '{tok}': frame '{n1}' is fixed to the world, "
                              f"so constraining it to the world does nothing")
        anchor = ref(n1) if ref is not None else SE3.identity()
        return Constraint(kind, n1, None, f1.body, -1, f1.placement, anchor, weight, tok, unilateral, velocity)
    (f2, n2), = rest
    if n1 == n2:
        raise RbdgenError(f"constraint '{tok}': a loop closure needs two different frames, got '{n1}' twice")
    if f1.body == f2.body:
        where = "the world" if f1.body < 0 else f"body '{model.bodies[f1.body].link}'"
        raise RbdgenError(f"constraint '{tok}': frames '{n1}' and '{n2}' are both fixed to "
                          f"{where}, so the loop constrains nothing")
    return Constraint(kind, n1, n2, f1.body, f2.body, f1.placement, f2.placement, weight, tok, unilateral, velocity)


def spec_name(model: Model, frame) -> str:
    """The name that selects ``frame`` in a constraint spec: its own name where that is
    unambiguous, else ``KIND:NAME`` (an MJCF body and site of one name: ``site:torso``)."""
    def same(f) -> bool:
        return f.body == frame.body and np.array_equal(f.placement.R, frame.placement.R) \
            and np.array_equal(f.placement.p, frame.placement.p)
    for name in (frame.name, *(f"{q}:{frame.name}" for q in QUALIFIERS)):
        try:
            if same(model.frame(name)):
                return name
        except RbdgenError:
            continue
    return frame.name


def spec_names(model: Model) -> list[str]:
    """:func:`spec_name` of every frame, in ``model.frames`` order (``rbdgen robots --frames``)."""
    return [spec_name(model, f) for f in model.frames]


def _frame(model: Model, tok: str, name: str):
    """(frame, the name stored in the constraint: :func:`spec_name`, so that the set's
    spec selects the same frames again)."""
    kind, colon, plain = name.partition(":")
    qualified = bool(colon) and kind in QUALIFIERS
    if any(f.name == name or (qualified and f.name == plain) for f in model.frames):
        try:
            f = model.frame(name)                 # the one lookup: refuses an ambiguous name
        except RbdgenError as e:
            raise RbdgenError(f"constraint '{tok}': {e}") from None
        return f, spec_name(model, f)
    names = spec_names(model)
    key = plain if qualified else name
    close = difflib.get_close_matches(name, names, n=8, cutoff=0.6)
    close += [n for n in names if key.lower() in n.lower() and n not in close][:8 - len(close)]
    if len(names) <= 40:
        hint = f"choose from {', '.join(names)}"
    elif close:
        hint = f"similar: {', '.join(close)}; {len(names)} frames in all"
    else:
        hint = f"{len(names)} frames, see `rbdgen robots --frames {model.name}`"
    raise RbdgenError(f"constraint '{tok}': unknown frame '{name}' on {model.name} ({hint})")


def as_constraint_set(model: Model, cset) -> ConstraintSet:
    """None -> the empty set; a spec string or token list -> parsed; a set -> itself."""
    if cset is None:
        return ConstraintSet(model, [])
    if isinstance(cset, ConstraintSet):
        return cset
    return parse_constraints(model, cset)
