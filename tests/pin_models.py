"""Pinocchio for the tests: models of the named robots (the same builder the CLI's
``verify`` uses, ``gen.pinref.pin_model``: ``buildModelFromUrdf`` with a free-flyer root
when floating, ``buildReducedModel`` at neutral for locked joints, cached per process), and
whether a part of the C++ shim is compiled or cheap to compile."""
import importlib.util
import os

from gen.pinref import pin_model  # noqa: F401  (re-exported for the test modules)

#: the shim's parts that library mode (gen.bench.pinshim) compiles cheaply, because the
#: wheel's libpinocchio_default.so holds their algorithms: g++ 12 CPU seconds at -O0,
#: library mode against header-only, core 17 / 25, rnea 6 / 28, crba 7 / 46, aba 6 / 58,
#: constrained 27 / 45 (test_velocity_constraints builds it anyway), impulse 6 / 65,
#: derivatives 9 / 134.  The library has no lcaba, damped Delassus inverse, impulse-dynamics
#: derivatives or second-order derivatives: contact (175 / 184), constrained_derivatives
#: (148) and second_order (48 / 42) cost the same in both modes and stay opt-in.
LIBRARY_CHEAP_PARTS = frozenset({"core", "rnea", "crba", "aba", "constrained", "impulse", "derivatives"})


def shim_part_ready(part: str) -> bool:
    """The Pinocchio shim's ``part`` (``constrained``, ``impulse``, ...) can be used: it is
    compiled, or the shim is in library mode (``$RBDGEN_PINSHIM_MODE=library``, as
    tests/conftest.py sets it) and the part is one of :data:`LIBRARY_CHEAP_PARTS`, or
    ``RBDGEN_TEST_CONSTRAINED_SHIM`` asks the tests to build it (minutes of g++); tests
    against it skip otherwise.  Checks files only: the shim is never loaded here."""
    if importlib.util.find_spec("pinocchio") is None:
        return False
    if os.environ.get("RBDGEN_TEST_CONSTRAINED_SHIM"):
        return True
    from gen.bench import pinshim

    if pinshim.shim_mode() == "library" and part in LIBRARY_CHEAP_PARTS:   # a bad mode name fails
        return True
    try:
        return pinshim.is_built([part])
    except Exception:
        return False
