"""Pass ``split`` (per written function, run by :func:`gen.cwriter.write_function`):
whether a function's statements become ``static`` ``noinline`` parts, and of which size,
so gcc's time and memory stay linear (:func:`gen.cwriter._split` writes them).  A
function of more than ``split_above`` statements (``config.split_above``) is cut into parts of ``config.part_size`` (never longer
than ``split_above``).  Recorded in :attr:`gen.cwriter.Written.parts` (the manifest's
``codegen.parts``)."""
from __future__ import annotations

from .config import CodegenConfig


def part_size(config: CodegenConfig, statements: int, split_above: int, size: int | None = None) -> int | None:
    """The statements per part, or None when the function stays one (``split_above``
    resolved by the caller; ``size``: a part size given explicitly instead of the
    config's)."""
    size = min(config.part_size if size is None else size, split_above)
    return None if statements <= split_above else size
