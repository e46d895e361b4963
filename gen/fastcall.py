"""The fast call extension (``gen/fastcall.c``): compiled once per Python and NumPy ABI
into the cache and loaded by :mod:`gen.kernel`, which falls back to its pure-Python
(cffi) call where it cannot be compiled (no compiler or headers): same results, ~2 us
more per call.

The extension holds a kernel's function pointer and layout (:func:`caller`) and calls it
with NumPy arrays in one C-level step: the arrays' memory is read and written as it is,
outputs are created in the C's layout, the workspace is on the calling thread's C stack
(up to 4 kB, else allocated per call) and the GIL released during the C call.  :func:`install_dispatch` makes the extension's ``Dispatch``
the kernel class's ``__call__``, so that ``kernel(...)`` reaches the C without a Python
frame (the Python ``__call__`` it replaces costs ~0.3 us more per call)."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np

from .errors import tool_message

SOURCE = Path(__file__).with_name("fastcall.c")
NAME = "rbdgen_fastcall"


def _cache_root() -> Path:
    return Path(os.environ.get("RBDGEN_CACHE") or Path.home() / ".cache" / "rbdgen")


@functools.lru_cache(maxsize=1)
def module():
    """The compiled extension, or None where it cannot be built (the reason is in
    :data:`reason`)."""
    global reason
    text = SOURCE.read_bytes()
    key = hashlib.sha256(text + repr((sys.implementation.cache_tag, np.__version__,
                                      sysconfig.get_config_var("EXT_SUFFIX"))).encode()).hexdigest()[:16]
    folder = _cache_root() / "fastcall" / key
    path = folder / f"{NAME}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{os.getpid()}-{path.name}"
        cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")[:1] or ["cc"]
        cmd = [*cc, "-O2", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
               f"-I{np.get_include()}", str(SOURCE), "-o", str(tmp)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            reason = f"no C compiler ({e})"
            return None
        if res.returncode != 0:
            reason = f"compile failed: {tool_message(res.stderr or res.stdout)}"
            return None
        os.replace(tmp, path)                      # atomic: concurrent builders agree
    spec = importlib.util.spec_from_file_location(NAME, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:
        reason = f"import failed ({e})"
        return None
    return mod


reason = ""


def caller(ffi, lib, symbol: str, inputs, outputs, scalar_kinds, work: int, q_index: int | None,
           unit_slices, unit_tol: float, lanes: int = 0):
    """A ``Caller`` for ``lib.symbol`` (module docstring), or None without the extension.
    ``inputs``: sizes; ``outputs``: ``(rows, cols)``; ``scalar_kinds``: per output 0 (an
    array), 1 (an int) or 2 (a float); ``unit_tol`` on ``|norm^2 - 1|``; ``lanes``: a
    batched kernel's N (its calls then take ``(k, n)`` C-contiguous stacks)."""
    mod = module()
    if mod is None or len(inputs) + len(outputs) + 1 > 16:
        return None
    fn = int(ffi.cast("uintptr_t", ffi.addressof(lib, symbol)))
    return mod.Caller(fn, list(inputs), [r for r, _ in outputs], [c for _, c in outputs], list(scalar_kinds),
                      int(work), -1 if q_index is None else int(q_index),
                      [a for a, _ in unit_slices], [b for _, b in unit_slices], float(unit_tol), int(lanes))


def install_dispatch(cls) -> None:
    """``cls.__call__`` and ``cls.call`` = the extension's ``Dispatch``
    (``gen/fastcall.c``): it calls ``self._fast`` (a :func:`caller`) and hands
    ``self._slow(...)`` the calls it leaves (None) and ``self._after_fast(result, ...)`` a
    non-zero return code, which is what ``cls.__call__`` in Python does.  Once per class;
    nothing without the extension."""
    mod = module()
    if mod is not None:
        dispatch = mod.Dispatch()
        if type(cls.__dict__.get("__call__")) is not type(dispatch):
            cls.__call__ = cls.call = dispatch
