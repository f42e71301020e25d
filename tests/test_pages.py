"""Huge pages before a batch's forks: cheaper forks, and the same copy-on-write walls as before."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from grader.sandbox import pages
from grader.sandbox.arena import Arena

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork and madvise are Linux's")


def _in_child(check) -> int:
    """Run check() in a forked child; return its exit code (0: it held)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if check() else 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_collapsed_heap_is_still_copied_on_write():
    arena = Arena()
    secret = arena.seal(torch.full((512, 1024), 7.0))  # 2 MiB of "true gradients"
    mine = bytearray(b"x" * (4 << 20))
    collapsed = pages.collapse_heap()
    if collapsed == 0:
        pytest.skip("this kernel cannot collapse memory into huge pages (MADV_COLLAPSE needs Linux 6.1)")

    def child_side():
        mine[0:1] = b"y"  # a write lands in the child's copy only
        arena.drop()  # the child's scrub still empties the secrets' pages
        return not secret.numpy().any() and mine[:1] == b"y"  # numpy: torch's thread pool does not survive fork

    assert _in_child(child_side) == 0, "the child saw the truth after its scrub, or could not write its own copy"
    assert mine[:1] == b"x", "a child's write reached the parent through a huge page"
    assert (secret.numpy() == 7.0).all(), "the child's scrub emptied the parent's secrets"


def test_collapse_reports_huge_pages_or_nothing():
    before = pages.huge_bytes()
    done = pages.collapse_heap()
    assert done >= 0
    if done:
        assert pages.huge_bytes() >= min(done, before + pages.HUGE_PAGE), "collapsed memory is not in huge pages"
