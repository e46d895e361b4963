"""The hand-written generic C implementation (model passed as data) and its binding:
the baseline the specialised C is benchmarked against (DESIGN §5).

* ``rbg.h`` / ``rbg.c``: C99 library, ``rbg_model`` struct, ``rbg_<algo>`` functions,
  ``rbg_work_size`` (see :data:`HEADER`, :data:`SOURCES`);
* :mod:`.serialize`: a Model as the struct's arrays, or as a C initializer
  (:func:`model_to_c`) for a C benchmark program;
* :mod:`.binding`: :class:`GenericModel`, the library compiled with cffi and cached.
"""
from .binding import HEADER, INCLUDE_DIR, SOURCES, GenericModel, load_library, sources
from .serialize import STRUCT_FIELDS, model_to_c, serialize, work_sizes

__all__ = ["GenericModel", "HEADER", "INCLUDE_DIR", "SOURCES", "STRUCT_FIELDS", "load_library",
           "model_to_c", "serialize", "sources", "work_sizes"]
