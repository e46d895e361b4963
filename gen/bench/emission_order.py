"""Instruction order of the scalar kernels: CasADi's tape vs rbdgen's schedule (issue 15 §2).

For each case: trace, write the kernel twice -- in CasADi's tape order on its work slots
(``order="tape"``) and as the build writes it on doubles (``order="auto"``, no lanes: the
greedy list schedule of :func:`gen.cwriter.schedule` where it lowers the values live at
once; the lanes of :mod:`gen.lanes` are measured in docs/ARCHITECTURE.md) -- compile each
alone with the build's flags, and report per variant the mean number of live values,
the straight-line machine code (``objdump -d``: instructions, and those with a
stack-memory operand, i.e. spills and reloads of intermediates), the run time (both
variants linked into one program, called interleaved, :func:`compile_time.timing_program`)
and the arithmetic rate (op count over run time, per nominal clock cycle of the CPU).

``python -m gen.bench.emission_order [--date YYYY-MM-DD] [--cases talos/aba,...]``
writes ``bench/reports/<date>-emission-order.{md,json}`` (run it from the repository
root); progress on stderr.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import cwriter
from ..build import compile_flags
from ..codegen.functions import kernel_function
from ..emit import emit_trace, timed, trace_for
from ..robots import load_robot
from . import compile_time, harness, report

#: (robot, algorithm): the kernels issue 15 §2 names, and smaller ones where the tape
#: order may already be the tighter one
CASES = (("talos", "aba"), ("talos", "rnea"), ("talos", "crba"), ("solo12", "aba"), ("solo12", "rnea"),
         ("solo12", "crba"), ("panda", "aba"), ("panda", "rnea"), ("panda", "crba"), ("talos", "minv"),
         ("panda", "rnea_derivatives"), ("panda", "aba_derivatives"), ("solo12", "aba_derivatives"))
VARIANTS = ("tape", "auto")
#: issue 15 §2's targets: run time tape / scheduled, and floating-point operations per cycle of talos aba
TARGET_SPEEDUP, TARGET_OPS_PER_CYCLE = 1.5, 2.0


#: floating-point arithmetic instructions (scalar and packed double; an FMA is one)
FP_ARITH = re.compile(r"\sv?(fn?m(add|sub)\d+[sp]d|(add|sub|mul|div|sqrt|min|max)[sp]d)\s")
#: a chain of dependent 64-bit integer multiplications, each 3 cycles on every x86-64 core
#: since Nehalem and Zen (Agner Fog, "Instruction tables": IMUL r64, r64), in an ``asm
#: volatile`` the compiler can neither fold nor vectorise; the median of 201 rounds of 2e6
#: (~1.5 ms each) on the thread's CPU-time clock, which stops while the thread is not
#: running (on a core shared with other jobs the wall clock counts their time too).  Not
#: additions: Intel's Golden Cove-class cores eliminate ``add $1, reg`` at register
#: renaming, several per cycle (a chain of them read 21 "GHz" on the 2.6 GHz Xeon of the
#: 2026-11-28 suite).  Prints GHz.
CLOCK_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(void)
{
    struct timespec a, b;
    static double ns[201];
    long x = 3, one = 1;
    for (int r = 0; r < 201; ++r) {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (long i = 0; i < 250000; ++i)
            __asm__ volatile("imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
                             "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0" : "+r"(x) : "r"(one));
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        ns[r] = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    }
    qsort(ns, 201, sizeof ns[0], by_value);
    printf("%f %ld\n", 3 * 2e6 / ns[100], x);
    return 0;
}
"""
#: a measured clock outside (low, high) x the clock the OS reports (lscpu's "CPU max MHz"
#: where it has one, else /proc/cpuinfo's "cpu MHz", a VM's nominal clock) is no clock:
#: boost stays within 2x nominal on x86 parts, and the chain cannot run slower than half
#: the slowest clock the OS reports unless the core is shared
CLOCK_RANGE = (0.5, 2.0)


def reported_mhz() -> float | None:
    """The clock the OS reports: lscpu's "CPU max MHz", else the highest "cpu MHz" of
    /proc/cpuinfo; None when neither says."""
    try:
        out = subprocess.run(["lscpu"], check=True, capture_output=True, text=True).stdout
        m = re.search(r"^CPU max MHz:\s*([\d.]+)", out, re.M)
        if m:
            return float(m.group(1))
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        found = re.findall(r"^cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return None
    return max(map(float, found)) if found else None


def machine_code(obj: Path) -> dict:
    """Instructions of an object file's code, its floating-point arithmetic
    (:data:`FP_ARITH`) and the instructions addressing the stack (``%rsp``/``%rbp``
    operands: spills and reloads; the kernels keep no other data there)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], check=True, capture_output=True,
                          text=True).stdout
    lines = [ln for ln in text.splitlines() if re.match(r"^\s+[0-9a-f]+:\s", ln)]
    return {"instructions": len(lines), "fp": sum(bool(FP_ARITH.search(ln)) for ln in lines),
            "stack": sum(bool(re.search(r"\(%r[sb]p\)", ln)) for ln in lines)}


def clock_ghz(work: Path) -> float | None:
    """The core's clock while busy (boost included), from :data:`CLOCK_C` run on one core
    (x86-64 only); None when it cannot run or reads outside :data:`CLOCK_RANGE` of
    :func:`reported_mhz`."""
    try:
        (work / "clock.c").write_text(CLOCK_C)
        subprocess.run([os.environ.get("CC", "gcc"), "-O1", str(work / "clock.c"), "-o", str(work / "clock")],
                       check=True, capture_output=True)
        cpu = min(os.sched_getaffinity(0))
        out = subprocess.run([str(work / "clock")], check=True, capture_output=True, text=True,
                             preexec_fn=lambda: os.sched_setaffinity(0, {cpu})).stdout
        ghz = float(out.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None
    mhz = reported_mhz()
    if mhz and not CLOCK_RANGE[0] <= ghz * 1000 / mhz <= CLOCK_RANGE[1]:
        return None
    return round(ghz, 2)


def measure(robot: str, algorithm: str, *, flags, work: Path, say) -> dict:
    """One row: ops, live values, machine code and run time of both variants."""
    model = load_robot(robot)
    tr = trace_for(model, algorithm)
    f = kernel_function("k", tr)
    _, before, after = cwriter.schedule(cwriter._steps(f))
    row = {"robot": robot, "algorithm": algorithm, "live": {"tape": round(before, 1), "scheduled": round(after, 1)}}
    folders, objects = {}, {}
    for v in VARIANTS:
        with timed(say, f"{robot}/{algorithm}: emit and compile {v}"):
            bf = emit_trace(tr, work / v, prefix=f"rbd_eo_{v}", order=v, lanes=False,   # the order on doubles
                            progress=lambda s: None)
            obj = work / f"{v}.o"
            subprocess.run([os.environ.get("CC", "gcc"), *flags, "-g0", "-fPIC", "-c",
                            str(bf.path / f"{bf.prefix}_kernel.c"), "-o", str(obj)], check=True)
        folders[v], objects[v] = bf, obj
        row[v] = {"scheduled": bf.manifest["codegen"]["scheduled"][0], **machine_code(obj)}
    fn = folders["auto"].manifest["functions"][0]
    row["ops"] = fn["opcount"]["total"]
    with timed(say, f"{robot}/{algorithm}: timing"):
        times, diff = compile_time.run_timing(folders, objects, compile_time.random_states(
            model, tr, np.random.default_rng(0)), fn, flags, work)
    for v, ns in times.items():
        row[v]["ns"] = ns
    row["max_abs_diff"] = diff
    return row


def run(cases=CASES, *, flags=None, date: str | None = None, progress=None) -> dict:
    say = progress or (lambda s: None)
    flags = compile_flags(flags)
    rows = []
    for robot, algorithm in cases:
        work = Path(tempfile.mkdtemp(prefix="rbdgen-eo-"))
        try:
            rows.append(measure(robot, algorithm, flags=flags, work=work, say=say))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    machine = harness.machine_info()      # its load average: at the end of the run
    work = Path(tempfile.mkdtemp(prefix="rbdgen-eo-"))
    try:
        ghz = clock_ghz(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "flags": flags,
            "ghz": ghz, "rounds": compile_time.ROUNDS, "states": compile_time.N_STATES, "rows": rows}


def markdown(doc: dict, notes: str = "") -> str:
    m, ghz = doc["machine"], doc["ghz"]
    out = [f"# Instruction order of the scalar kernels: tape vs schedule ({doc['date']})", "",
           ("Generated by `python -m gen.bench.emission_order`.  *tape*: CasADi's instruction order (a "
            "depth-first walk from the outputs) on its work slots; *auto*: as `gen.build` writes it, the "
            "greedy list schedule of `gen.cwriter.schedule` where it lowers the mean number of live values "
            "(else the tape).  Each kernel compiled alone with "
            f"`gcc {' '.join(doc['flags'])} -g0 -fPIC -c`; machine code counted with `objdump -d` (straight-line "
            "code: static = executed, bar the libm calls); *stack*: instructions with a `%rsp`/`%rbp` operand, "
            "i.e. spills and reloads; *FP*: floating-point arithmetic instructions (an FMA is one).  Run time: "
            f"both variants in one program, called interleaved on {doc['states']} random states cycled, median "
            f"of {doc['rounds']} rounds of ~2 ms, the program linked in both orders of the two objects and the "
            f"lower median kept.  Per cycle: the traced op count (an FMA is two ops) and the FP "
            f"instructions over run time at the core's clock measured under load by a chain of dependent "
            f"integer multiplications ({ghz or '?'} GHz).  {report.machine_sentence(m)}"), "",
           ("| kernel | ops | live values tape / scheduled | order used | instructions tape / auto | "
            "FP tape / auto | stack operands tape / auto | ns tape / auto | speed-up | ops per cycle tape / auto | "
            "FP per cycle tape / auto | max abs diff |"),
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        t, a = r["tape"], r["auto"]

        def rate(n, v):
            return "-" if not ghz or not v.get("ns") else f"{n / (v['ns'] * ghz):.2f}"

        diff = "-" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.1e}"
        out.append(f"| {r['robot']} {r['algorithm']} | {r['ops']} | {r['live']['tape']:.0f} / "
                   f"{r['live']['scheduled']:.0f} | {'schedule' if a['scheduled'] else 'tape'} | "
                   f"{t['instructions']} / {a['instructions']} | {t['fp']} / {a['fp']} | {t['stack']} / {a['stack']} | "
                   f"{t['ns']:.0f} / {a['ns']:.0f} | {t['ns'] / a['ns']:.2f} | {rate(r['ops'], t)} / "
                   f"{rate(r['ops'], a)} | {rate(t['fp'], t)} / {rate(a['fp'], a)} | {diff} |")
    talos = {r["algorithm"]: r for r in doc["rows"] if r["robot"] == "talos"}
    met = [f"talos {k}: {v['tape']['ns'] / v['auto']['ns']:.2f}x" for k, v in talos.items()
           if k in ("aba", "rnea", "crba")]
    if met:
        out += ["", f"Issue 15 §2 targets: >= {TARGET_SPEEDUP}x on talos aba, rnea, crba (measured: "
                    f"{', '.join(met)}); talos aba >= {TARGET_OPS_PER_CYCLE} ops per cycle."]
    return "\n".join(out) + "\n" + (f"\n{notes.strip()}\n" if notes.strip() else "")


def write(doc: dict, out_dir=None, notes: str = "") -> dict[str, Path]:
    return report.write_dated(doc, "emission-order", markdown(doc, notes), out_dir)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--date", help="report date (default: today)")
    ap.add_argument("--cases", help="ROBOT/ALGORITHM,... (default: CASES)")
    ap.add_argument("--out", help="report folder (default: bench/reports/)")
    ap.add_argument("--notes", help="a markdown file appended to the report")
    args = ap.parse_args(argv)
    notes = Path(args.notes).read_text(encoding="utf-8") if args.notes else ""

    say = report.progress
    cases = [tuple(c.split("/", 1)) for c in args.cases.split(",")] if args.cases else CASES
    doc = run(cases, date=args.date, progress=say)
    report.publish(doc, "emission-order", markdown(doc, notes), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
