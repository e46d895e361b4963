"""gen/codegen: the config's refusals, and each pass alone on a small traced kernel.

Every pass is run through :func:`gen.codegen.pipeline.plan_kernel` up to itself
(``until=``), or (the per-function passes) on the steps of one function, and its
recorded decision is checked against the rule recomputed independently here from the
config's threshold (the rows of a product, the zero entries of an output by NumPy, the
mean live values, the statement count)."""
from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import gen
from gen import cwriter
from gen.codegen import output_check, pressure, schedule, split, zero_fill
from gen.codegen.config import CodegenConfig
from gen.codegen.functions import DRIVER_PARTS, kernel_function
from gen.codegen.pipeline import PASSES, plan_kernel
from gen.codegen.writers import WRITERS
from gen.emit import context, trace_for
from gen.errors import RbdgenError

ROOT = Path(__file__).resolve().parent.parent
#: the longest function the back end's modules may have (issue 33's acceptance)
MAX_FUNCTION_LINES = 80


def _plan(robot, algorithm, until, spec=None, options=None, **config):
    tr = trace_for(gen.load_robot(robot), algorithm, spec, **(options or {}))
    return plan_kernel(tr, CodegenConfig(**config), "rbd_t", until=until)


# --- the config --------------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    ({"batch": 3}, "batch=3: a batched kernel evaluates 2, 4, 8 or 16 states per call "
                   "(batch=None builds the scalar kernel)"),
    ({"batch": True}, "batch=True: a batched kernel evaluates"),
    ({"batch_trig": "fast"}, "batch_trig='fast': choose from vector, libm"),
    ({"scalar_trig": "fast"}, "scalar_trig='fast': choose from hoisted, vector, libm"),
    ({"order": "random"}, "order='random': choose from auto, schedule, tape"),
    ({"batch": 4, "avoid_stack": True},
     "a batched kernel keeps its intermediates in vector locals: avoid_stack does not apply"),
    ({"batch": 4, "scalar_trig": "libm"},
     "scalar_trig sets the scalar kernel's sin and cos; a batched kernel's are batch_trig"),
])
def test_the_config_refuses_options_that_do_not_go_together(options, message):
    with pytest.raises(RbdgenError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        CodegenConfig(**options)
    with pytest.raises(RbdgenError):                    # a copy is checked again
        CodegenConfig().with_(**options)


def test_the_refusals_that_need_the_kernel():
    c = CodegenConfig(batch=4)
    with pytest.raises(RbdgenError, match="^a batched kernel runs a fixed number of iterations in every lane"):
        c.check_kernel(driver=True, runtime=False)
    with pytest.raises(RbdgenError, match="^a batched kernel takes no run-time parameters"):
        c.check_kernel(driver=False, runtime=True)
    CodegenConfig().check_kernel(driver=True, runtime=True)      # a scalar kernel takes both


def test_the_config_is_frozen_and_its_request_is_the_cache_keys_codegen():
    c = CodegenConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.part_size = 1
    assert c.request() == {"prefix": None, "avoid_stack": False, "batch": None, "batch_trig": "vector",
                           "scalar_trig": "hoisted", "lanes": True}
    assert c.with_(part_size=7).part_size == 7 and c.part_size == 5000
    # a threshold away from its default changes the build's cache key, the default does not
    assert c.with_(part_size=7, order="tape").request() == {**c.request(), "tuned": {"part_size": 7, "order": "tape"}}
    assert c.with_(part_size=5000).request() == c.request()


def test_every_pass_has_a_module_with_run():
    assert [name for name, _ in PASSES] == ["batch", "functions", "products", "lanes", "trig", "output_check",
                                            "write", "pressure"]
    assert set(WRITERS) == {"scalar", "lanes", "products", "batched"}


# --- kernel-level passes -----------------------------------------------------------------

def test_batch_pass_records_the_width_and_refuses_a_driver():
    assert _plan("chain:3", "aba", "batch", batch=4).batch == 4
    assert _plan("chain:3", "aba", "batch").batch is None
    tr = trace_for(gen.load_robot("ur5"), "prox_ltl", "6D:tool0", tol=1e-8, max_iter=4)
    with pytest.raises(RbdgenError, match="^a batched kernel runs a fixed number of iterations"):
        plan_kernel(tr, CodegenConfig(batch=4), "rbd_t", until="batch")


def test_functions_pass_one_kernel_or_a_drivers_three():
    plan = _plan("chain:3", "aba", "functions")
    (f,) = plan.funcs
    assert f.name() == "rbd_t_kernel" and plan.driver is None
    assert [f.name_in(i) for i in range(f.n_in())] == ["q", "v", "tau"] and f.name_out(0) == "ddq"
    tr = trace_for(gen.load_robot("ur5"), "prox_ltl", "6D:tool0", tol=1e-8, max_iter=4)
    plan = plan_kernel(tr, CodegenConfig(), "rbd_d", until="functions")
    assert [f.name() for f in plan.funcs] == [f"rbd_d_{n}" for n, _ in DRIVER_PARTS]
    assert plan.driver["max_iter"] == 4 and plan.driver["w_offset"] == tr.const_size + 2 * tr.state_size


def test_products_pass_forms_loops_from_the_rows_threshold():
    """chain:16's aba_derivatives products have 16 rows (CodegenConfig.loop_rows): loops;
    chain:4's have 4 (below loop_min_rows): straight-line; a batched kernel: none."""
    plan = _plan("chain:16", "aba_derivatives", "products")
    assert plan.loops and all(p.base.shape[0] == 16 for p in plan.loops)
    assert not _plan("chain:4", "aba_derivatives", "products").loops
    assert not _plan("chain:16", "aba_derivatives", "products", batch=4).loops


def test_lanes_pass_plans_the_legs_where_they_pay():
    plan = _plan("solo12", "aba", "lanes")
    (lane,) = plan.lane_plans
    assert lane is not None and len(lane.families) == 1 and len(lane.families[0]) == 4
    assert lane.statements <= (1 - plan.config.lanes_min_gain) * lane.scalar
    gain = 1 - lane.statements / lane.scalar
    assert _plan("solo12", "aba", "lanes", lanes_min_gain=gain + 1e-3).lane_plans == [None]
    for off in ({"lanes": False}, {"avoid_stack": True}, {"order": "tape"}):
        assert _plan("solo12", "aba", "lanes", **off).lane_plans == [None]
    assert _plan("ur5", "aba", "lanes").lane_plans == [None]          # an arm has no family


def test_lanes_pass_gives_a_product_kernel_its_head():
    plan = _plan("chain:16", "aba_derivatives", "lanes")
    (head,) = plan.written_funcs
    assert head.name() == "rbd_t_kernel_head" and len(plan.head_layout) == len(plan.loops)


@pytest.mark.parametrize("config, trig, code", [
    ({}, "hoisted", {"preamble", "trig_vector"}),
    ({"scalar_trig": "vector"}, "vector", {"preamble", "calls"}),
    ({"scalar_trig": "libm"}, "libm", set()),
    ({"avoid_stack": True}, "libm", set()),            # hoisting keeps vectors in locals
    ({"lanes": False}, "libm", set()),                 # plain C99
])
def test_trig_pass(config, trig, code):
    plan = _plan("chain:3", "aba", "trig", **config)
    assert plan.trig == trig and set(plan.trig_code) == code


@pytest.mark.parametrize("robot, algorithm, config, writer", [
    ("ur5", "aba", {}, "scalar"), ("solo12", "aba", {}, "lanes"),
    ("chain:16", "aba_derivatives", {}, "products"), ("chain:3", "aba", {"batch": 4}, "batched"),
])
def test_write_pass_picks_the_writer(robot, algorithm, config, writer):
    plan = _plan(robot, algorithm, None, **config)
    assert plan.writer == writer and plan.code
    assert (plan.written is None) == (writer == "batched")


def test_the_plan_lists_every_decision():
    plan = _plan("solo12", "aba", None)
    assert plan.decisions() == {"batch": None, "functions": ["rbd_t_kernel"], "products": 0, "lanes": [True],
                                "trig": "hoisted", "writer": "lanes",
                                "output_checks": [None],        # ddq: every entry is its own node
                                "written": [{"parts": 1, "scheduled": plan.written[0].scheduled, "zero_filled": []}]}


def test_the_manifests_codegen_is_the_serialised_plan():
    tr = trace_for(gen.load_robot("solo12"), "aba")
    plan = plan_kernel(tr, CodegenConfig(), "rbd_solo12_aba")
    assert context(tr)["manifest"]["codegen"] == plan.manifest()
    assert set(plan.manifest()) == {"avoid_stack", "parts", "scheduled", "critical", "lanes"}


def _covered(runs, size):
    return set(range(size)) if runs is None else {a + i for a, n in runs for i in range(n)}


@pytest.mark.parametrize("robot", ["solo12", "anymal_c"])
def test_output_check_pass_covers_every_entry_that_can_be_nonfinite(robot):
    """The check runs hold, for each distinct non-constant node of the traced output (its
    SX elements grouped by CasADi's node hash, not by the tape the pass reads), at least
    one of its positions; and with any one input NaN, every output entry CasADi's
    evaluation makes NaN is NaN at a checked entry too."""
    tr = trace_for(gen.load_robot(robot), "crba")
    plan = plan_kernel(tr, CodegenConfig(), "rbd_t", until="output_check")
    (f,), (expr,) = plan.funcs, [ca.densify(ca.SX(e)) for _, e in tr.outputs]
    (runs,) = plan.output_checks
    covered = _covered(runs, f.nnz_out(0))
    nodes = {}
    for k, e in enumerate(expr.nonzeros()):
        if not e.is_constant():
            nodes.setdefault(e.element_hash(), set()).add(k)
    assert all(ks & covered for ks in nodes.values())
    assert runs is None or len(covered) < f.nnz_out(0)
    q = np.random.default_rng(1).uniform(-1, 1, f.nnz_in(0))
    for i in range(q.size):
        out = np.asarray(f(np.where(np.arange(q.size) == i, np.nan, q))).ravel(order="F")
        nan = set(np.flatnonzero(np.isnan(out)))
        assert not nan or nan & covered, f"q[{i}] NaN: entries {sorted(nan)} unchecked"


def test_output_check_pass_merges_runs_at_the_gap():
    """solo12 crba: at check_gap=0 the runs are the maximal stretches of listed
    positions; at a gap g, no two runs are g or fewer entries apart and merging adds only
    gaps of at most g; more runs than check_max_runs: checked by a table of them; fewer
    entries skipped than check_run_entries per run: the output is checked whole; a
    batched kernel gets the same runs."""
    f = _plan("solo12", "crba", "functions").funcs[0]
    (listed,) = output_check.checked_entries(f)
    for gap in (0, 2, 8, 64):
        (runs,) = _plan("solo12", "crba", "output_check", check_gap=gap).output_checks
        starts = [a for a, _ in runs]
        assert starts == sorted(starts) and set(listed) <= _covered(runs, f.nnz_out(0))
        assert all(b - (a + n) > gap for (a, n), (b, _) in zip(runs, runs[1:]))
        stretches = sum(1 for i, p in enumerate(listed) if i == 0 or p - listed[i - 1] > gap + 1)
        assert len(runs) == stretches
        if gap == 0:
            assert sum(n for _, n in runs) == len(listed)
    (runs,) = _plan("solo12", "crba", "output_check").output_checks
    assert not output_check.tabled(runs, len(runs)) and output_check.tabled(runs, len(runs) - 1)
    assert _plan("solo12", "crba", "output_check", batch=4).output_checks == [runs]
    # ur5's M: 15 of 36 entries in 5 runs skip 21 < 8 x 5 entries: checked whole
    (arm,) = _plan("ur5", "crba", "output_check", check_run_entries=0).output_checks
    assert len(arm) == 5 and sum(n for _, n in arm) == 15
    assert _plan("ur5", "crba", "output_check").output_checks == [None]
    assert _plan("ur5", "crba", "output_check", check_run_entries=4).output_checks == [arm]


# --- per-function passes (inside gen.cwriter.write_function) ------------------------------

def _mostly_zero():
    x = ca.SX.sym("x", 2)
    return ca.Function("z", [x], [ca.vertcat(x[0] * x[1], 0, 0, 0), ca.vertcat(x[0], x[1], 0, 0)])


def test_zero_fill_pass_fills_the_outputs_zero_at_the_fraction():
    f = _mostly_zero()
    zeros = [int(np.sum(np.asarray(ca.DM(ca.evalf(f.call([ca.DM([1.0, 2.0])])[o]))) == 0)) for o in range(2)]
    assert zeros == [3, 2]
    for fraction in (0.5, 0.6, 0.8):
        steps, fills = zero_fill.zero_fills(cwriter._steps(f), f, CodegenConfig(zero_fill_fraction=fraction))
        filled = [o for o in range(2) if zeros[o] >= fraction * f.nnz_out(o)]
        assert [int(s.split("res[")[1][0]) for s in fills] == filled
        assert sum(st.writes is None for st in steps) == 8 - sum(zeros[o] for o in filled)
        assert cwriter.write_function(f, config=CodegenConfig(zero_fill_fraction=fraction)).filled == tuple(filled)


def test_schedule_pass_decides_by_live_values():
    c = CodegenConfig()
    assert not schedule.worth_trying(c, "tape", lambda: 1e9)
    assert schedule.worth_trying(c, "schedule", lambda: 0.0)
    assert schedule.worth_trying(c, "auto", lambda: c.schedule_above) and \
        not schedule.worth_trying(c, "auto", lambda: c.schedule_above - 1)
    assert schedule.keep(c, "auto", 100.0, 89.0) and not schedule.keep(c, "auto", 100.0, 90.0)
    f = kernel_function("k", trace_for(gen.load_robot("ur5"), "aba"))
    steps = cwriter._steps(f)
    _, before, after = cwriter.schedule(steps)
    assert cwriter.tape_live(steps) == before < CodegenConfig.schedule_above
    assert not cwriter.write_function(f).scheduled                     # ur5: under 400 live values
    ratio = after / before                                             # tried always, kept by the ratio
    assert cwriter.write_function(f, config=CodegenConfig(schedule_above=0, schedule_below=ratio + 1e-9)).scheduled
    assert not cwriter.write_function(f, config=CodegenConfig(schedule_above=0, schedule_below=ratio)).scheduled
    assert cwriter.write_function(f, order="schedule").scheduled


def test_pressure_pass_asks_gcc_where_every_function_is_scheduled_in_one_part():
    on = _plan("solo12", "rnea", None)
    assert on.written[0].scheduled and on.written[0].parts == 1 and on.gcc_pressure
    assert on.code.count(pressure.PRAGMA) == 1 and on.manifest()["gcc_pressure"] is True
    before = on.code.split(pressure.PRAGMA)[0].splitlines()     # after the includes, before any definition
    assert any(ln.startswith("#include") for ln in before)
    assert all(ln.startswith("#include") or not ln.strip() for ln in before)
    off = _plan("solo12", "rnea", None, gcc_pressure=False)
    assert not off.gcc_pressure and "gcc_pressure" not in off.manifest()
    assert off.code == on.code.replace(pressure.PRAGMA + "\n", "")


@pytest.mark.parametrize("robot, algorithm, config", [
    ("solo12", "aba", {}),                                   # the tape order
    ("ur5", "crba", {}),                                     # the critical-path order
    ("solo12", "rnea", {"split_above": 500, "part_size": 200}),   # scheduled, in parts
    ("chain:16", "aba_derivatives", {}),                     # a product kernel's head
    ("chain:3", "aba", {"batch": 4}),                        # batched
])
def test_pressure_pass_leaves_the_other_kernels_alone(robot, algorithm, config):
    plan = _plan(robot, algorithm, None, **config)
    assert not plan.gcc_pressure and "#pragma GCC optimize" not in plan.code


def test_split_pass_cuts_parts_of_the_configs_size():
    c = CodegenConfig(part_size=100)
    assert split.part_size(c, 300, 300) is None and split.part_size(c, 301, 300) == 100
    assert split.part_size(c, 301, 50) == 50                     # never longer than split_above
    f = kernel_function("k", trace_for(gen.load_robot("ur5"), "aba"))
    w = cwriter.write_function(f, split_above=300, config=c, order="tape")
    statements = len(cwriter._steps(f))
    assert w.parts == math.ceil(statements / 100) and w.code.count("static RBDGEN_PART void k_p") == w.parts


# --- functions stay short ----------------------------------------------------------------

def test_no_function_of_gen_or_opcount_is_over_80_lines():
    """Issue 33's bound, on every module of gen/ and opcount/ (the back end's passes and
    writers included)."""
    paths = sorted([*(ROOT / "gen").rglob("*.py"), *(ROOT / "opcount").rglob("*.py")])
    long = [f"{p.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for p in paths for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long
