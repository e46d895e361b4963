"""The rbdgen version, recorded in every emitted build folder."""
__version__ = "0.1.0"
