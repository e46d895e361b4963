"""Compile time of big kernels, split into parts vs one function (issue 15 §3).

For each case: trace, emit the kernel twice -- as the build emits it (tapes longer than
``split_above`` instructions split into parts of ``part_size``, the fields of
:class:`gen.codegen.config.CodegenConfig`) and as one C function -- compile each kernel file alone
under ``/usr/bin/time -v`` with the build's flags (:func:`gen.build.compile_flags`, plus
``-g0 -fPIC`` as :mod:`gen.build` adds them), reporting wall time and gcc's max RSS, then
link the variants that compiled into one timing program (its C below) that calls them
interleaved (in reverse order every other round) on 16 random states cycled and reports
the median ns per call.  A compile
that exceeds ``timeout`` seconds is stopped and reported as such.  The two variants'
outputs are compared on every state before timing (they differ only where gcc contracts
a*b+c differently in the two).

``python -m gen.bench.compile_time [--date YYYY-MM-DD] [--cases talos/aba,...]
[--timeout S] [--notes FILE]`` writes ``bench/reports/<date>-compile-time.{md,json}`` (run it from the
repository root); progress on stderr.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from opcount.constrained import CONSTRAINED_SETS

from .. import cwriter
from ..build import compile_flags
from ..codegen.config import CodegenConfig
from ..codegen.functions import kernel_function
from ..emit import emit_trace, timed, trace_for
from ..robots import load_robot
from ..trace import DriverTrace
from . import harness, report

#: (robot, algorithm, named constraint set of opcount.constrained or None)
CASES = (("talos", "aba", None), ("talos", "rnea", None), ("talos", "crba", None),
         ("talos", "rnea_derivatives", None), ("talos", "aba_derivatives", None),
         ("solo12", "constrained_derivatives", "solo12_3d_4feet"), ("chain:300", "aba", None))
#: seconds after which a compile is stopped (issue 15 §3 asks for under 2 minutes)
TIMEOUT = 240
#: issue 15 §3: trace + emit + compile within this, gcc within MAX_RSS_MB, split run time
#: within MAX_SLOWDOWN of the unsplit build
BUDGET_S, MAX_RSS_MB, MAX_SLOWDOWN = 120.0, 1024.0, 1.10
#: timing: rounds (median over them) and the target length of one round
ROUNDS, ROUND_NS = 41, 2e6
N_STATES = 16
VARIANTS = ("split", "unsplit")


def compile_c(src: Path, obj: Path, flags, timeout: float) -> dict:
    """gcc ``flags -g0 -fPIC -c src`` under ``/usr/bin/time -v``: seconds (wall), max
    RSS in MB, or ``timeout: True``."""
    cc = os.environ.get("CC", "gcc")
    cmd = ["/usr/bin/time", "-v", cc, *flags, "-g0", "-fPIC", "-c", str(src), "-o", str(obj)]
    t0 = time.perf_counter()
    # a session of its own, so that a timeout stops gcc's cc1 too, not only /usr/bin/time
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"timeout": True, "seconds": None, "rss_mb": None}
    if proc.returncode != 0:
        raise RuntimeError(f"{cc} failed on {src.name}: {err[-2000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    wall = time.perf_counter() - t0
    return {"timeout": False, "seconds": round(wall, 2), "rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None}


def _array(name: str, values) -> str:
    return f"static const double {name}[{len(values)}] = {{{', '.join(cwriter.c_double(x) for x in values)}}};"


def timing_program(folders: dict, states: list[list[np.ndarray]], fn: dict) -> str:
    """C of a program calling the public function of each folder (variant -> BuildFolder)
    on ``states`` (a list of inputs per state), round-robin over the variants: it prints
    each output of each variant on state 0 (``out <variant> <hex doubles>``), then per
    variant the median ns per call (``ns <variant> <median>``)."""
    n = len(states)
    lines = ["#define _POSIX_C_SOURCE 199309L", "#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>"]
    lines += [f'#include "{bf.manifest["header"]}"' for bf in folders.values()]
    for i, x in enumerate(fn["inputs"]):
        lines.append(_array(f"in{i}", np.concatenate([s[i] for s in states])))
    for j, y in enumerate(fn["outputs"]):
        lines.append(f"static double out{j}[{y['size']}];")
    lines.append(f"static double work[{max(max(bf.manifest['functions'][0]['work_size'] for bf in folders.values()), 1)}];")
    lines += [("static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); "
               "return t.tv_sec * 1e9 + t.tv_nsec; }"),
              ("static int cmp(const void *a, const void *b) "
               "{ double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }")]
    for v, bf in folders.items():
        args = ", ".join([f"in{i} + s * {x['size']}" for i, x in enumerate(fn["inputs"])] +
                         [f"out{j}" for j in range(len(fn["outputs"]))] + ["work"])
        lines += [f"static void call_{v}(long calls)", "{", "    long c;",
                  f"    for (c = 0; c < calls; ++c) {{ int s = (int)(c % {n}); {bf.prefix}({args}); }}", "}"]
    lines += ["static void show(const char *v)", "{", "    int k;", '    printf("out %s", v);']
    for j, y in enumerate(fn["outputs"]):
        lines.append(f'    for (k = 0; k < {y["size"]}; ++k) printf(" %a", out{j}[k]);')
    lines += ['    printf("\\n");', "}", "int main(void)", "{",
              f"    static double t[{len(folders)}][{ROUNDS}];",
              "    double t0, one;", "    long calls;", "    int r;"]
    for v in folders:
        lines += [f"    call_{v}(1);", f'    show("{v}");']
    first = next(iter(folders))
    lines += [f"    t0 = now(); call_{first}(10); one = (now() - t0) / 10;",
              f"    calls = (long)({ROUND_NS} / (one > 1 ? one : 1)) + 1;",
              f"    for (r = 0; r < {ROUNDS}; ++r) {{"]
    for order in (list(enumerate(folders)), list(enumerate(folders))[::-1]):   # even rounds, odd rounds
        lines.append("        if (r % 2 == 0) {" if order[0][0] == 0 else "        else {")
        for k, v in order:
            lines.append(f"            t0 = now(); call_{v}(calls); t[{k}][r] = (now() - t0) / calls;")
        lines.append("        }")
    lines.append("    }")
    for k, v in enumerate(folders):
        lines += [f"    qsort(t[{k}], {ROUNDS}, sizeof(double), cmp);",
                  f'    printf("ns {v} %.1f\\n", t[{k}][{ROUNDS // 2}]);']
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def random_states(model, tr, rng) -> list[list[np.ndarray]]:
    return [[model.random_q(rng) if name == "q" else rng.normal(size=int(s.numel())) for name, s in tr.inputs]
            for _ in range(N_STATES)]


def measure(robot: str, algorithm: str, set_name: str | None, *, flags, timeout: float, work: Path,
            say, config: CodegenConfig) -> dict:
    """One row: sizes, trace / emit / compile times and RSS of both variants, run times."""
    spec = CONSTRAINED_SETS[set_name][1] if set_name else None
    label = f"{robot}/{algorithm}" + (f" on {set_name}" if set_name else "")
    model = load_robot(robot)
    t0 = time.perf_counter()
    tr = trace_for(model, algorithm, spec)
    row = {"robot": robot, "algorithm": algorithm, "set": set_name, "trace_s": round(time.perf_counter() - t0, 2)}
    folders = {}
    for v in VARIANTS:
        with timed(say, f"{label}: emit {v}") as info:
            t0 = time.perf_counter()
            bf = emit_trace(tr, work / v, prefix=f"rbd_ct_{v}", progress=lambda s: None,
                            config=config if v == "split" else config.with_(split_above=sys.maxsize))
            kernel = bf.path / f"{bf.prefix}_kernel.c"
            row[v] = {"emit_s": round(time.perf_counter() - t0, 2), "c_kb": round(kernel.stat().st_size / 1024),
                      "parts": bf.manifest["codegen"]["parts"],
                      "stack_doubles": bf.manifest["functions"][0]["stack_doubles"]}
            info["detail"] = f"{row[v]['c_kb']} kB, parts {row[v]['parts']}"
        folders[v] = bf
    fn = folders["split"].manifest["functions"][0]
    row["ops"] = fn["opcount"]["total"]
    row["instructions"] = sum(int(f.n_instructions()) for f in _functions(tr))
    if row["split"]["parts"] == row["unsplit"]["parts"]:     # below the threshold: one build to measure
        del folders["unsplit"]
        row["unsplit"] = "same as split"
    objects = {}
    for v, bf in folders.items():
        obj = work / f"{v}.o"
        with timed(say, f"{label}: gcc {v} ({' '.join(flags)})", announce=True) as info:
            row[v].update(compile_c(bf.path / f"{bf.prefix}_kernel.c", obj, flags, timeout))
            info["detail"] = "stopped at the timeout" if row[v]["timeout"] else f"max RSS {row[v]['rss_mb']} MB"
        if not row[v]["timeout"]:
            objects[v] = obj
    timed_folders = {v: folders[v] for v in objects}
    with timed(say, f"{label}: timing {', '.join(timed_folders)}"):
        times, agree = run_timing(timed_folders, objects, random_states(model, tr, np.random.default_rng(0)), fn,
                                   flags, work)
    for v, ns in times.items():
        row[v]["ns"] = ns
    row["max_abs_diff"] = agree
    return row


def _functions(tr):
    if isinstance(tr, DriverTrace):
        return [kernel_function(n, getattr(tr, n)) for n in ("setup", "step", "finish")]
    return [kernel_function("k", tr)]


def run_timing(folders, objects, states, fn, flags, work: Path):
    """Build and run :func:`timing_program`: (variant -> median ns, max |difference| of
    the two variants' outputs on state 0, or None for one variant).  Straight-line
    kernels of this size run faster or slower by where the linker puts them (two
    byte-identical copies in one program: 20.9 and 25.5 us), so with two variants the
    program is linked twice, the objects in both orders, and a variant's time is the
    lower of its two medians."""
    main_c = work / "timing.c"
    main_c.write_text(timing_program(folders, states, fn))
    cc = os.environ.get("CC", "gcc")
    srcs = [str(bf.path / bf.manifest["sources"][0]) for bf in folders.values()]       # the wrappers
    incs = [a for bf in folders.values() for a in ("-I", str(bf.path))]
    times, values = {}, {}
    for n, order in enumerate([list(objects.values()), list(objects.values())[::-1]][:len(objects)]):
        exe = work / f"timing{n}"
        subprocess.run([cc, *flags, "-g0", *incs, str(main_c), *srcs, *map(str, order), "-lm", "-o",
                        str(exe)], check=True, capture_output=True, text=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
        values = {ln.split()[1]: np.array([float.fromhex(x) for x in ln.split()[2:]])
                  for ln in out.splitlines() if ln.startswith("out ")}
        for ln in out.splitlines():
            if ln.startswith("ns "):
                v, ns = ln.split()[1], float(ln.split()[2])
                times[v] = min(times.get(v, ns), ns)
    agree = float(np.max(np.abs(np.subtract(*values.values())))) if len(values) == 2 else None
    return times, agree


def run(cases=CASES, *, flags=None, timeout: float = TIMEOUT, date: str | None = None, progress=None,
        config: CodegenConfig = CodegenConfig()) -> dict:
    say = progress or (lambda s: None)
    flags = compile_flags(flags)
    rows = []
    for robot, algorithm, set_name in cases:
        work = Path(tempfile.mkdtemp(prefix="rbdgen-ct-"))
        try:
            rows.append(measure(robot, algorithm, set_name, flags=flags, timeout=timeout, work=work, say=say,
                                config=config))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        say(f"done {robot}/{algorithm}")
    machine = harness.machine_info()      # its load average: at the end of the run
    return {"date": date or _dt.date.today().isoformat(), "machine": machine, "flags": flags, "timeout_s": timeout,
            "split_above": config.split_above, "part_size": config.part_size, "rounds": ROUNDS,
            "states": N_STATES, "rows": rows}


def _cell(v: dict | str, key: str, fmt: str = "{}") -> str:
    if isinstance(v, str):
        return "="
    if key == "seconds" and v.get("timeout"):
        return "stopped"
    x = v.get(key)
    return "-" if x is None else fmt.format(x)


def markdown(doc: dict, notes: str = "") -> str:
    m = doc["machine"]
    out = [f"# Compile time of big kernels: split vs one function ({doc['date']})", "",
           ("Generated by `python -m gen.bench.compile_time`.  Each kernel file compiled alone, "
            f"`gcc {' '.join(doc['flags'])} -g0 -fPIC -c` (the flags of `gen.build`) under `/usr/bin/time -v`: "
            "wall time and gcc's maximum resident set size.  *split*: as rbdgen emits it (tapes over "
            f"{doc['split_above']} instructions in `static` parts of {doc['part_size']}, gen/codegen/config.py); "
            f"*unsplit*: the same tape as one C function (what the CasADi code generator wrote).  Compiles over "
            f"{doc['timeout_s']:g} s are stopped.  Run time: both variants linked into one program, called "
            f"interleaved on {doc['states']} random states cycled, median over {doc['rounds']} rounds of ~2 ms "
            "(ns per call), the program linked twice with the objects in both orders and the lower median "
            "kept (run time moves with code placement).  `=`: below the threshold, the two are the same C.  trace + emit + compile is the "
            f"issue 15 §3 budget ({BUDGET_S:g} s, {MAX_RSS_MB:g} MB, run time within "
            f"{round((MAX_SLOWDOWN - 1) * 100)} %).  {report.machine_sentence(m)}"), "",
           ("| kernel | ops | instructions | parts | C size [kB] split / unsplit | trace + emit [s] | "
            "compile [s] split / unsplit | max RSS [MB] split / unsplit | run time [ns] split / unsplit | "
            "split / unsplit | max abs diff |"),
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        s, u = r["split"], r["unsplit"]
        name = f"{r['robot']} {r['algorithm']}" + (f" ({r['set']})" if r["set"] else "")
        diff = "-" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.1e}"
        ratio = "-" if isinstance(u, str) or not u.get("ns") or not s.get("ns") else f"{s['ns'] / u['ns']:.3f}"
        out.append(f"| {name} | {r['ops']} | {r['instructions']} | {'+'.join(map(str, s['parts']))} | "
                   f"{s['c_kb']} / {_cell(u, 'c_kb')} | {r['trace_s'] + s['emit_s']:.1f} | "
                   f"{_cell(s, 'seconds', '{:.1f}')} / {_cell(u, 'seconds', '{:.1f}')} | "
                   f"{_cell(s, 'rss_mb', '{:.0f}')} / {_cell(u, 'rss_mb', '{:.0f}')} | "
                   f"{_cell(s, 'ns', '{:.0f}')} / {_cell(u, 'ns', '{:.0f}')} | {ratio} | "
                   f"{diff} |")
    return "\n".join(out) + "\n" + (f"\n{notes.strip()}\n" if notes.strip() else "")


def write(doc: dict, out_dir=None, notes: str = "") -> dict[str, Path]:
    return report.write_dated(doc, "compile-time", markdown(doc, notes), out_dir)


def _case(text: str):
    robot, _, rest = text.partition("/")
    algorithm, _, set_name = rest.partition("@")
    return robot, algorithm, set_name or None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--date", help="report date (default: today)")
    ap.add_argument("--cases", help="ROBOT/ALGORITHM[@SET],... (default: the issue's seven)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds before a compile is stopped")
    ap.add_argument("--out", help="report folder (default: bench/reports/)")
    ap.add_argument("--notes", help="a markdown file appended to the report (measurements made outside this run)")
    args = ap.parse_args(argv)
    notes = Path(args.notes).read_text(encoding="utf-8") if args.notes else ""

    say = report.progress
    cases = [_case(c) for c in args.cases.split(",")] if args.cases else CASES
    doc = run(cases, timeout=args.timeout, date=args.date, progress=say)
    report.publish(doc, "compile-time", markdown(doc, notes), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
