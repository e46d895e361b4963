"""The one exception type users see.

Every user error (bad URDF, unknown robot, frame or algorithm, wrong array sizes,
singular models) raises :class:`RbdgenError` with a one-line message that names
the offending file, element or token.  The CLI prints ``rbdgen: error: <message>``
and exits with status 2; it never shows a traceback for these.
"""


class RbdgenError(ValueError):
    """A user-facing error with a one-line, self-contained message."""


class NotConvergedWarning(RuntimeWarning):
    """An iterative solver stopped at ``max_iter`` before its residual reached ``tol``.

    Raised as a warning (not an error) by ``gen.run`` and by compiled kernels (whose C
    returns ``RBDGEN_ERR_NOT_CONVERGED``), because the outputs -- the last iterate and its
    true residual -- are still meaningful; ``warnings.simplefilter("error",
    NotConvergedWarning)`` turns it into an exception."""
