"""The plan the code-generation passes fill: the traced graph, the config, and each
pass's decision; :meth:`KernelPlan.manifest` is its serialisation, the ``codegen`` part of
a build folder's ``manifest.json``.

The passes (:data:`gen.codegen.pipeline.PASSES`, in order) each set their own fields:

================  ==========================================================================
``functions``     ``prefix``, ``funcs`` (the entry points' CasADi functions), ``driver``
``batch``         ``batch`` (N states per call or None) and the refusals needing the trace
``products``      ``loops``: the products written as C loops (none in a batched kernel)
``lanes``         ``lane_plans`` (per written function, None: on doubles) and ``head``
``trig``          ``trig``: the scalar kernel's sin and cos as written, ``trig_code``
``output_check``  ``output_checks``: per output the entries the wrapper checks for inf / NaN
``write``         ``writer``, ``code``, ``written``: per function its :class:`gen.cwriter.Written`,
                  which records the zero-fill, schedule and split decisions
``pressure``      ``gcc_pressure``: whether the kernel file asks GCC for its pressure-aware
                  scheduling (and ``code`` with the pragma)
================  ==========================================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..lanes import manifest as lanes_manifest
from ..products import manifest as products_manifest
from .config import CodegenConfig


@dataclass
class KernelPlan:
    """One kernel's code generation: ``trace`` (a :class:`gen.trace.Trace` or
    :class:`gen.trace.DriverTrace`), ``config`` and what the passes decided."""

    trace: object
    config: CodegenConfig
    prefix: str = ""
    funcs: list = field(default_factory=list)
    driver: dict | None = None
    runtime: dict | None = None
    batch: int | None = None
    loops: list = field(default_factory=list)
    #: the function(s) the scalar writers write (the kernel's, a driver's three, or a
    #: product kernel's SX head) and, for a product kernel, the head's loop layout
    written_funcs: list = field(default_factory=list)
    head_layout: list | None = None
    lane_plans: list = field(default_factory=list)
    trig: str = "libm"
    trig_code: dict = field(default_factory=dict)
    #: per output of the kernel function, the ``(start, length)`` runs the wrapper checks
    #: for inf and NaN (None in the list: the whole output; None: every output whole);
    #: :mod:`gen.codegen.output_check`
    output_checks: list | None = None
    writer: str = ""
    code: str = ""
    written: list | None = None
    gcc_pressure: bool = False

    @property
    def uses_lanes(self) -> bool:
        """Whether the lanes pass may plan lanes (``config.lanes``, the ``auto`` order,
        locals, not batched)."""
        c = self.config
        return c.lanes and c.order == "auto" and not c.avoid_stack and not self.batch

    def decisions(self) -> dict:
        """Every pass's decision, for reading a plan (not serialised: the manifest keeps
        :meth:`manifest`'s)."""
        return {"batch": self.batch, "functions": [f.name() for f in self.funcs],
                "products": len(self.loops), "lanes": [p is not None for p in self.lane_plans],
                "trig": self.trig, "writer": self.writer,
                "output_checks": None if self.output_checks is None else
                [None if r is None else sum(n for _, n in r) for r in self.output_checks],
                "written": None if self.written is None else
                [{"parts": w.parts, "scheduled": w.scheduled, "zero_filled": list(w.filled)} for w in self.written]}

    def manifest(self) -> dict:
        """The manifest's ``codegen``: ``avoid_stack``, per function its ``parts`` and
        whether it was ``scheduled`` or in the ``critical`` order; ``gcc_pressure`` when the
        kernel file asks GCC for its pressure-aware scheduling; ``lanes`` (:func:`gen.lanes.manifest`) when any
        function has lanes, ``products`` (:func:`gen.products.manifest`) when any product
        is written as loops."""
        written = self.written
        out = {"avoid_stack": bool(self.config.avoid_stack),
               "parts": [w.parts for w in written] if written else [1],
               "scheduled": [w.scheduled for w in written] if written else [False],
               "critical": [w.critical for w in written] if written else [False]}
        if any(self.lane_plans):
            out["lanes"] = lanes_manifest(self.trace.model, self.lane_plans)
        if self.loops:
            out["products"] = products_manifest(self.trace, self.loops)
        if self.gcc_pressure:
            out["gcc_pressure"] = True
        return out
