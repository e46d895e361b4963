"""``python -m gen.regenerate``: the one command that rewrites every committed artefact
that is a function of the code alone (run it from the repository root after changing the
generator, its templates or an algorithm, then review the diff and commit):

* ``generated/`` -- the reference build folders the golden test diffs
  (:func:`gen.emit.update_generated`);
* ``opcount/reports/`` -- op counts per named robot and on the named constraint sets
  (:mod:`opcount.report`), and analytical vs AD derivatives (:mod:`opcount.derivatives`).

Measurements (``bench/reports/``) depend on the machine and are written by the commands
that take them: ``rbdgen bench --suite``, ``rbdgen bench --constrained-suite``,
``rbdgen scaling``, ``rbdgen simulate``, ``python -m gen.bench.callgrind``.
"""
from __future__ import annotations

import sys

from opcount import derivatives, report

from .emit import update_generated


def main() -> int:
    def say(msg):
        print(f"rbdgen: {msg}", file=sys.stderr)

    changed = update_generated(progress=say)
    print("generated/: " + (", ".join(changed) if changed else "nothing changed"))
    report.main([])
    derivatives.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
