"""rbdgen: a symbolic code-generation compiler for rigid-body dynamics.

Public API (DESIGN §4): :func:`load_robot`, :func:`run`, :func:`opcount`, :func:`build`,
:class:`RbdgenError`.
"""
from opcount import opcount  # noqa: E402,F401  gen.opcount, the op counter's API (DESIGN §4)

from .api import run
from .build import Kernel, build  # noqa: E402  gen.build(): trace, emit, compile (gen/build.py)
from .constraints import parse_constraints  # noqa: F401  gen.parse_constraints(robot, spec) (DESIGN §4)
from .errors import RbdgenError
from .robots import load_robot
from .version import __version__

__all__ = ["Kernel", "RbdgenError", "__version__", "build", "load_robot", "opcount", "parse_constraints", "run"]
