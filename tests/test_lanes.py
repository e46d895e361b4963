"""Isomorphic limbs as vector lanes (gen/lanes.py, gen/cwriter.py): the families a model
has, the pairing of a tape, and compiled kernels with lanes against NumPy and against the
same kernel on doubles (unsplit, split with vectors crossing part boundaries, libm calls
per lane, products' heads)."""
import re
from dataclasses import replace

import casadi as ca
import numpy as np
import pytest

import gen
from gen import cwriter, lanes
from gen.codegen.config import CodegenConfig
from gen.errors import RbdgenError
from gen.robots import load_robot
from gen.robots.synthetic import bintree
from gen.model import SE3
from gen.products import head_function
from gen.spatial import snap
from gen.trace import trace
from conftest import rel_err

#: lanes compute each lane's own instruction; only where gcc contracts a*b+c into an FMA
#: differently from the scalar code can the last bits move
LANE_TOL = 1e-12


def test_families_are_sibling_subtrees_of_equal_shape():
    solo = load_robot("solo12")
    (legs,) = lanes.families(solo)
    assert [solo.bodies[lane[0]].name for lane in legs] == ["FL_HAA", "FR_HAA", "HL_HAA", "HR_HAA"]
    assert all(len(lane) == 3 for lane in legs)
    talos = load_robot("talos")
    roots = [[talos.bodies[lane[0]].name for lane in fam] for fam in lanes.families(talos)]
    assert roots == [["leg_left_1_joint", "leg_right_1_joint"], ["arm_left_1_joint", "arm_right_1_joint"]]
    assert lanes.families(load_robot("panda")) == []
    fams = lanes.families(bintree(21))  # branches of 3: the root's two subtrees of 9, each with two of 3
    assert [[len(lane) for lane in fam] for fam in fams] == [[9, 9]]        # the outermost family only


def test_seeds_map_each_lanes_coordinates_to_lane_zeros():
    solo = load_robot("solo12")
    seed = lanes.seeds(solo, lanes.families(solo), [solo.nq, solo.nv, 5])
    assert not any(i == 2 for i, _ in seed)               # an input of another size is shared
    fl, fr = (solo.bodies[lane[0]] for lane in lanes.families(solo)[0][:2])
    assert seed[(0, fl.idx_q)][:2] == (0, 0) and seed[(0, fr.idx_q)][:2] == (0, 1)
    assert seed[(0, fl.idx_q)][2] == seed[(0, fr.idx_q)][2]
    assert seed[(1, fr.idx_v + 0)][2] == seed[(1, fl.idx_v)][2] != seed[(0, fl.idx_q)][2]
    assert (0, 0) not in seed and (1, 0) not in seed      # the free-flyer is no lane


def test_units_on_a_cycle_are_found():
    chain = {(("g", 1), ("s", 2)), (("s", 2), ("g", 3))}
    cyc = {(("g", 1), ("s", 2)), (("s", 2), ("g", 3)), (("g", 3), ("g", 1)), (("g", 3), ("s", 4)),
           (("s", 4), ("s", 5))}
    assert lanes._on_cycles(cyc) == {("g", 1), ("s", 2), ("g", 3)}
    assert lanes._on_cycles(chain) == set()


def test_a_plan_groups_the_legs_and_its_order_is_topological():
    solo = load_robot("solo12")
    tr = trace(solo, "rnea_derivatives")
    f = tr.function()
    plan = lanes.plan(f, solo)
    assert plan is not None and plan.statements <= 0.5 * plan.scalar       # four legs in one
    assert all(len(m) == 4 for m in plan.groups.values())
    tape = plan.tape
    unit = {m: ("g", g) for g, ms in plan.groups.items() for m in ms}
    at = {u: k for k, u in enumerate(plan.order)}
    for i in range(len(tape.op)):
        for a in tape.args[i]:
            if a not in tape.const:
                assert at[unit.get(a, ("s", a))] <= at[unit.get(i, ("s", i))]
    for ms in plan.groups.values():                        # a group: one operation, one lane each
        assert len({tape.op[m] for m in ms}) == 1
    assert lanes.plan(trace(load_robot("panda"), "rnea_derivatives").function(), load_robot("panda")) is None


def test_values_of_several_lanes_are_shared_operands():
    """solo12 aba: ``ddq`` and the base's articulated inertia depend on all four legs; the
    legs' instructions that read them still form groups, each lane reading the same node
    (1646 statements with lanes when such instructions stayed scalar, 1403 with them)."""
    solo = load_robot("solo12")
    plan = lanes.plan(trace(solo, "aba").function(), solo)
    tape = plan.tape
    member = {m for ms in plan.groups.values() for m in ms}
    shared = [g for g, ms in plan.groups.items()
              for p in range(len(tape.args[g]))
              if len({tape.args[m][p] for m in ms}) == 1 and tape.args[g][p] not in member
              and tape.args[g][p] not in tape.const and tape.args[g][p] not in tape.inputs]
    assert len(shared) >= 12             # 13: none without the rule
    assert plan.statements <= 0.36 * plan.scalar


def _states(model, n, seed=4):
    rng = np.random.default_rng(seed)
    return [(model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)) for _ in range(n)]


@pytest.mark.parametrize("robot, algorithm, split", [
    ("solo12", "rnea_derivatives", False),
    ("solo12", "rnea_derivatives", True),                 # vectors cross part boundaries through x
    ("solo12", "aba_derivatives", False),                 # the products' head
    ("solo12", "aba", False),                             # sin and cos: libm calls per lane, gathered
])
def test_compiled_lanes_equal_numpy_and_the_scalar_kernel(tmp_path, robot, algorithm, split):
    # a threshold of the config away from its default is part of the build's cache key
    config = CodegenConfig(split_above=600) if split else None
    model = load_robot(robot)
    with_lanes = gen.build(model, algorithm, out_dir=tmp_path / "lanes", config=config)
    scalar = gen.build(model, algorithm, out_dir=tmp_path / "scalar", lanes=False, config=config)
    info = with_lanes.manifest["codegen"]["lanes"]
    assert info["families"] == [["FL_HAA", "FR_HAA", "HL_HAA", "HR_HAA"]]
    (stats,) = info["statements"]
    assert stats["lanes"] < stats["scalar"] and stats["grouped"] > 0
    assert "lanes" not in scalar.manifest["codegen"]
    assert (with_lanes.manifest["codegen"]["parts"][0] > 1) == split
    kernel_c = (with_lanes.folder.path / f"{with_lanes.folder.prefix}_kernel.c").read_text()
    assert re.search(r"rbdgen_v4 w\d", kernel_c)             # vector work slots (product loops: s0, s1, ...)
    if split:
        assert "rbdgen_store4(x + " in kernel_c and "rbdgen_load4(x + " in kernel_c
    for q, v, x in _states(model, 3):
        ref = gen.run(model, algorithm, q, v, x)
        got, base = with_lanes(q, v, x), scalar(q, v, x)
        for g, b, r in zip(got if isinstance(got, tuple) else (got,), base if isinstance(base, tuple) else (base,),
                           ref if isinstance(ref, tuple) else (ref,)):
            assert rel_err(g, r) <= LANE_TOL
            assert rel_err(g, b) <= LANE_TOL


def test_lane_constants_are_the_placement_entries_that_fold_in_one_lane_only():
    """talos' right gripper is turned by pi about z (with a 9.8e-12 residue) where the
    left one is not: their rotations' entries are 1 / 0 in one arm and -1 / 9.8e-12 in the
    other, which CasADi folds differently; they become symbols, one per lane, whose values
    are the placements' (snapped as the trace snaps them)."""
    model = load_robot("talos")
    consts = lanes.lane_constants(model)
    assert len(consts.values) == len(consts.keys) == consts.symbols.numel() == 40
    traced = [b for b in consts.model.bodies if b.placement.traced is not None]
    assert {b.name.split("_")[1] for b in traced} == {"left", "right"}
    assert all(b.name.startswith("gripper_") for b in traced)
    values = ca.Function("v", [consts.symbols], [ca.vertcat(*[ca.vec(ca.vertcat(b.placement.traced[0],
                                                                            b.placement.traced[1].T))
                                                            for b in traced])])
    got = np.array(values(consts.values)).ravel().reshape(len(traced), 12)
    want = [np.concatenate([snap(b.placement.R), snap(b.placement.p)[None, :]]).ravel(order="F") for b in traced]
    assert np.array_equal(got, np.array(want))
    assert {k[1] for k in consts.keys} == {0, 1} and {k[0] for k in consts.keys} == {1}     # the arms' family
    assert lanes.lane_constants(load_robot("solo12")) is None        # the legs differ in non-special entries only
    assert lanes.lane_constants(load_robot("panda")) is None


def test_talos_lanes_pair_the_turned_gripper_through_its_lane_constants(tmp_path):
    model = load_robot("talos")
    tr = trace(model, "rnea_derivatives")
    f, layout, plan = lanes.trace_plan(tr, lambda t: (t.function(), None))
    plain = lanes.plan(f, model)
    assert plan.scalar == plain.scalar == lanes.statements(f)          # against the folded function
    # measured 27.3k against 30.4k: in the canonical body frames (gen.canonical_frames) the
    # plain plan already pairs more (32.8k in the model's own frames)
    assert plan.statements <= 0.92 * plain.statements
    assert plain.statements <= 0.7 * plain.scalar
    assert ca.OP_SIN in {plan.tape.op[g] for g in plan.groups}
    assert not any(i == f.n_in() for i, _ in plan.tape.inputs.values())    # the symbols are constants
    with_lanes = gen.build(model, "rnea", out_dir=tmp_path / "lanes")
    scalar = gen.build(model, "rnea", out_dir=tmp_path / "scalar", lanes=False)
    (stats,) = with_lanes.manifest["codegen"]["lanes"]["statements"]
    assert stats["lanes"] <= 0.75 * stats["scalar"]
    for q, v, a in _states(model, 3):
        got = with_lanes(q, v, a)
        assert rel_err(got, gen.run(model, "rnea", q, v, a)) <= LANE_TOL
        assert rel_err(got, scalar(q, v, a)) <= LANE_TOL


def _turned(model, joint, angle):
    """``model`` with ``joint``'s placement turned by ``angle`` about z (another robot)."""
    c, s = np.cos(angle), np.sin(angle)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    bodies = [replace(b, placement=SE3(Rz @ b.placement.R, b.placement.p)) if b.name == joint else b
              for b in model.bodies]
    return replace(model, bodies=bodies)


def test_lane_constants_in_a_products_head_equal_numpy_and_the_scalar_kernel(tmp_path):
    """solo12 with one knee turned by pi (and 1e-11, as talos' gripper): the legs' lanes
    pair through lane constants, also in aba_derivatives' products head."""
    model = _turned(load_robot("solo12"), "FR_KFE", np.pi + 1e-11)
    consts = lanes.lane_constants(model)
    assert consts is not None and {k[1] for k in consts.keys} == {0, 1, 2, 3}
    tr = trace(model, "aba_derivatives")
    f, layout, plan = lanes.trace_plan(tr, lambda t: head_function("h", t))
    assert plan is not None and plan.scalar == lanes.statements(f)          # the folded head
    assert plan.statements < lanes.plan(f, model).statements
    with_lanes = gen.build(model, "aba_derivatives", out_dir=tmp_path / "lanes")
    scalar = gen.build(model, "aba_derivatives", out_dir=tmp_path / "scalar", lanes=False)
    (stats,) = with_lanes.manifest["codegen"]["lanes"]["statements"]
    assert stats["lanes"] == plan.statements
    for q, v, tau in _states(model, 3):
        ref = gen.run(model, "aba_derivatives", q, v, tau)
        for g, b, r in zip(with_lanes(q, v, tau), scalar(q, v, tau), ref):
            assert rel_err(g, r) <= LANE_TOL
            assert rel_err(g, b) <= LANE_TOL


def test_a_function_gets_lanes_only_when_they_remove_min_gain_of_its_statements():
    solo = load_robot("solo12")
    f = trace(solo, "rnea").function()
    plan = lanes.plan(f, solo, min_gain=0.0)
    gain = 1 - plan.statements / plan.scalar
    assert lanes.plan(f, solo, min_gain=gain + 1e-3) is None
    assert lanes.plan(f, solo, min_gain=gain - 1e-3) is not None


def test_lanes_refuse_avoid_stack():
    solo = load_robot("solo12")
    f = trace(solo, "rnea").function()
    with pytest.raises(RbdgenError, match="avoid_stack"):
        cwriter.write_function(f, avoid_stack=True, lanes=lanes.plan(f, solo))
