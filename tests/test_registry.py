"""The registry and the module layout (issue 11).

* every row of ``gen.algorithms.ALGORITHMS`` is complete and self-consistent;
* the modules of ``gen/`` and ``opcount/`` import each other without a cycle, imports
  inside functions included, and each imports only its own stage of the flow or earlier
  ones (URDF -> model -> kinematics -> constraints -> algorithm -> trace -> op count ->
  choose -> emit -> build -> verify/bench -> CLI, docs/ARCHITECTURE.md);
* imports inside functions are left only for the optional packages.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import gen
from gen.algorithms import ALGORITHMS
from gen.algorithms.registry import COMMON_DOCS, FAMILIES, REPORTS
from gen.constraint_spec import parse_constraints

ROOT = Path(__file__).resolve().parent.parent

#: the stages of the flow, earliest first; a module may import its own stage or earlier
STAGES = [
    ("gen.errors", "gen.portable", "gen.version", "gen.table", "gen.backend", "gen.codegen.config", "opcount.counter"),
    ("gen.model", "gen.buildcache"),
    ("gen.spatial", "gen.canonical_frames", "gen.urdf", "gen.mjcf", "gen.pinmodel", "gen.robots"),
    ("gen.kinematics",),
    ("gen.constraints",),
    ("gen.constraint_spec",),
    ("gen.algorithms", "gen.configuration"),
    ("gen.api",),
    ("gen.conditioning",),
    ("gen.trace",),
    ("opcount",),
    ("gen.choose",),
    ("gen.lanes", "gen.cwriter", "gen.products", "gen.codegen", "gen.emit"),
    ("gen.fastcall", "gen.kernel"),
    ("gen.build",),
    ("gen.generic", "gen.pinref", "gen.casadi_api", "gen.mujocoref", "gen.verify", "gen.crocoddyl",
     "gen.crocoddyl_cpp"),
    ("gen.bench",),
    ("gen.scaling", "gen.simulate"),
    ("gen.cli", "gen.regenerate", "gen"),
]
#: packages that are optional or heavy to load, imported where they are used
LAZY = ("pinocchio", "mujoco", "matplotlib", "adam", "mpmath")


def stage(module: str) -> int:
    """The stage of ``module``: the longest prefix listed in :data:`STAGES`."""
    best = None
    for i, names in enumerate(STAGES):
        for n in names:
            if (module == n or module.startswith(n + ".")) and (best is None or len(n) > len(best[1])):
                best = (i, n)
    assert best is not None, f"{module} is in no stage of tests/test_registry.py STAGES"
    return best[0]


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted([*ROOT.glob("gen/**/*.py"), *ROOT.glob("opcount/**/*.py")]):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """module -> the project modules it imports (anywhere in the file), and the
    in-function imports of non-optional packages as ``path:line: module``."""
    mods = modules()
    graph, hidden = {}, []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[:len(package) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names]
                # ``from pkg import sub``: the submodule; ``from pkg import name``: the package
                targets = subs if all(t in mods for t in subs) else [base, *subs]
            else:
                continue
            deps |= {t for t in targets if t in mods and t != name}
        for fn in ast.walk(tree):
            # a package's module-level __getattr__ (PEP 562) is the one sanctioned lazy
            # import: gen's facade exposing gen.casadi_function(_external), a later stage
            lazy_facade = fn in tree.body and getattr(fn, "name", "") == "__getattr__" and path.name == "__init__.py"
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not lazy_facade:
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        what = node.names[0].name if isinstance(node, ast.Import) else node.module or "."
                        if not what.startswith(LAZY):
                            hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}: {what}")
        graph[name] = deps
    return graph, hidden


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, or None (depth-first search with colours)."""
    colour, stack = {}, []

    def visit(v):
        colour[v] = "grey"
        stack.append(v)
        for w in sorted(graph[v]):
            if colour.get(w) == "grey":
                return stack[stack.index(w):] + [w]
            if w not in colour and (c := visit(w)):
                return c
        colour[v] = "black"
        stack.pop()
        return None

    for v in sorted(graph):
        if v not in colour and (c := visit(v)):
            return c
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    graph, _ = import_graph()
    assert len(graph) > 40
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_a_later_stage():
    graph, _ = import_graph()
    late = [f"{m} (stage {stage(m)}) imports {d} (stage {stage(d)})"
            for m, deps in graph.items() for d in sorted(deps) if stage(d) > stage(m)]
    assert not late, "\n".join(late)


def test_imports_inside_functions_are_only_the_optional_packages():
    _, hidden = import_graph()
    assert not hidden, "\n".join(hidden)


# --- the rows ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_row_is_complete(name):
    row = ALGORITHMS[name]
    assert row.name == name and callable(row.fn)
    assert row.family in FAMILIES and row.constrained == FAMILIES[row.family]
    assert row.summary and row.source, f"{name}: summary and source are required"
    assert row.reports <= set(REPORTS), f"{name}: unknown reports {row.reports - set(REPORTS)}"
    assert (row.generic is None) == bool(row.generic_note), \
        f"{name}: give the generic C entry or say why there is none"
    assert len({o.name for o in row.options}) == len(row.options)
    model = gen.load_robot("solo12")
    cset = parse_constraints(model, "3D:FL_FOOT,3D:HR_FOOT") if row.constrained else None
    for io in (row.inputs(model, cset), row.outputs(model, cset)):
        assert io and all(isinstance(n, str) and all(int(d) >= 0 for d in dims) for n, *dims in io)
        for n, *_ in io:
            assert row.doc(n), f"{name}: input/output '{n}' has no one-line doc (row docs or COMMON_DOCS)"
    names = [n for n, *_ in row.inputs(model, cset) + row.outputs(model, cset)]
    assert len(names) == len(set(names)), f"{name}: repeated input/output names"


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_row_runs_with_its_own_shapes(name):
    """``gen.run`` on inputs of the row's shapes gives outputs of the row's shapes."""
    row = ALGORITHMS[name]
    model = gen.load_robot("solo12")
    cset = parse_constraints(model, "3D:FL_FOOT,3D:HR_FOOT") if row.constrained else None
    rng = np.random.default_rng(0)
    ins = [model.random_q(rng) if n == "q" else rng.normal(size=dims[0]) for n, *dims in row.inputs(model, cset)]
    outs = gen.run(model, name, *ins, constraints=cset)
    outs = outs if isinstance(outs, tuple) else (outs,)
    want = row.outputs(model, cset)
    assert len(outs) == len(want)
    for got, (n, r, c) in zip(outs, want):
        assert np.size(got) == r * c, f"{name}: output {n} has {np.size(got)} entries, row says {r} x {c}"


def test_option_errors_name_the_option_and_its_range():
    row = ALGORITHMS["prox_ltl"]
    with pytest.raises(gen.RbdgenError, match=r"prox_ltl: option iterations=0 is outside \[1, inf\)"):
        row.check_options({"iterations": 0})
    with pytest.raises(gen.RbdgenError, match="has no option --speed"):
        row.check_options({"speed": 1}, spell=lambda k: "--" + k)
    assert set(COMMON_DOCS) >= {"q", "v", "tau"}
