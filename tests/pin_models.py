"""Pinocchio models of the named robots for the tests: the same builder the CLI's
``verify`` uses (``gen.pinref.pin_model``: ``buildModelFromUrdf`` with a free-flyer root
when floating, ``buildReducedModel`` at neutral for locked joints), cached per process."""
from gen.pinref import pin_model  # noqa: F401  (re-exported for the test modules)
