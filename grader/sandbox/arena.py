"""Memory for the grader's secrets (true gradients), which a sandbox child drops in one call.

Zeroing hundreds of tensors in every child costs a copy-on-write of each page they touch. Kept together in
anonymous mappings instead, they vanish from a child's copy of memory with one madvise(MADV_DONTNEED) per
mapping: the pages read as zeros afterwards, and nothing is copied.
"""

from __future__ import annotations

import mmap

import torch

CHUNK = 8 << 20
ALIGN = 64


class Arena:
    """Anonymous mappings that hold copies of secret tensors."""

    def __init__(self):
        self.chunks: list[mmap.mmap] = []
        self.used = 0
        self.ranges: list[tuple[int, int]] = []

    def seal(self, t: torch.Tensor) -> torch.Tensor:
        """Return a copy of t that lives in the arena."""
        t = t.detach()
        if t.numel() == 0:
            return t.clone()
        return self.alloc(t.dtype, tuple(t.shape)).copy_(t)

    def alloc(self, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
        """Return an uninitialised tensor that lives in the arena."""
        numel = 1
        for s in shape:
            numel *= s
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        size = -(-numel * torch.empty(0, dtype=dtype).element_size() // ALIGN) * ALIGN
        if not self.chunks or self.used + size > len(self.chunks[-1]):
            chunk = mmap.mmap(-1, max(CHUNK, size), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self.chunks.append(chunk)
            self.used = 0
            start = torch.frombuffer(chunk, dtype=torch.uint8, count=1).data_ptr()
            self.ranges.append((start, start + len(chunk)))
        out = torch.frombuffer(self.chunks[-1], dtype=dtype, count=numel, offset=self.used).view(shape)
        self.used += size
        return out

    def holds(self, t: torch.Tensor) -> bool:
        """Return whether t's memory lies in the arena."""
        ptr = t.data_ptr()
        return any(start <= ptr < end for start, end in self.ranges)

    def drop(self):
        """Make every secret read as zeros in this process's memory, without copying a page."""
        for chunk in self.chunks:
            chunk.madvise(mmap.MADV_DONTNEED)


ARENA = Arena()


def seal_all(tensors: dict) -> dict:
    """Return the dict with every tensor moved into the arena."""
    return {k: ARENA.seal(v) if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}
