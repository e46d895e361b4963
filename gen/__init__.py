"""rbdgen: a symbolic code-generation compiler for rigid-body dynamics.

Public API (DESIGN §4): :func:`load_robot`, :func:`run`, :func:`opcount`, :func:`build`,
:class:`RbdgenError`.
"""
from .api import run
from .build import Kernel, build  # noqa: E402  gen.build(): trace, emit, compile (gen/build.py)
from .constraints import parse_constraints  # noqa: F401  gen.parse_constraints(robot, spec) (DESIGN §4)
from .errors import RbdgenError
from .robots import load_robot
from .version import __version__

__all__ = ["Kernel", "RbdgenError", "__version__", "build", "load_robot", "opcount", "parse_constraints", "run"]


def __getattr__(name: str):
    """``gen.opcount``, the op counter's API (:func:`opcount.api.opcount`, DESIGN §4),
    loaded on first use: the op counter imports gen's earlier stages, so this facade
    cannot import it while gen itself is being imported (PEP 562)."""
    if name == "opcount":
        from opcount.api import opcount
        return opcount
    raise AttributeError(f"module 'gen' has no attribute '{name}'")
