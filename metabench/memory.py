"""glibc's malloc told to keep the memory a run frees, for the run's next allocations.

MAML-TRPO's outer step on ML10 builds and frees 8 GB or more of tensors every iteration (its
second-order graph over 200,000 steps of a 2x512 policy). glibc's malloc, as it comes, gives
much of that back to the kernel when it is freed (it unmaps large chunks and trims the heap's
top), and the memory is then new to the process again: each 4 KiB page written next costs a page
fault. On a 2-core virtual machine that was 3.3 million faults in a run's first full-size step
and up to 1.6 million in a later one, at about 7 us each; with the memory kept, 1.9 million and
16,000-63,000, and the steps took 103 s instead of 117 s and 88-89 s instead of 89-97 s
(``docs/speed.md``, ``scripts/bench_freed_memory.py``). The numbers do not change, bit for bit
(the full-size step's parameters and the tiny runs' fingerprints, compared): PyTorch aligns
every tensor to 64 bytes wherever its memory comes from.

A run's memory then stays at its peak between iterations instead of falling back, and it
reaches that peak again in every iteration anyway. jemalloc and tcmalloc keep freed memory
too, but only when preloaded before the process starts (``LD_PRELOAD``); ``mallopt`` is glibc's
own switch and works from inside a running process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform

__all__ = ["MMAP_THRESHOLD", "retain_freed_memory"]

M_TRIM_THRESHOLD = -1
"""``mallopt``'s parameter for the free heap top above which ``free`` returns memory (glibc's
``malloc.h``); -1 disables trimming (``man 3 mallopt``)."""
M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter for the size from which ``malloc`` maps memory of its own."""
MMAP_THRESHOLD = 32 * 1024 * 1024
"""The largest mmap threshold glibc accepts on 64-bit (``HEAP_MAX_SIZE / 2``): tensors up to this
size come from the heap, and keep their pages when freed."""


@functools.cache
def retain_freed_memory() -> bool:
    """Have this process's malloc keep freed memory (see the module doc); once per process, and
    inherited by the env worker processes it forks afterwards.

    :return: whether the settings took effect: ``False`` where the C library is not glibc (macOS,
        musl), whose allocators are left as they are.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    trimmed = libc.mallopt(M_TRIM_THRESHOLD, -1)
    mapped = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return bool(trimmed and mapped)
