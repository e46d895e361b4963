"""The hand-written generic C implementation (model passed as data) and its binding:
the baseline the specialised C is benchmarked against (docs/DESIGN.md §5).

* ``rbg.h`` / ``rbg.c``: C99 library, ``rbg_model`` struct, ``rbg_<algo>`` functions,
  ``rbg_work_size`` (see :data:`HEADER`, :data:`SOURCES`); every joint kind of
  :mod:`gen.model` (revolute, continuous, prismatic, spherical, planar, helical, free),
  mimic joints excepted;
* ``rbg_constrained.c``: constraint sets (``rbg_constraints``) and the four proximal
  solvers (``rbg_prox_ltl``, ``rbg_prox_ltls``, ``rbg_constrained_aba``, ``rbg_prox_pv``);
* ``rbg_delassus.c``: the Delassus matrix and the damped Delassus inverses
  (``rbg_delassus``, ``rbg_ltl_osim``, ``rbg_caba_osim``, ``rbg_kkt_osim``);
* ``rbg_events.c``: unilateral constraints (``rbg_prox_lcp``) and the impact map
  (``rbg_impulse``);
* :mod:`.serialize`: a Model (and a constraint set) as the structs' arrays, or as C
  initializers (:func:`model_to_c`, :func:`constraints_to_c`) for a C benchmark program;
* :mod:`.binding`: :class:`GenericModel`, the library compiled with cffi and cached.
"""
from .binding import HEADER, INCLUDE_DIR, SOURCES, GenericModel, load_library, sources
from .serialize import (
                        STRUCT_FIELDS,
                        constrained_work_sizes,
                        constraints_to_c,
                        delassus_work_sizes,
                        event_work_sizes,
                        model_to_c,
                        serialize,
                        serialize_constraints,
                        work_sizes,
)

__all__ = ["GenericModel", "HEADER", "INCLUDE_DIR", "SOURCES", "STRUCT_FIELDS", "constrained_work_sizes",
           "constraints_to_c", "delassus_work_sizes", "event_work_sizes", "load_library", "model_to_c", "serialize",
           "serialize_constraints", "sources", "work_sizes"]
