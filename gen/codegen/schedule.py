"""Pass ``schedule`` (per written function, run by :func:`gen.cwriter.write_function`):
whether the greedy list scheduler's order (:func:`gen.cwriter.schedule`) replaces
CasADi's tape order.  The order asked (``config.order``): "tape" never, "schedule" always, "auto" when the
tape keeps at least ``config.schedule_above`` values live on average and the schedule
brings that below ``config.schedule_below`` of it (a lane plan's statements: below
``schedule_below`` of the plan's order).  Recorded in :attr:`gen.cwriter.Written.scheduled`
(the manifest's ``codegen.scheduled``).

A function the greedy schedule is not kept for is written in
:func:`gen.cwriter.critical_order` (``config.order`` "critical", or "auto" when the tape
keeps fewer than ``config.critical_below`` values live on average) unless it is split
(:mod:`gen.codegen.split`: the order would move values across the parts' boundaries) or
its values live in the caller's work array (``avoid_stack``: no registers to order for,
and the work size stays CasADi's ``sz_w``); recorded in :attr:`gen.cwriter.Written.critical`."""
from __future__ import annotations

from typing import Callable

from .config import CodegenConfig


def worth_trying(config: CodegenConfig, order: str, tape_live: Callable[[], float]) -> bool:
    """Whether to compute the schedule at all for ``order`` (``tape_live``: the mean live
    values of the tape order, computed only for ``order="auto"``)."""
    return order != "tape" and (order == "schedule" or tape_live() >= config.schedule_above)


def keep(config: CodegenConfig, order: str, before: float, after: float) -> bool:
    """Whether the schedule (``after`` live values on average, ``before`` in the tape
    order) replaces the tape order."""
    return order == "schedule" or after < config.schedule_below * before


def keep_lanes(config: CodegenConfig, before: float, after: float) -> bool:
    """Whether a lane plan's statements are written in the scheduler's order."""
    return after < config.schedule_below * before


def critical(config: CodegenConfig, order: str, steps: int, split_above: int, avoid_stack: bool,
             tape_live: Callable[[], float]) -> bool:
    """Whether a function of ``steps`` statements the greedy schedule was not kept for
    is written in the critical-path order (``tape_live``: as :func:`worth_trying`'s)."""
    if order == "critical":
        return True
    return order == "auto" and not avoid_stack and steps <= split_above and tape_live() < config.critical_below
