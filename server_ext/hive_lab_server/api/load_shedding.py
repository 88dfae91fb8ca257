"""Load shedding: what hive-lab refuses at once (503 with Retry-After, cheap: before authentication, the
store or the core) rather than answer everything late.

- ``InFlight``: a bound on the requests served at once (issue 24: 8,565 requests in flight, answers after up
  to 60 s); reads and writes each have their own, so writes waiting for their group commit never crowd
  reads out. Requests that say whether the server is alive (``GET me``, ``GET metrics``) are never shed,
  nor counted.
- ``LoopLag``: how late the event loop runs. Every request waits for the loop, so a flood of submits that
  keeps it busy made every read wait behind it (issue 40: ``GET me`` p50 0.9 s at twice the sustainable
  submit rate). While the loop runs later than its limit and writes pour in (``flood_per_s``), writes are
  shed at the door, so the loop's work stays within what it can do and reads are answered; as
  kube-apiserver's priority and fairness keeps reads served under write floods.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

WRITES = frozenset({"POST", "PUT", "PATCH"})  # shed when the loop is late (a cancel, DELETE, sheds load: kept)


class InFlight:
    def __init__(self, limit: int):
        self.limit = limit  # 0: no bound
        self.count = 0
        self.shed = 0

    def enter(self) -> bool:
        """Count one more request; False (not counted) when ``limit`` are being served already."""
        if self.limit and self.count >= self.limit:
            self.shed += 1
            return False
        self.count += 1
        return True

    def leave(self) -> None:
        self.count -= 1


class LoopLag:
    """How late the event loop runs a callback due every ``interval_s``: ``lag_s`` follows a rise at once
    and halves towards the newer readings as they fall. ``overloaded()`` while it is above ``limit_s``
    (0: never)."""

    def __init__(self, limit_s: float, interval_s: float = 0.01, clock: Callable[[], float] = time.monotonic,
                 flood_per_s: int = 20):
        self.limit_s = limit_s
        # writes a second (this second's or the last one's) below which none is shed: a late loop with a few
        # writes is a machine busy with other work, not a flood, and they wait their turn
        self.flood_per_s = flood_per_s
        self._second = 0.0
        self._writes = [0, 0]  # [the last second's, this second's]
        self.interval_s = interval_s
        self.clock = clock
        self.lag_s = 0.0
        self.shed = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        if self.limit_s and self._handle is None:
            self._loop = asyncio.get_running_loop()
            self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self.clock() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        self.observe(self.clock() - self._due)
        self._schedule()

    def observe(self, late_s: float) -> None:
        late_s = max(0.0, late_s)
        self.lag_s = late_s if late_s >= self.lag_s else (self.lag_s + late_s) / 2

    def write(self) -> bool:
        """One more write arrived: True when it is to be shed (the loop is late and writes pour in)."""
        now = self.clock()
        if now - self._second >= 1.0:
            self._writes = [self._writes[1] if now - self._second < 2.0 else 0, 0]
            self._second = now
        self._writes[1] += 1
        if self.overloaded() and max(self._writes) >= self.flood_per_s:
            self.shed += 1
            return True
        return False

    def overloaded(self) -> bool:
        return bool(self.limit_s) and self.lag_s > self.limit_s
