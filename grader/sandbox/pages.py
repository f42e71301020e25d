"""Make forks cheap: back a process's anonymous memory with huge pages before it forks hundreds of children.

A fork copies one page-table entry per 4 KiB page of anonymous memory, and the exit of each child undoes it; with
torch loaded that is ~150 MiB, about 4 ms of kernel time per fork-and-exit. Collapsed into 2 MiB pages, the
same memory is one entry per huge page, and a fork costs half. Nothing about isolation changes: the pages are
still copied on write, only in larger units of bookkeeping.
"""

from __future__ import annotations

import ctypes
import os
import sys

HUGE_PAGE = 2 << 20
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25  # linux/mman.h; MADV_COLLAPSE needs Linux 6.1


def collapse_heap() -> int:
    """Collapse this process's private anonymous memory into huge pages where the kernel allows; return bytes."""
    if sys.platform != "linux":
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    for line in maps:
        fields = line.split()
        perms, name = fields[1], fields[5] if len(fields) > 5 else ""
        if not perms.startswith("rw") or perms[3] != "p" or name not in ("", "[heap]"):
            continue  # file-backed, shared or read-only: their page tables are not copied at fork anyway
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        start, end = (lo + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi & ~(HUGE_PAGE - 1)
        if end <= start:
            continue
        libc.madvise(start, end - start, MADV_HUGEPAGE)  # keep later growth huge too, where THP is "madvise"
        if libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            done += end - start
    return done


def huge_bytes() -> int:
    """Return how much of this process's anonymous memory is in huge pages (AnonHugePages)."""
    try:
        with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
