"""Benchmarks (docs/DESIGN.md §5): the Pinocchio C++ shim (:mod:`.pinshim`), the C timing harness
(:mod:`.harness`), the suite and its reports (:mod:`.suite`) and the ``rbdgen bench``
command (:mod:`.cli`).  Importing this package imports neither Pinocchio nor a compiler."""
