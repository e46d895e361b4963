"""The one exception type users see.

Every user error (bad URDF, unknown robot, frame or algorithm, wrong array sizes,
singular models) raises :class:`RbdgenError` with a one-line message that names
the offending file, element or token.  The CLI prints ``rbdgen: error: <message>``
and exits with status 2; it never shows a traceback for these.
"""


class RbdgenError(ValueError):
    """A user-facing error with a one-line, self-contained message."""
