"""The one exception type users see.

Every user error (bad URDF, unknown robot, frame or algorithm, wrong array sizes,
singular models) raises :class:`RbdgenError` with a one-line message that names
the offending file, element or token.  The CLI prints ``rbdgen: error: <message>``
and exits with status 2; it never shows a traceback for these.  A compiler or a program
rbdgen built that fails is one such line too (:func:`run_tool`).
"""
import subprocess
from collections.abc import Sequence
from pathlib import Path


class RbdgenError(ValueError):
    """A user-facing error with a one-line, self-contained message."""


class NotConvergedWarning(RuntimeWarning):
    """An iterative solver stopped at ``max_iter`` before its residual reached ``tol``.

    Raised as a warning (not an error) by ``gen.run`` and by compiled kernels (whose C
    returns ``RBDGEN_ERR_NOT_CONVERGED``), because the outputs -- the last iterate and its
    true residual -- are still meaningful; ``warnings.simplefilter("error",
    NotConvergedWarning)`` turns it into an exception."""


def tool_message(output: str) -> str:
    """The line of a compiler's (or program's) output a one-line error shows: the first
    naming an error, else the last non-empty one."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "(no output)")


def run_tool(cmd: Sequence[str], what: str, cwd=None) -> str:
    """Run ``cmd`` (a compiler, or a program rbdgen built) and return its stdout; a
    missing program or a non-zero exit is one :class:`RbdgenError` line: ``what``, the
    program, its exit status and :func:`tool_message` of its stderr (else stdout)."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd)
    except OSError as e:
        raise RbdgenError(f"{what} failed: cannot run {cmd[0]} ({e.strerror or e})") from None
    if done.returncode != 0:
        raise RbdgenError(f"{what} failed: {Path(cmd[0]).name} exited with {done.returncode}: "
                          f"{tool_message(done.stderr or done.stdout)}")
    return done.stdout
