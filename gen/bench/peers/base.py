"""What a benchmark peer reads (:class:`Bench`) and what it adds to the benchmark program
(:class:`Plan`); see :mod:`gen.bench.peers`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...algorithms.registry import Algorithm
from ...model import Model


def c_float(x: float) -> str:
    """``x`` as a C double literal (repr, with a decimal point)."""
    r = repr(float(x))
    return r if ("." in r or "e" in r or "n" in r) else r + ".0"


@dataclass(frozen=True)
class Bench:
    """One benchmark as the peers see it: the model, the registry row, the constraint set
    (None: unconstrained), the specialised kernel's manifest, the algorithm's options,
    the outputs compared (manifest order, ``compare`` False for bookkeeping outputs), the
    program's folder, the requested Pinocchio function (``--pin-peer``) and a progress
    callback."""

    model: Model
    algo: Algorithm
    cset: object
    manifest: dict
    options: dict
    outputs: list
    root: Path
    pin_peer: str | None = None
    progress: Callable[[str], None] | None = None

    def say(self, text: str):
        if self.progress:
            self.progress(text)


@dataclass
class Plan:
    """What a peer adds to the program: its implementation entry (``name``, ``key`` (the
    C identifiers' infix), ``kind``, ``work_size``, ``colmajor``), its block of the C
    template's context (``block``: the template's ``has_<block>`` / ``<block>``), C
    sources, include folders, link arguments, the Pinocchio shim to link with
    (``(ShimBuild, parts)``), the run's extra arguments (``(file name, bytes)`` written
    to the run's folder, or a path given as is), the outputs it computes differently
    (not compared), the fields its timing row reports (``report``) and a hook that
    adjusts the states every implementation runs on (``(states, offsets) -> None``)."""

    impl: dict
    block: str
    context: dict
    sources: list = field(default_factory=list)
    include_dirs: list = field(default_factory=list)
    link: tuple = ()
    shim: tuple | None = None
    args: list = field(default_factory=list)
    not_compared: tuple = ()
    report: dict = field(default_factory=dict)
    adjust_states: Callable | None = None
