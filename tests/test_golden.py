"""Golden files (docs/DESIGN.md §3.7, §6d): the committed C under ``generated/`` equals what the
current code emits for the reference set (ur5, solo12, talos x rnea, crba, aba).

A difference means the emitted C changed: review it, then update the committed files
with ``RBDGEN_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` or
``python -m gen.regenerate`` and commit them with the change.
"""
import difflib
import os

import pytest
from conftest import load_or_skip

from gen.emit import GENERATED_DIR, REFERENCE_SET, render_reference, update_generated

UPDATE = os.environ.get("RBDGEN_UPDATE_GOLDEN") == "1"
HOW = ("update with `RBDGEN_UPDATE_GOLDEN=1 pytest tests/test_golden.py` "
       "or `python -m gen.regenerate`, review the diff and commit generated/")


def _render_or_skip(robot, algorithm):
    load_or_skip(robot)               # skips a named robot without example-robot-data only
    return render_reference(robot, algorithm)


@pytest.mark.parametrize("robot,algorithm", REFERENCE_SET, ids=[f"{r}-{a}" for r, a in REFERENCE_SET])
def test_generated_c_is_up_to_date(robot, algorithm):
    name, files = _render_or_skip(robot, algorithm)
    folder = GENERATED_DIR / name
    if UPDATE:
        update_generated(reference=[(robot, algorithm)])
    assert folder.is_dir(), f"generated/{name} is missing; {HOW}"
    committed = {p.name for p in folder.iterdir()}
    assert committed == set(files), \
        f"generated/{name}: files {sorted(committed)} != emitted {sorted(files)}; {HOW}"
    for fname, text in files.items():
        old = (folder / fname).read_text(encoding="utf-8")
        if old != text:
            diff = "".join(list(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                     f"generated/{name}/{fname}", "emitted", n=1))[:40])
            pytest.fail(f"generated/{name}/{fname} is out of date; {HOW}\n{diff}")


def test_no_stale_generated_folders():
    expected = set()
    for robot, algorithm in REFERENCE_SET:
        from gen.emit import symbol_prefix

        expected.add(symbol_prefix(robot, algorithm))
    present = {p.name for p in GENERATED_DIR.iterdir() if p.is_dir()} if GENERATED_DIR.is_dir() else set()
    assert present <= expected, f"stale folders under generated/: {sorted(present - expected)}; remove them"
