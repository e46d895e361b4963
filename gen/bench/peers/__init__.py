"""Benchmark peers: the implementations :func:`gen.bench.harness.benchmark` times beside
rbdgen's specialised C, one adapter module each, registered in :data:`PEERS` as the
algorithms are in the registry.

An adapter is ``plan(bench: Bench) -> Plan | str``: what the peer adds to the benchmark
program (:class:`~gen.bench.peers.base.Plan`: its implementation entry, its block of
``harness.c.j2``'s context, its C sources, include folders, link arguments and run-time
files), or why it does not compute this row on this model (a skip reason, reported in
the result's ``skipped``: the generic C on a loop between moving bodies, ADAM on a
fixed-base ABA, ...).

Adding a peer: one module here with ``plan``, one entry in :data:`PEERS`, one block in
``harness.c.j2`` (its set-up, call and output layout), a test in tests/test_bench.py."""
from __future__ import annotations

from . import adam, generic, mujoco, pinocchio
from .base import Bench, Plan

#: peer name -> adapter, in the program's order (its run-time arguments follow it)
PEERS = {"generic": generic.plan, "pinocchio": pinocchio.plan, "mujoco": mujoco.plan, "adam": adam.plan}

__all__ = ["PEERS", "Bench", "Plan"]
