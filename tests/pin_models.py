"""Pinocchio for the tests: models of the named robots (the same builder the CLI's
``verify`` uses, ``gen.pinref.pin_model``: ``buildModelFromUrdf`` with a free-flyer root
when floating, ``buildReducedModel`` at neutral for locked joints, cached per process), and
whether a part of the C++ shim is compiled or cheap to compile."""
import importlib.util
import os

from gen.pinref import pin_model  # noqa: F401  (re-exported for the test modules)


def shim_part_ready(part: str) -> bool:
    """The Pinocchio shim's ``part`` (``constrained``, ``impulse``, ...) can be used: it is
    compiled, or the shim is in library mode (``$RBDGEN_PINSHIM_MODE=library``, as
    tests/conftest.py sets it) and the part is one of ``gen.bench.pinshim.LIBRARY_PARTS``, or
    ``RBDGEN_TEST_CONSTRAINED_SHIM`` asks the tests to build it (minutes of g++); tests
    against it skip otherwise.  Checks files only: the shim is never loaded here."""
    if importlib.util.find_spec("pinocchio") is None:
        return False
    if os.environ.get("RBDGEN_TEST_CONSTRAINED_SHIM"):
        return True
    from gen.bench import pinshim

    if pinshim.shim_mode() == "library" and part in pinshim.LIBRARY_PARTS:   # a bad mode name fails
        return True
    try:
        return pinshim.is_built([part])
    except Exception:
        return False
