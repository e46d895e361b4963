"""rbdgen: a symbolic code-generation compiler for rigid-body dynamics.

Public API (DESIGN §4): :func:`load_robot`, :func:`run`, :func:`opcount`, :func:`build`,
:class:`RbdgenError`.
"""
from .api import run
from .errors import RbdgenError
from .robots import load_robot

__all__ = ["RbdgenError", "load_robot", "run"]
__version__ = "0.1.0"
