"""Give freed memory back to the operating system after a mass sleep.

Putting thousands of live crews to sleep frees their Python objects, but CPython's
allocator and the C library keep the pages for reuse: the resident set stays where it
was. :func:`give_back_memory` runs a full garbage collection and then, on glibc, asks
the C allocator to return free pages (``malloc_trim(0)``, through ``ctypes``). On other
C libraries (musl, macOS' libSystem) there is no such call: only the collection runs and
the function says so by returning ``False``. Nothing else changes; it is safe to call at
any time from any thread (it holds the GIL for the collection, then releases nothing
that Python still uses).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import platform
from collections.abc import Callable
from functools import cache

__all__ = ["give_back_memory"]


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library is not glibc."""
    if platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back_memory() -> bool:
    """Collect garbage, then return the C allocator's free pages to the system where
    the allocator allows it. ``True`` when pages were trimmed (glibc), ``False`` when
    only the collection ran (another C library)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
