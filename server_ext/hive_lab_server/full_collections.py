"""Python's full garbage collections on a timer instead of when its allocation counters say so (issue 40).

A full collection walks every object the collector tracks and blocks the event loop while it does: with
10,000 unfinished jobs ~100-240 ms each. Python starts one after every 10 collections of its middle
generation once the objects that survived them add up to a quarter of the old ones, which a flood of
submits (each leaves a job's objects behind) meets over and over: bench_reads saw 28 full collections in a
minute, 2.9 s of a stopped loop, and they set the worst reads' latency. ``TimedFullCollections`` takes the
full collections off Python's counters (its third threshold: never on its own) and runs one every
``interval_s`` on the loop instead. The two young generations are collected as before, so short-lived
cycles still go at once; only cycles among old objects wait, at most ``interval_s``. The last ``stop`` puts
Python's thresholds back (the process's thresholds are one: timers of two servers in one process, as in
tests, share them).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Callable

NEVER = 2**31 - 1  # middle-generation collections before a full one: never, on Python's own count


class TimedFullCollections:
    _running = 0                                     # timers started and not stopped, in this process
    _saved: tuple[int, int, int] | None = None       # Python's thresholds before the first of them

    def __init__(self, interval_s: float, collect: Callable[[int], int] = gc.collect):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.interval_s = interval_s
        self.collect = collect
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._handle is not None:
            return
        cls = TimedFullCollections
        if cls._running == 0:
            cls._saved = gc.get_threshold()
        cls._running += 1
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

    def stop(self) -> None:
        if self._handle is None:
            return
        self._handle.cancel()
        self._handle = None
        cls = TimedFullCollections
        cls._running -= 1
        if cls._running == 0 and cls._saved is not None:
            gc.set_threshold(*cls._saved)
            cls._saved = None

    def _tick(self) -> None:
        try:
            self.collect(2)
        finally:
            if self._handle is not None:  # (not stopped meanwhile)
                self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._tick)
