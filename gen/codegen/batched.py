"""The batched writer: a traced function's SX instruction tape as straight-line code over
GCC vector-extension values of N doubles, one vector statement per instruction
(``batch=N``, issue 15 §1; see gen/emit.py, "Batched kernels").

The tape is the one CasADi's own code generator walks (``instruction_id/input/output/
constant``); the compiler maps the vectors to AVX2 (N = 4) or AVX-512 (N = 8) registers as
``-march`` allows, without relying on the auto-vectoriser; CasADi's register allocation
(its work slots) is kept, so a slot is one vector local.  +, -, *, / and sqrt are IEEE
operations lane by lane, so a lane rounds as the scalar kernel does (up to where gcc
contracts a*b+c into an FMA, which it may decide differently for the two).  sin and cos
are :func:`gen.codegen.trig.routine`'s vectorised routine (libm per lane beyond its
range); the other libm functions and the comparisons run per lane in scalar C, as CasADi
writes them.
"""
from __future__ import annotations

import casadi as ca

from ..cwriter import LIBM_OPS, VECTOR_OPS, c_double, op_name
from ..errors import RbdgenError
from .config import BATCH_TRIG
from .trig import routine, vector_typedefs

_TRIG_OPS = {ca.OP_SIN: "sin", ca.OP_COS: "cos"}


def write(f: ca.Function, p: str, lanes: int, symbol: str, trig: str = "vector") -> str:
    """C of ``int <symbol>(const double **arg, double **res)``: the SX function ``f``
    evaluated on ``lanes`` states at once (see the section comment above).  ``trig``:
    "vector" (:func:`routine`) or "libm" (sin and cos per lane, bit for bit the
    scalar kernel's)."""
    if trig not in BATCH_TRIG:
        raise RbdgenError(f"batch_trig={trig!r}: choose from {', '.join(BATCH_TRIG)}")
    if not f.is_a("SXFunction"):
        raise RbdgenError("a batched kernel is emitted from an SX function")
    v = f"{p}_v"
    const: dict[int, str] = {}                 # work slot -> the literal it holds
    used: set[int] = set()
    body: list[str] = []
    uses_trig = False

    def vec(r):
        return const.get(r, f"w{r}")

    def splat(c):
        return f"(({v}){{" + ", ".join([c] * lanes) + "})"

    for k in range(f.n_instructions()):
        op, ins, out = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_CONST:
            const[out[0]] = c_double(f.instruction_constant(k))
            continue
        if op == ca.OP_OUTPUT:
            src = vec(ins[0]) if ins[0] not in const else splat(const[ins[0]])
            body.append(f"if (res[{out[0]}]) {p}_store(res[{out[0]}] + {out[1] * lanes}, {src});")
            continue
        r = out[0]
        if op == ca.OP_INPUT:
            line = f"w{r} = {p}_load(arg[{ins[0]}] + {ins[1] * lanes});"
        elif op in VECTOR_OPS or op in _TRIG_OPS:
            args = [vec(a) for a in ins]
            if all(a in const for a in ins):  # an operation of constants only: one vector operand
                args[0] = splat(args[0])
            if op in _TRIG_OPS and trig == "libm":
                arg = const[ins[0]] if ins[0] in const else f"w{ins[0]}[l]"
                line = f"for (l = 0; l < {lanes}; ++l) w{r}[l] = {_TRIG_OPS[op]}({arg});"
            elif op in _TRIG_OPS:
                uses_trig = True
                line = f"{p}_trig(&{args[0]}, &w{r}, {int(op == ca.OP_COS)});"
            else:
                line = f"w{r} = {VECTOR_OPS[op].format(*args)};"
        elif op in LIBM_OPS:
            args = [const[a] if a in const else f"w{a}[l]" for a in ins]
            line = f"for (l = 0; l < {lanes}; ++l) w{r}[l] = {LIBM_OPS[op].format(*args)};"
        else:
            raise RbdgenError(f"a batched kernel cannot evaluate CasADi operation {op_name(op)}")
        const.pop(r, None)
        used.add(r)
        body.append(line)
    decl = ", ".join(f"w{r}" for r in sorted(used))
    head = [*vector_typedefs(p, lanes),
            "/* the same at any double-aligned address, for loads and stores (macros: no vector crosses",
            "   a function boundary, see gen/cwriter.py, vector_types) */",
            f"typedef double {p}_m __attribute__((vector_size({8 * lanes}), aligned(8), may_alias));",
            f"#define {p}_load(x) (*(const {p}_m *)(x))",
            f"#define {p}_store(x, y) (*({p}_m *)(x) = (y))",
            ""]
    if uses_trig:
        head += routine(p, lanes).splitlines() + [""]
    lines = [*head,
             f"int {symbol}(const double **arg, double **res)",
             "{",
             *([f"    {v} {decl};"] if decl else []),
             "    int l;",
             "    (void)l;",
             *(f"    {b}" for b in body),
             "    return 0;",
             "}"]
    return "\n".join(lines)
