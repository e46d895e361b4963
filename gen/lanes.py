"""Isomorphic limbs as SIMD lanes: the same arithmetic of sibling subtrees of equal shape
(solo12's four legs, talos' two legs and two arms) written once on GCC/Clang vectors of
2, 4 or 8 doubles, one limb per lane.

A robot's mirrored limbs run the same instruction sequence on different constants
(placements, inertias), and a straight-line kernel on this machine kind runs at the
rate its machine code streams in (~10 bytes per operation, ARCHITECTURE "Dense x sparse
products as loops"), so doing L limbs in one vector instruction removes up to (L-1)/L of
their instructions.  The pairing works on CasADi's instruction tape (superword-level
parallelism, Larsen & Amarasinghe, PLDI 2000, seeded by the model):

* *families* (:func:`families`): the children of a body grouped by subtree shape (joint
  kind, nq, nv, children's shapes, recursively); a group of 2-8 siblings is a family
  whose L subtrees are the lanes (outermost families only; 3, 5-7 siblings: the first
  2 or 4);
* *seeds* (:func:`seeds`): the coordinates of the lane subtrees in every input of nq or
  nv entries (q, v, a, tau): entry k of lane l stands for entry k of lane 0;
* *pairing* (:func:`pair`), in tape order: an instruction that depends on lane 0 of one
  family only, and on no other lane, is grouped with, in each lane l, the instruction of
  the same operation whose lane operands are the lane-l partners of its own and whose
  other operands have the same expression shape (constants abstracted) or also depend
  on lane l only; operands of equal shape that depend on no lane (a limb's placement in
  the base: constants times the base's coordinates) are grouped with it, recursively.
  A value that depends on two lanes or more (the base's acceleration, the mass matrix's
  base block and its factor, ``ddq``) counts as depending on none for what uses it: it
  is an operand shared by the lanes, read by each lane's instruction (broadcast), so
  ``W[k, base] = G[k] L_bb^-1`` of each leg, and everything the second pass of
  aba_derivatives derives from ``ddq``, still pair (talos aba_derivatives' head 46.1k
  -> 38.2k statements, own loop 17.6 -> 15.9 us; solo12 aba_derivatives 5.6k -> 4.0k);
* *lane constants* (:func:`lane_constants`, :func:`trace_plan`): placement entries that
  are 0 or +-1 in one lane and not in another (talos' right gripper is turned by pi)
  would fold into expressions of different shapes; the kernel is traced again with them
  as symbols, one per lane, which seed the pairing and are written as their values;
* groups on a dependency cycle (a wrong pick among equal candidates) are dissolved
  until the merged graph is acyclic (:func:`plan`).

Every lane computes exactly its own instruction on its own operands (a constant operand
is a vector of the lanes' constants, an operand shared by the lanes is broadcast, a
mixed one gathered), so the result is the scalar tape's up to the compiler's FMA
contraction (with lane constants, a lane's extra terms are products by 0 and 1: exact
but for the sign of a zero).  Measured (gcc -O3 -march=native, the public function in a
loop over 64 states, doubles -> lanes): talos rnea_derivatives 49.9k -> 32.4k
statements, 10.2 -> 7.4 us (26.9k statements with lane constants: 7.84 -> 6.01 us in
another run); solo12 rnea_derivatives 8.5k -> 2.5k statements, 1.55 -> 0.62 us (more in
docs/ARCHITECTURE.md, "Isomorphic limbs as vector lanes").
"""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import casadi as ca
import numpy as np

from .codegen.config import CodegenConfig
from .model import Model
from .spatial import snap
from .trace import Trace, retrace

#: lanes of one family at most (a vector of 8 doubles: one AVX-512 register, two AVX2)
MAX_LANES = 8


def families(model: Model) -> list[list[list[int]]]:
    """Per family, per lane, the bodies of the lane's subtree in depth-first order (see the
    module docstring); outermost first, no body in two families."""
    children = defaultdict(list)
    for i, b in enumerate(model.bodies):
        children[b.parent].append(i)

    def shape(i):
        b = model.bodies[i]
        return (b.kind, b.nq, b.nv, b.mimic is not None, tuple(shape(c) for c in children[i]))

    def subtree(i):
        return [i] + [k for c in children[i] for k in subtree(c)]

    out, covered = [], set()
    for p in [-1] + list(range(model.nbodies)):
        by_shape = defaultdict(list)
        for c in children[p]:
            if c not in covered:
                by_shape[shape(c)].append(c)
        for group in by_shape.values():
            lanes = 1 << (min(len(group), MAX_LANES).bit_length() - 1)      # 2, 4 or 8
            if lanes >= 2:
                fam = [subtree(c) for c in group[:lanes]]
                out.append(fam)
                covered.update(k for lane in fam for k in lane)
    return out


def seeds(model: Model, fams: list, sizes: list[int]) -> dict[tuple[int, int], tuple[int, int, tuple]]:
    """``(input, entry) -> (family, lane, key)`` for the entries of the inputs of ``nq`` or
    ``nv`` entries (``sizes``: each input's) that belong to a lane of the families ``fams``
    (:func:`families`); ``key`` is the same for the entries that stand for each other in
    the lanes of a family."""
    out = {}
    for f, fam in enumerate(fams):
        for lane, bodies in enumerate(fam):
            for i, size in enumerate(sizes):
                if size not in (model.nq, model.nv):
                    continue
                start, width = ("idx_q", "nq") if size == model.nq else ("idx_v", "nv")
                pos = 0
                for b in bodies:
                    body = model.bodies[b]
                    for k in range(getattr(body, width)):
                        out[(i, getattr(body, start) + k)] = (f, lane, ("in", i, pos))
                        pos += 1
    return out


@dataclass
class Tape:
    """A CasADi SX function's tape as nodes (one per value): ``op``, ``args`` (node
    indices), ``const`` (OP_CONST's value), ``inputs`` (node -> (input, entry)); ``outputs``
    (node, output, entry) in tape order."""

    op: list = field(default_factory=list)
    args: list = field(default_factory=list)
    const: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)


def read_tape(f: ca.Function) -> Tape:
    """The instruction tape of ``f`` (the one CasADi's code generator walks) as nodes."""
    t = Tape()
    holds: dict[int, int] = {}               # work slot -> node
    for k in range(f.n_instructions()):
        op, ins, out = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_OUTPUT:
            t.outputs.append((holds[ins[0]], out[0], out[1]))
            continue
        node = len(t.op)
        args = ()
        if op == ca.OP_CONST:
            t.const[node] = f.instruction_constant(k)
        elif op == ca.OP_INPUT:
            t.inputs[node] = (ins[0], ins[1])
        else:
            args = tuple(holds[a] for a in ins)     # one operand for a unary operation, two for a binary
        t.op.append(op)
        t.args.append(args)
        holds[out[0]] = node
    return t


@dataclass
class Plan:
    """The lane groups of a tape: ``families`` (:func:`families`), ``groups`` (first
    member -> members, one per lane), ``order`` (units in a topological order: ``("s",
    node)`` a scalar node, ``("g", first member)`` a group); ``scalar``: the statements
    the function is written with without lanes (one per input and instruction)."""

    tape: Tape
    families: list
    groups: dict
    order: list
    scalar: int

    @property
    def statements(self) -> int:
        return len(self.order)

    @property
    def grouped(self) -> int:
        return sum(len(m) for m in self.groups.values())


def statements(f: ca.Function) -> int:
    """The statements of ``f`` written without lanes: one per input and instruction."""
    return sum(f.instruction_id(k) not in (ca.OP_CONST, ca.OP_OUTPUT) for k in range(f.n_instructions()))


def _shapes(tape: Tape, lane: dict) -> tuple[list[int], list[frozenset]]:
    """Per node: its expression shape (an interned id, constants abstracted, seeded inputs
    by family and key) and the lanes it depends on through operands of one lane (a value of
    two lanes or more is shared: it adds none)."""
    interned: dict = {}
    shape, dep = [], []
    for i in range(len(tape.op)):
        if i in tape.const:
            key = ("c",)
        elif i in tape.inputs:
            key = ("in", lane[i][0], lane[i][2]) if i in lane else ("in", *tape.inputs[i])
        else:
            key = (tape.op[i], *(shape[a] for a in tape.args[i]))
        shape.append(interned.setdefault(key, len(interned)))
        d = frozenset([lane[i][:2]]) if i in lane else frozenset()
        for a in tape.args[i]:
            if len(dep[a]) <= 1:
                d |= dep[a]
        dep.append(d)
    return shape, dep


def pair(tape: Tape, seed: dict, nlanes: dict[int, int]) -> dict[int, list[int]]:
    """The groups of the module docstring: first member -> members (one per lane);
    ``seed`` maps ``(input, entry)`` to ``(family, lane, key)``, ``nlanes`` a family's lanes."""
    n = len(tape.op)
    arith = [op not in (ca.OP_CONST, ca.OP_INPUT) for op in tape.op]
    lane: dict[int, tuple] = {}              # node -> (family, lane, key)
    for node, ij in tape.inputs.items():
        if ij in seed:
            lane[node] = seed[ij]
    shape, dep = _shapes(tape, lane)
    users = defaultdict(list)
    for i in range(n):
        for a in tape.args[i]:
            users[a].append(i)
    partner = defaultdict(dict)              # (family, key) -> lane -> node
    for node, (f, l, key) in lane.items():
        partner[(f, key)][l] = node
    taken = set(lane)
    groups: dict[int, list[int]] = {}

    def make(f, members):
        for l, m in enumerate(members):
            lane[m] = (f, l, ("n", members[0]))
            partner[(f, ("n", members[0]))][l] = m
            taken.add(m)
        groups[members[0]] = members

    def group_free(f, members):              # equal-shape operands depending on no lane
        if len(set(members)) == 1 or not arith[members[0]]:
            return
        if len({shape[m] for m in members}) > 1 or any(dep[m] or m in taken for m in members):
            return
        make(f, members)
        for p in range(len(tape.args[members[0]])):
            group_free(f, [tape.args[m][p] for m in members])

    def matches(i, c, mapped, f, l, strict):
        """c in lane l stands for i (lane 0): its lane operands are ``mapped``, its other
        operands of i's operands' shapes (``strict``) or, where not, of lane l only."""
        if c in taken or dep[c] != frozenset([(f, l)]) or len(tape.args[c]) != len(mapped):
            return False
        for p, (a, want) in enumerate(zip(tape.args[i], mapped)):
            b = tape.args[c][p]
            if want is not None:
                if b != want:
                    return False
            elif b in lane or (shape[b] != shape[a] and (strict or not (dep[a] == frozenset([(f, 0)])
                                                                        and dep[b] == frozenset([(f, l)])))):
                return False
        return True

    for i in range(n):
        if i in taken or not arith[i] or len(dep[i]) != 1:
            continue
        (f, l0), = dep[i]
        lane_args = [lane[a] for a in tape.args[i] if a in lane]
        if l0 != 0 or not lane_args or any(x[:2] != (f, 0) for x in lane_args):
            continue
        members = [i]
        for l in range(1, nlanes[f]):
            mapped = [partner[(f, lane[a][2])].get(l, -1) if a in lane else None for a in tape.args[i]]
            anchor = next(m for m in mapped if m is not None)
            found = next((c for strict in (True, False) for c in users[anchor]
                          if tape.op[c] == tape.op[i] and c not in members and matches(i, c, mapped, f, l, strict)),
                         None)
            if found is None:
                break
            members.append(found)
        if len(members) < nlanes[f]:
            continue
        make(f, members)
        for p, a in enumerate(tape.args[i]):
            if a not in lane:
                group_free(f, [tape.args[m][p] for m in members])
    return groups


def _units(tape: Tape, groups: dict) -> tuple[dict, dict]:
    """``(unit of each non-constant node, first tape index of each unit)``."""
    member = {m: g for g, ms in groups.items() for m in ms}
    unit = {i: ("g", member[i]) if i in member else ("s", i) for i in range(len(tape.op)) if i not in tape.const}
    first: dict = {}
    for i, u in unit.items():
        first.setdefault(u, i)
    return unit, first


def _edges(tape: Tape, unit: dict) -> set:
    return {(unit[a], u) for i, u in unit.items() for a in tape.args[i] if a in unit and unit[a] != u}


def plan(f: ca.Function, model: Model, constants: LaneConstants | None = None,
         scalar: int | None = None, min_gain: float = CodegenConfig.lanes_min_gain) -> Plan | None:
    """The lanes of ``f`` (inputs as the kernel's: those of nq or nv entries are per dof),
    or None when the model has no family or the lanes remove less than ``min_gain``
    of the statements (:attr:`gen.codegen.config.CodegenConfig.lanes_min_gain`;
    ``scalar``: those of the function written without lanes, by default ``f``'s).  ``constants``: ``f``'s last input is their symbols (``f`` traced
    on ``constants.model``), each a constant of its lane, written as its value."""
    fams = families(model)
    if not fams:
        return None
    tape = read_tape(f)
    seed = seeds(model, fams, [int(f.nnz_in(i)) for i in range(f.n_in())])
    if constants is not None:
        seed.update({(f.n_in() - 1, j): key for j, key in enumerate(constants.keys)})
    groups = pair(tape, seed, {k: len(fam) for k, fam in enumerate(fams)})
    if constants is not None:                    # the symbols are their values from here on
        for node, (i, j) in list(tape.inputs.items()):
            if i == f.n_in() - 1:
                tape.const[node] = constants.values[j]
                del tape.inputs[node]
    while True:
        unit, first = _units(tape, groups)
        edges = _edges(tape, unit)
        order = _topological(set(unit.values()), edges, first)
        if order is not None:
            break
        for u in _on_cycles(edges):              # groups on a cycle are dissolved
            if u[0] == "g":
                del groups[u[1]]
    result = Plan(tape, fams, groups, order, statements(f) if scalar is None else scalar)
    return result if groups and result.statements <= (1 - min_gain) * result.scalar else None


@dataclass
class LaneConstants:
    """Joint placement entries of a family's lanes traced as symbols (:func:`lane_constants`):
    ``model`` with those placements' ``traced`` values, the ``symbols`` (a column), their
    ``values`` and per symbol its seed ``(family, lane, key)``."""

    model: Model
    symbols: ca.SX
    values: list[float]
    keys: list[tuple]


def lane_constants(model: Model) -> LaneConstants | None:
    """The entries of the lanes' joint placements (rotation and translation, snapped as the
    trace snaps them) that differ between the lanes of a family while being 0 or +-1 in
    one of them, as one symbol per lane, or None when there are none.  CasADi folds a
    multiplication by 0 or 1 away, so such an entry gives the lanes expressions of
    different shapes that cannot share an instruction (talos' right gripper is turned by
    pi about z, with a 9.8e-12 residue, where the left one is not: talos
    rnea_derivatives 32.4k statements with lanes; traced with its 40 such entries as
    symbols, 27.0k, every lane computing the union of the entries' terms)."""
    fams = families(model)
    bodies = list(model.bodies)
    syms, values, keys = [], [], []
    for f, fam in enumerate(fams):
        for k in range(len(fam[0])):
            plcs = [model.bodies[lane[k]].placement for lane in fam]
            entries = np.array([np.concatenate([snap(x.R).ravel(), snap(x.p)]) for x in plcs])
            traced = [[ca.SX(x) for x in row] for row in entries]
            for j, col in enumerate(entries.T):
                if np.all(col == col[0]) or not np.any((col == 0) | (np.abs(col) == 1)):
                    continue
                for lane, x in enumerate(col):
                    traced[lane][j] = ca.SX.sym(f"lane_constant_{len(syms)}")
                    syms.append(traced[lane][j])
                    values.append(float(x))
                    keys.append((f, lane, ("constant", k, j)))
            for lane, row in enumerate(traced):
                if any(x.is_symbolic() for x in row):
                    b = fam[lane][k]
                    R = ca.reshape(ca.vertcat(*row[:9]), 3, 3).T          # row-major entries
                    bodies[b] = replace(bodies[b], placement=replace(plcs[lane], traced=(R, ca.vertcat(*row[9:]))))
    if not syms:
        return None
    return LaneConstants(replace(model, bodies=bodies), ca.vertcat(*syms), values, keys)


def trace_plan(tr: Trace, function, min_gain: float = CodegenConfig.lanes_min_gain) \
        -> tuple[ca.Function, object, Plan | None]:
    """``(f, layout, plan)``: the function and layout ``function(tr)`` returns (the
    kernel's, or a products head and the plan of its loops) and the lanes to write ``f``
    with: planned on ``function`` of the lane trace (``tr`` traced again on the model of
    its :func:`lane_constants`, the symbols a last input) when the model has lane
    constants and that function has ``f``'s inputs (and the constants), outputs and
    layout, else on ``f``."""
    f, layout = function(tr)
    constants = lane_constants(tr.traced_model)
    if constants is not None:
        g, layout_g = function(retrace(tr, constants.model, ("lane_constants", constants.symbols)))
        sizes = [[int(h.nnz_in(i)) for i in range(h.n_in())] for h in (f, g)]
        if layout_g == layout and sizes[1] == sizes[0] + [len(constants.values)] and \
                [g.nnz_out(i) for i in range(g.n_out())] == [f.nnz_out(i) for i in range(f.n_out())]:
            return f, layout, plan(g, tr.model, constants, statements(f), min_gain)
    return f, layout, plan(f, tr.model, min_gain=min_gain)


def _topological(units: set, edges: set, first: dict) -> list | None:
    """Kahn's order of ``units``, ties to the earliest in the tape; None on a cycle."""
    succ = defaultdict(list)
    indeg = Counter()
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    heap = [(first[u], u) for u in units if not indeg[u]]
    heapq.heapify(heap)
    order = []
    while heap:
        _, u = heapq.heappop(heap)
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if not indeg[v]:
                heapq.heappush(heap, (first[v], v))
    return order if len(order) == len(units) else None


def _on_cycles(edges: set) -> set:
    """The units in strongly connected components of more than one unit (Tarjan's
    algorithm, iterative)."""
    succ = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index, low, on_stack, stack, out = {}, {}, set(), [], set()
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            u, k = work.pop()
            if k == 0:
                index[u] = low[u] = len(index)
                stack.append(u)
                on_stack.add(u)
            if k < len(succ[u]):
                work.append((u, k + 1))
                w = succ[u][k]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[u] = min(low[u], index[w])
                continue
            for w in succ[u]:                      # children done: their low links
                if w in on_stack:
                    low[u] = min(low[u], low[w])
            if low[u] == index[u]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == u:
                        break
                if len(comp) > 1:
                    out.update(comp)
    return out


def manifest(model: Model, plans: list) -> dict:
    """The manifest's ``codegen.lanes``: the families (per lane its subtree's root body)
    and, per function, its statements without and with lanes and the statements grouped
    (None: written without lanes)."""
    fams = next(p for p in plans if p is not None).families
    return {"families": [[model.bodies[lane[0]].name for lane in fam] for fam in fams],
            "statements": [None if p is None else {"scalar": p.scalar, "lanes": p.statements,
                                                   "grouped": p.grouped} for p in plans]}
