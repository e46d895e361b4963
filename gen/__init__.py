"""rbdgen: a symbolic code-generation compiler for rigid-body dynamics.

Public API (docs/DESIGN.md §4): :func:`load_robot`, :func:`run`, :func:`opcount`, :func:`build`,
:func:`casadi_function`, :func:`casadi_external`, :func:`casadi_library`, :class:`RbdgenError`.
"""
from .build import Kernel, build  # noqa: E402  gen.build(): trace, emit, compile (gen/build.py)
from .choose import (  # gen.run / gen.opcount, accepting -a auto, auto_osim (gen/choose.py)
    opcount,
    run,
)
from .constraint_spec import parse_constraints  # noqa: F401  gen.parse_constraints(robot, spec) (docs/DESIGN.md §4)
from .errors import RbdgenError
from .robots import load_robot
from .version import __version__

__all__ = ["Kernel", "RbdgenError", "__version__", "build", "casadi_external", "casadi_function",
           "casadi_library", "load_robot",
           "opcount", "parse_constraints", "run"]

#: names served by gen/casadi_api.py, imported on first use: it imports gen.emit, which
#: ``import gen`` leaves out so that ``python -m gen.emit`` runs it fresh
CASADI_API = ("casadi_function", "casadi_external", "casadi_library")


def __getattr__(name: str):
    """Lazy facade attributes (PEP 562): :data:`CASADI_API`.  (``gen.opcount``, the op
    counter's API, docs/DESIGN.md §4, is :func:`gen.choose.opcount`, imported above.)"""
    if name in CASADI_API:
        from . import casadi_api
        return getattr(casadi_api, name)
    raise AttributeError(f"module 'gen' has no attribute '{name}'")
