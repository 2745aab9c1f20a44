"""``give_back_memory``: a full collection, then glibc's ``malloc_trim`` where it exists."""

from __future__ import annotations

import gc
import platform

from orkeon_actors.lifecycle import give_back_memory


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_it_collects_garbage_and_trims_only_on_glibc() -> None:
    gc.disable()
    try:
        cycles = [_Cycle() for _ in range(1000)]
        del cycles
        garbage_before = gc.get_count()[0]
        trimmed = give_back_memory()
        assert gc.get_count()[0] < garbage_before  # the cycles were collected
    finally:
        gc.enable()
    assert trimmed is (platform.libc_ver()[0] == "glibc")
