"""Python's cyclic garbage collector, paused while a replay runs.

A replay allocates hundreds of thousands of objects that live until it ends (decision lines, jobs, their
placements) and few reference cycles (the benchmark week's replay: about 1,400 objects of cyclic garbage
in all). CPython's collector runs after every 700 net allocations and, as the heap grows, its full
passes walk everything allocated so far, again and again: a fifth of the week's replay time, all of it
wasted. Paused, reference counting still frees everything the replay drops at once; what is
cyclic garbage waits for the next collection after the replay.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; enable it again after, if it was enabled before
    (nested blocks, or a caller that disabled it itself, leave it as they found it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
