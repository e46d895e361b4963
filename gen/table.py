"""Tables as users read them: markdown, CSV or JSON (every command's ``--format``)."""
from __future__ import annotations

import csv
import io
import json

FORMATS = ("md", "csv", "json")


def _cell(x) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.1e}" if x == 0.0 or abs(x) < 1e-3 else f"{x:.3g}"
    return str(x)


def render_table(rows: list[dict], columns: list[str], fmt: str) -> str:
    """``rows`` (dicts keyed by ``columns``) as a markdown table, CSV or JSON list."""
    if fmt == "json":
        return json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    width = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in rows) and rows
               for c in columns]

    def line(vals):
        return "| " + " | ".join(v.rjust(w) if num else v.ljust(w)
                                 for v, w, num in zip(vals, width, numeric)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(width, numeric)) + "|"
    return "\n".join([line(columns), sep] + [line(r) for r in cells])
