"""Pass ``pressure``: GCC's register-pressure-aware scheduling before register allocation
for the kernels in the greedy list schedule.

GCC schedules instructions before register allocation on most targets but not on x86,
where it used to raise spills; ``-fsched-pressure`` makes that first pass weigh the
registers live.  A kernel the greedy schedule already reordered (:mod:`gen.codegen.schedule`:
fewer values live than the tape) keeps its live values near the register file, and GCC's
pass then interleaves its independent chains without spilling.  The pass writes, after the
kernel file's ``#include`` lines::

    #if defined(__GNUC__) && !defined(__clang__) && defined(__AVX__)
    #pragma GCC optimize ("schedule-insns", "sched-pressure")
    #endif

when the scalar writer wrote the kernel's one function scheduled and in one part (not an
early-exit driver's three, a product kernel's head or a batched kernel: not measured), with ``config.gcc_pressure`` (manifest
``codegen.gcc_pressure``).  The rule and its limits, interleaved A/B in one
program, values identical (bench/reports/2026-11-28-speed.md §8): scheduled one-part
kernels run 0-17 % faster with AVX-512 or AVX2 (icub crba, nle, rnea 11-19 %); the
tape-order kernels (icub and talos aba, 16-23 % slower), the split ones (talos minv and
rnea_derivatives, 5-12 % slower) and SSE-only targets (two-operand instructions: icub
crba 15-21 % slower at x86-64-v2) are left alone.  GCC documents the ``optimize``
attribute and pragma as meant for debugging, not production, because some options do
not act per function; these two select a scheduling pass, which cannot change a value,
and the file's every function gets them (the inlined sin / cos routine included, so no
inlining is refused for an options mismatch).  clang and SSE-only builds do not see it
(the guard).
"""
from __future__ import annotations

from .plan import KernelPlan

PRAGMA = ('#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX__)\n'
          '#pragma GCC optimize ("schedule-insns", "sched-pressure")\n'
          '#endif\n')


def applies(plan: KernelPlan) -> bool:
    """Whether ``plan``'s kernel file gets :data:`PRAGMA` (module docstring)."""
    written = plan.written or []
    return bool(plan.config.gcc_pressure and plan.writer in ("scalar", "lanes") and written
                and len(written) == 1 and written[0].scheduled and written[0].parts == 1)


def run(plan: KernelPlan) -> None:
    """Record ``plan.gcc_pressure`` and insert :data:`PRAGMA` after the kernel file's
    leading ``#include`` lines."""
    plan.gcc_pressure = applies(plan)
    if plan.gcc_pressure:
        lines = plan.code.split("\n")
        at = 0
        while at < len(lines) and (lines[at].startswith("#include") or not lines[at].strip()):
            at += 1
        plan.code = "\n".join(lines[:at] + [PRAGMA, *lines[at:]])
